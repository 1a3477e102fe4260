import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { RealtimeClient } from "../client/index.ts";
import { SERVER_VAD_DEFAULTS } from "../domain/index.ts";
import { readWavFile } from "../infra/audio/index.ts";
import { type SpeechSegment, speechOf } from "./input-speech.ts";
import { rssMib } from "./load/proc.ts";
import { freePort, startServerProcess } from "./server-process.ts";

/**
 * `duplex bench --only soak`: one long session against a real server process. It streams `seconds` of real speech
 * (speech_60s_16k.wav, repeated) in 100 ms appends, as fast as the server accepts it or (`pace: realtime`) in real
 * time, and samples the server's resident memory (VmRSS of /proc/PID/status, MiB) once a second. Prints the RSS at
 * the start and the end, its peak, the end-to-start ratio (the baseline: the same process before the stream), RSS and
 * V8 heap in use after each quarter of the stream (flat, or growing), the utterances heard and answered, the seconds
 * of model audio received and its share of the stream, and the store's size on disk once its WAL is checkpointed
 * (MiB; MB per session-hour of audio streamed, in all and its audio blobs alone; entries per session-hour). Issue 8:
 * the queue of an overlapping lane must not grow the process; issues 10 and 24: the log's size per session-hour.
 */
export interface SoakOptions {
  readonly audioDir: string;
  /** Seconds of audio to stream (the run: 7200). */
  readonly seconds: number;
  /** `native`: the default lane (the model answers when speech stops); `turn`: server VAD commits and responds. */
  readonly lane: "native" | "turn";
  /** `fast`: as fast as the server accepts; `realtime`: 100 ms of audio every 100 ms, as a microphone sends it. */
  readonly pace?: "fast" | "realtime";
  /**
   * `stream` (default): speech_60s_16k.wav as it is, looped (the user speaks most of the time, the model answers
   * over it); `conversation`: each utterance of the file, then the file's own room tone for twice the utterance's
   * length plus the endpointer's silence window (the model answers, then a pause), so that the user and the model
   * each speak about a third of the time (issue 24: the log's size at a third).
   */
  readonly pattern?: "stream" | "conversation";
  readonly print: (line: Record<string, unknown>) => void;
}

/** The server's V8 heap in use, MiB, from its /metrics (prom-client's `nodejs_heap_size_used_bytes`). */
const heapUsedMib = async (port: number): Promise<number> => {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const bytes = Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? Number.NaN);
  return Math.round((bytes / 2 ** 20) * 10) / 10;
};

/** Samples (16 kHz) of 100 ms; the room tone is the file's quietest tenth of these, in the file's order. */
const CHUNK = 1600;

/**
 * The `conversation` pattern of `speech` (PCM16 mono, 16 kHz, its utterances in `segments`): each utterance, then
 * room tone for twice its length plus the endpointer's silence window. The room tone is the recording's own noise
 * floor (its quietest 100 ms chunks, looped), not digital silence, which would pack to almost nothing and flatter
 * the log's size.
 */
const conversationOf = (speech: Int16Array, segments: readonly SpeechSegment[]): Int16Array => {
  const chunks: { at: number; rms: number }[] = [];
  for (let at = 0; at + CHUNK <= speech.length; at += CHUNK) {
    let sum = 0;
    for (let i = at; i < at + CHUNK; i++) sum += (speech[i] as number) ** 2;
    chunks.push({ at, rms: Math.sqrt(sum / CHUNK) });
  }
  const quiet = [...chunks]
    .sort((a, b) => a.rms - b.rms)
    .slice(0, Math.max(1, Math.floor(chunks.length / 10)))
    .sort((a, b) => a.at - b.at);
  const tone = new Int16Array(quiet.length * CHUNK);
  for (const [i, c] of quiet.entries()) tone.set(speech.subarray(c.at, c.at + CHUNK), i * CHUNK);
  const parts: Int16Array[] = [];
  let toneAt = 0;
  for (const { startMs, endMs } of segments) {
    const utterance = speech.subarray(Math.round(startMs * 16), Math.round(endMs * 16));
    parts.push(utterance);
    let left = 2 * utterance.length + SERVER_VAD_DEFAULTS.silenceDurationMs * 16;
    while (left > 0) {
      const take = Math.min(left, tone.length - toneAt);
      parts.push(tone.subarray(toneAt, toneAt + take));
      toneAt = (toneAt + take) % tone.length;
      left -= take;
    }
  }
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
};

/**
 * The store in `dir` as a log keeps it: its WAL checkpointed into the file first (the WAL is a bounded buffer of at
 * most a few MiB, not growth per hour), then the file's bytes, its audio blobs' bytes and its entries.
 * @throws SqliteError when the file cannot be opened.
 */
const storeFigures = (dir: string): { bytes: number; blobBytes: number; entries: number } => {
  const db = new Database(join(dir, "duplex.sqlite"));
  try {
    db.pragma("wal_checkpoint(TRUNCATE)");
    const row = db
      .prepare<[], { blob: number | null; entries: number }>(
        "SELECT sum(length(bin)) AS blob, count(*) AS entries FROM entries",
      )
      .get();
    const pages = db.pragma("page_count", { simple: true }) as number;
    const pageSize = db.pragma("page_size", { simple: true }) as number;
    return { bytes: pages * pageSize, blobBytes: row?.blob ?? 0, entries: row?.entries ?? 0 };
  } finally {
    db.close();
  }
};

