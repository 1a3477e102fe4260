import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RealtimeClient } from "../client/index.ts";
import { sampleRss } from "./load/proc.ts";
import { percentile } from "./load/stats.ts";
import { freePort, startServerProcess } from "./server-process.ts";

/**
 * `duplex bench --only slow-reader` (issue 10, part 1): a real server process with the scripted runner. Ten
 * sessions ask for a short answer (3 s of audio) at once, three times; the time from `response.create` to the first
 * `response.output_audio.delta` is measured for each. The baseline is the same run without a slow reader; then it is
 * run again beside a client that asked for a 600 s answer (about 38 MB of JSON, emitted as fast as the log takes it)
 * and stopped reading. Prints first-audio p50/p90 (ms) of both runs and their ratio, the server's peak RSS (MiB) in
 * both, whether the slow client was detached (its bytes hold the `output_backpressure` error) and how much reached it
 * (what the kernel's socket buffers held, and the server's up to its limit).
 */
export interface SlowReaderOptions {
  readonly print: (line: Record<string, unknown>) => void;
  /** Normal sessions beside the slow one (10). */
  readonly sessions?: number;
}

const SCRIPT = [
  "name: slow-reader-bench",
  "speed_factor: .inf",
  "when_exhausted: repeat_last",
  "turns:",
  "  - on: respond",
  "    match: { modalities: [audio] }",
  '    actions: [{ speak: { text: "A very long answer.", duration_ms: 600000 } }, end_turn]',
  "  - on: respond",
  '    actions: [{ speak: { text: "A short answer.", duration_ms: 3000 } }, end_turn]',
];

/** Ten sessions answered at once, three rounds: every first-audio latency (ms). */
const normalRounds = async (url: string, sessions: number): Promise<number[]> => {
  const latencies: number[] = [];
  for (let round = 0; round < 3; round += 1) {
    const clients = await Promise.all(Array.from({ length: sessions }, () => RealtimeClient.connect(url)));
    await Promise.all(clients.map((c) => c.waitFor("session.created", { since: 0 })));
    const measured = await Promise.all(
      clients.map(async (client) => {
        const sent = performance.now();
        client.send({ type: "response.create", response: { instructions: "Answer." } });
        await client.waitFor("response.output_audio.delta", { since: 0, timeoutMs: 60_000 });
        const ms = performance.now() - sent;
        await client.waitFor("response.done", { since: 0, timeoutMs: 60_000 });
        return ms;
      }),
    );
    latencies.push(...measured);
    await Promise.all(clients.map((c) => c.close()));
  }
  return latencies;
};

/**
 * A WebSocket client that asks for the long answer and then never reads: a raw TCP socket that makes the upgrade by
 * hand, sends one masked `response.create` frame, and pauses (a `ws` client resumes its socket on its own). `drain`
 * reads what the server sent, as text, until the socket ends or `timeoutMs` passes.
 */
const stalledReader = (port: number): Promise<{ drain(timeoutMs: number): Promise<string> }> =>
  new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.once("error", reject);
    socket.once("connect", () => {
      socket.write(
        "GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
      );
      const onData = (chunk: Buffer): void => {
        chunks.push(chunk);
        if (!Buffer.concat(chunks).includes("\r\n\r\n")) return;
        socket.off("data", onData);
        socket.pause();
        const payload = Buffer.from(
          JSON.stringify({
            type: "response.create",
            response: { instructions: "Answer.", output_modalities: ["audio"] },
          }),
        );
        const mask = Buffer.from([1, 2, 3, 4]);
        const masked = Buffer.from(payload.map((b, i) => b ^ (mask[i % 4] as number)));
        socket.write(
          Buffer.concat([Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff]), mask, masked]),
        );
        resolve({
          drain: (timeoutMs) =>
            new Promise((done) => {
              const timer = setTimeout(() => finish(), timeoutMs);
              const finish = (): void => {
                clearTimeout(timer);
                socket.destroy();
                done(Buffer.concat(chunks).toString("latin1"));
              };
              socket.on("data", (more: Buffer) => chunks.push(more));
              socket.once("close", finish);
              socket.once("end", finish);
              socket.resume();
            }),
        });
      };
      socket.on("data", onData);
    });
  });

export const benchSlowReader = async (o: SlowReaderOptions): Promise<void> => {
  const dir = await mkdtemp(join(tmpdir(), "duplex-slow-reader-"));
  const script = join(dir, "script.yaml");
  const config = join(dir, "config.yaml");
  await writeFile(script, `${SCRIPT.join("\n")}\n`);
  await writeFile(
    config,
    `runner: { kind: scripted, script: ${JSON.stringify(script)} }\nduplex_session: { max_sessions: 64 }\n`,
  );
  const port = await freePort();
  const { child, stdout } = await startServerProcess(port, join(dir, "data"), 60_000, ["--config", config]);
  const pid = child.pid ?? 0;
  const url = `ws://127.0.0.1:${port}/v1/realtime`;
  let sampler = sampleRss(pid, 200);
  const sessions = o.sessions ?? 10;
  try {
    const baseline = await normalRounds(url, sessions);
    sampler.stop();
    const peakBaseline = Math.round(sampler.peakKib() / 102.4) / 10;
    sampler = sampleRss(pid, 200);

    const slow = await stalledReader(port);
    const beside = await normalRounds(url, sessions);
    // The answer is emitted as fast as the log takes it; the reader stays stalled until the server lets go of it
    // (its log says so) or a minute passes.
    const deadline = performance.now() + 60_000;
    while (!stdout().includes("the client reads too slowly") && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const peakBeside = Math.round(sampler.peakKib() / 102.4) / 10;
    const received = await slow.drain(10_000);
    const detached = received.includes('"code":"output_backpressure"');

    const p = (values: number[], q: number) => Math.round(percentile(values, q) * 10) / 10;
    o.print({
      bench: "slow-reader",
      meaning:
        "first audio (from sending response.create to the first audio delta) of 10 sessions beside a client that stopped reading, against the same run without it: latency_ratio_p50 near 1 means no slowdown; the slow socket should close with 1013 (output_backpressure) and RSS stay near the baseline's",
      sessions,
      first_audio_after_create_ms_p50: p(beside, 50),
      first_audio_after_create_ms_p90: p(beside, 90),
      first_audio_after_create_ms_p50_baseline: p(baseline, 50),
      first_audio_after_create_ms_p90_baseline: p(baseline, 90),
      latency_ratio_p50: Math.round((percentile(beside, 50) / percentile(baseline, 50)) * 100) / 100,
      rss_mib_peak: peakBeside,
      rss_mib_peak_baseline: peakBaseline,
      slow_detached: detached,
      slow_received_mib: Math.round((received.length / 2 ** 20) * 10) / 10,
    });
  } finally {
    sampler.stop();
    child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  }
};
