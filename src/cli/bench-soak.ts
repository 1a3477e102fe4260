import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RealtimeClient } from "../client/index.ts";
import { readWavFile } from "../infra/audio/index.ts";
import { speechOf } from "./input-speech.ts";
import { rssMib } from "./load/proc.ts";
import { freePort, startServerProcess } from "./server-process.ts";

/**
 * `duplex bench --only soak`: one long session against a real server process. It streams `seconds` of real speech
 * (speech_60s_16k.wav, repeated) in 100 ms appends, as fast as the server accepts it or (`pace: realtime`) in real
 * time, and samples the server's resident memory (VmRSS of /proc/PID/status, MiB) once a second. Prints the RSS at
 * the start and the end, its peak, the end-to-start ratio (the baseline: the same process before the stream), RSS and
 * V8 heap in use after each quarter of the stream (flat, or growing), the utterances heard and answered, the seconds
 * of model audio received, and the store's size on disk (MiB, and MB per session-hour of audio streamed). Issue 8:
 * the queue of an overlapping lane must not grow the process; issue 10: the log's size per session-hour.
 */
export interface SoakOptions {
  readonly audioDir: string;
  /** Seconds of audio to stream (the run: 7200). */
  readonly seconds: number;
  /** `native`: the default lane (the model answers when speech stops); `turn`: server VAD commits and responds. */
  readonly lane: "native" | "turn";
  /** `fast`: as fast as the server accepts; `realtime`: 100 ms of audio every 100 ms, as a microphone sends it. */
  readonly pace?: "fast" | "realtime";
  readonly print: (line: Record<string, unknown>) => void;
}

/** The server's V8 heap in use, MiB, from its /metrics (prom-client's `nodejs_heap_size_used_bytes`). */
const heapUsedMib = async (port: number): Promise<number> => {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const bytes = Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? Number.NaN);
  return Math.round((bytes / 2 ** 20) * 10) / 10;
};

export const benchSoak = async (o: SoakOptions): Promise<void> => {
  const dir = await mkdtemp(join(tmpdir(), "duplex-soak-"));
  const port = await freePort();
  const { child } = await startServerProcess(port, dir);
  const pid = child.pid ?? 0;
  const samples: number[] = [];
  const sampler = setInterval(() => {
    const mib = rssMib(pid);
    if (!Number.isNaN(mib)) samples.push(mib);
  }, 1000);
  try {
    const speech = (await readWavFile(join(o.audioDir, "speech_60s_16k.wav"))).samples;
    // The model-native lane sends no speech events: its utterances are where the file's speech stops (Silero on the
    // client, with the server VAD's rule), counted each time the loop passes one.
    const stops = o.lane === "turn" ? [] : (await speechOf(speech, 16000)).map((s) => s.stoppedAtMs);
    const fileMs = ((speech.length - (speech.length % 1600)) / 16000) * 1000;
    const client = await RealtimeClient.connect(`ws://127.0.0.1:${port}/v1/realtime`);
    client.send({
      type: "session.update",
      session: {
        input_sample_rate_hz: 16000,
        ...(o.lane === "turn" ? { turn_detection: { type: "server_vad" } } : {}),
      },
    });
    await client.waitFor("session.updated", { since: 0 });
    const rssStart = rssMib(pid);
    const started = performance.now();
    const appends = Math.round(o.seconds * 10);
    let utterances = 0;
    /** Bytes of the model's audio received (24 kHz PCM16), from the deltas' base64 length. */
    let audioOutBytes = 0;
    let responses = 0;
    const count = () => {
      for (const { event } of client.received) {
        if (event.type === "response.output_audio.delta") audioOutBytes += (String(event.delta).length * 3) / 4;
        if (o.lane === "turn" && event.type === "input_audio_buffer.speech_stopped") utterances += 1;
        if (event.type === "response.done") responses += 1;
      }
      // The client keeps what it received; the figures are counted, the events are not needed.
      client.received.length = 0;
    };
    const rssByQuarter: number[] = [];
    const heapByQuarter: number[] = [];
    for (let n = 0; n < appends; n += 1) {
      if (n > 0 && n % Math.ceil(appends / 4) === 0) {
        rssByQuarter.push(rssMib(pid));
        heapByQuarter.push(await heapUsedMib(port));
      }
      const offset = (n * 1600) % (speech.length - (speech.length % 1600));
      client.appendSamples(speech.subarray(offset, offset + 1600), { sampleRateHz: 16000 });
      const atMs = (offset / 16000) * 1000;
      utterances += stops.filter((stop) => stop > atMs && stop <= atMs + 100 && stop <= fileMs).length;
      // In real time: each append at its time on the audio's clock (no drift from late timers).
      if (o.pace === "realtime") {
        const due = started + (n + 1) * 100 - performance.now();
        if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
      }
      // As fast as accepted: wait for the server to have handled each second of audio before sending more.
      if (n % 10 === 9) {
        client.send({ type: "session.heartbeat" });
        await client.waitFor("session.heartbeat_ack", { timeoutMs: 60_000 });
        count();
      }
    }
    const wallS = (performance.now() - started) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 2000));
    count();
    const rssEnd = rssMib(pid);
    rssByQuarter.push(rssEnd);
    heapByQuarter.push(await heapUsedMib(port));
    await client.close();
    let storeBytes = 0;
    for (const file of ["duplex.sqlite", "duplex.sqlite-wal"])
      storeBytes += await stat(join(dir, file)).then(
        (s) => s.size,
        () => 0,
      );
    o.print({
      bench: "soak",
      meaning:
        "one long session: rss_mib_by_quarter and heap_used_mib_by_quarter should stay flat (growth means a leak); rss_end_to_start against the process before the stream",
      lane: o.lane,
      pace: o.pace ?? "fast",
      audio_s: o.seconds,
      wall_s: Math.round(wallS),
      x_real_time: Math.round(o.seconds / wallS),
      rss_mib_start: rssStart,
      rss_mib_end: rssEnd,
      rss_mib_peak: Math.max(rssStart, rssEnd, ...samples),
      rss_end_to_start: Math.round((rssEnd / rssStart) * 100) / 100,
      rss_mib_by_quarter: rssByQuarter,
      heap_used_mib_by_quarter: heapByQuarter,
      utterances,
      responses,
      store_mib: Math.round(storeBytes / 2 ** 20),
      store_mb_per_session_hour: Math.round((storeBytes / 1e6) * (3600 / o.seconds)),
      audio_out_s: Math.round(audioOutBytes / 48_000),
    });
  } finally {
    clearInterval(sampler);
    child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  }
};