/** What the soak's client received: utterances heard, responses done, bytes of the model's 24 kHz PCM16 audio. */
interface Tally {
  utterances: number;
  responses: number;
  audioOutBytes: number;
}

/** What the stream measured: its wall time (s), the tally, and RSS and heap used (MiB) at each quarter and the end. */
interface Streamed {
  readonly wallS: number;
  readonly tally: Tally;
  readonly rssByQuarter: number[];
  readonly heapByQuarter: number[];
}

/**
 * Streams `o.seconds` of `speech` (16 kHz) in 100 ms appends into the session, as fast as accepted or in real time,
 * with a heartbeat every 5 s of audio (fast) or 30 s (real time) waited for; counts the utterances (`stops`, ms of
 * the file, in the native lane; the server's speech_stopped in the turn lane), responses and the model's audio.
 */
const streamSpeech = async (
  client: RealtimeClient,
  server: { readonly pid: number; readonly port: number },
  speech: Int16Array,
  stops: readonly number[],
  o: SoakOptions,
): Promise<Streamed> => {
  const usable = speech.length - (speech.length % 1600);
  const fileMs = (usable / 16000) * 1000;
  const started = performance.now();
  const appends = Math.round(o.seconds * 10);
  const heartbeatEvery = o.pace === "realtime" ? 300 : 50;
  const tally: Tally = { utterances: 0, responses: 0, audioOutBytes: 0 };
  const count = () => {
    for (const { event } of client.received) {
      if (event.type === "response.output_audio.delta") tally.audioOutBytes += (String(event.delta).length * 3) / 4;
      if (o.lane === "turn" && event.type === "input_audio_buffer.speech_stopped") tally.utterances += 1;
      if (event.type === "response.done") tally.responses += 1;
    }
    // The client keeps what it received; the figures are counted, the events are not needed.
    client.received.length = 0;
  };
  const rssByQuarter: number[] = [];
  const heapByQuarter: number[] = [];
  for (let n = 0; n < appends; n += 1) {
    if (n > 0 && n % Math.ceil(appends / 4) === 0) {
      rssByQuarter.push(rssMib(server.pid));
      heapByQuarter.push(await heapUsedMib(server.port));
    }
    const offset = (n * 1600) % usable;
    client.appendSamples(speech.subarray(offset, offset + 1600), { sampleRateHz: 16000 });
    const atMs = (offset / 16000) * 1000;
    tally.utterances += stops.filter((stop) => stop > atMs && stop <= atMs + 100 && stop <= fileMs).length;
    // In real time: each append at its time on the audio's clock (no drift from late timers).
    if (o.pace === "realtime") {
      const due = started + (n + 1) * 100 - performance.now();
      if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
    }
    // A heartbeat, waiting for its ack: as fast as accepted, every 5 s of audio (the flow control: the server has
    // handled what came before); in real time every 30 s, DuplexClient's default interval. Each is two entries of
    // the log (the command, the ack): one a second, as before, was 7% of a conversation's entries.
    if (n % heartbeatEvery === heartbeatEvery - 1) {
      client.send({ type: "session.heartbeat" });
      await client.waitFor("session.heartbeat_ack", { timeoutMs: 60_000 });
      count();
    }
  }
  const wallS = (performance.now() - started) / 1000;
  await new Promise((resolve) => setTimeout(resolve, 2000));
  count();
  return { wallS, tally, rssByQuarter, heapByQuarter };
};

/**
 * `duplex bench --only soak`: one long session streamed into a server process (see SoakOptions); prints its RSS and
 * heap over the run, what it answered, and the store's size per session hour.
 */
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
    const file = (await readWavFile(join(o.audioDir, "speech_60s_16k.wav"))).samples;
    const speech = o.pattern === "conversation" ? conversationOf(file, await speechOf(file, 16000)) : file;
    // The model-native lane sends no speech events: its utterances are where the file's speech stops (Silero on the
    // client, with the server VAD's rule), counted each time the loop passes one.
    const stops = o.lane === "turn" ? [] : (await speechOf(speech, 16000)).map((s) => s.stoppedAtMs);
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
    const { wallS, tally, rssByQuarter, heapByQuarter } = await streamSpeech(client, { pid, port }, speech, stops, o);
    const rssEnd = rssMib(pid);
    rssByQuarter.push(rssEnd);
    heapByQuarter.push(await heapUsedMib(port));
    await client.close();
    // The server stops first, so the checkpoint has the file to itself.
    // (A server that already exited, a crash during the run, fires no "exit" again.)
    if (child.exitCode === null && child.signalCode === null) {
      await new Promise<void>((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGKILL");
      });
    }
    const store = storeFigures(dir);
    const perHour = (bytes: number): number => Math.round((bytes / 1e6) * (3600 / o.seconds));
    const audioOutS = tally.audioOutBytes / 48_000;
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
      utterances: tally.utterances,
      responses: tally.responses,
      pattern: o.pattern ?? "stream",
      audio_out_s: Math.round(audioOutS),
      model_speaking_share: Math.round((audioOutS / o.seconds) * 100) / 100,
      store_mib: Math.round(store.bytes / 2 ** 20),
      store_mb_per_session_hour: perHour(store.bytes),
      store_audio_mb_per_session_hour: perHour(store.blobBytes),
      store_entries_per_session_hour: Math.round(store.entries * (3600 / o.seconds)),
    });
  } finally {
    clearInterval(sampler);
    child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  }
};
