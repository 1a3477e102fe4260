import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { RealtimeClient, type ServerEvent } from "../../src/client/index.ts";
import { startScriptedServer } from "../support/server.ts";

/**
 * Output backpressure (BEHAVIOUR.md, "Defaults and limits": output buffer per socket; issue 10, part 1). A client
 * that stops reading during a long answer is detached with `output_backpressure` once more than the limit waits for
 * it; the session goes on, ten clients beside it are served in full, and a resume replays what the slow one missed.
 * The slow client's answer (audio only) is 300 s of audio, about 19 MB of JSON, emitted as fast as the runner can:
 * more than the kernel's socket buffers on loopback hold (several MB), so the server's own buffer fills; the limit
 * here is 256 KiB. The others get 5 s answers, at the same time.
 */
const ANSWER_MS = 300_000;
const OTHER_ANSWER_MS = 5_000;
const LIMIT_BYTES = 256 * 1024;

interface RawClient {
  readonly ws: WebSocket;
  readonly frames: ServerEvent[];
  readonly closed: Promise<number>;
}

const connectRaw = (url: string): Promise<RawClient> =>
  new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const frames: ServerEvent[] = [];
    ws.on("message", (data) => frames.push(JSON.parse(String(data)) as ServerEvent));
    const closed = new Promise<number>((done) => ws.once("close", (code) => done(code)));
    ws.once("open", () => resolve({ ws, frames, closed }));
    ws.once("error", reject);
  });

const until = async (what: string, test: () => boolean, timeoutMs = 20_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

/** The TCP socket under a ws client: pausing it stops reading, as a stalled reader would. */
const tcpOf = (ws: WebSocket): { pause(): void; resume(): void } =>
  (ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;

const seqs = (events: readonly ServerEvent[]): number[] =>
  events.flatMap((e) => (typeof e.server_event_seq === "number" ? [e.server_event_seq] : []));

const audioBytes = (events: readonly ServerEvent[]): number =>
  events
    .filter((e) => e.type === "response.output_audio.delta")
    .reduce((n, e) => n + Buffer.from(String(e.delta), "base64").length, 0);

describe("a client that stops reading", () => {
  let server: Awaited<ReturnType<typeof startScriptedServer>>;
  beforeAll(async () => {
    server = await startScriptedServer(
      [
        "name: long-answer",
        "speed_factor: .inf",
        "when_exhausted: repeat_last",
        "turns:",
        "  - on: respond",
        "    match: { modalities: [audio] }",
        `    actions: [{ speak: { text: "A very long answer.", duration_ms: ${ANSWER_MS} } }, end_turn]`,
        "  - on: respond",
        `    actions: [{ speak: { text: "A short answer.", duration_ms: ${OTHER_ANSWER_MS} } }, end_turn]`,
      ],
      { duplex_session: { max_sessions: 16, max_output_buffer_bytes: LIMIT_BYTES } },
    );
  });
  afterAll(async () => {
    await server.stop();
  });

  it("is detached with output_backpressure while ten others are served, and resumes what it missed", async () => {
    const slow = await connectRaw(server.url);
    await until("session.created", () => slow.frames.some((f) => f.type === "session.created"));
    const created = slow.frames[0] as ServerEvent & { session: { id: string }; resume_token: string };
    expect(created.type).toBe("session.created");
    slow.ws.send(
      JSON.stringify({ type: "response.create", response: { instructions: "Answer.", output_modalities: ["audio"] } }),
    );
    tcpOf(slow.ws).pause();

    const others = await Promise.all(Array.from({ length: 10 }, () => RealtimeClient.connect(server.url)));
    for (const client of others) client.send({ type: "response.create", response: { instructions: "Answer." } });
    const done = await Promise.all(others.map((c) => c.waitFor("response.done", { since: 0, timeoutMs: 60_000 })));
    for (const event of done) expect(event.response).toMatchObject({ status: "completed" });
    for (const client of others) expect(audioBytes(client.received.map((r) => r.event))).toBe(OTHER_ANSWER_MS * 48);

    // The slow socket was let go of; its session stays open, detached, and waits for a resume.
    const host = server.engine.get(created.session.id);
    await until("the slow socket's detach", () => host?.current.attached === false);
    expect(host?.isClosed).toBe(false);

    // Read again: what the kernel and the socket held, then the error and the coded close.
    tcpOf(slow.ws).resume();
    const code = await slow.closed;
    expect(code).toBe(1013);
    const last = slow.frames.at(-1);
    expect(last).toMatchObject({ type: "error", error: { type: "rate_limit_error", code: "output_backpressure" } });
    const before = seqs(slow.frames);
    expect(before.length).toBeGreaterThan(0);
    expect(before).toEqual(before.map((_, i) => i + 1));
    expect(slow.frames.some((f) => f.type === "response.done")).toBe(false);

    // A resume from the last event received replays the rest, in order, with no gap and no duplicate.
    const lastSeq = before.at(-1) as number;
    const resumed = await RealtimeClient.connect(`${server.url}?autostart=0`);
    resumed.send({
      type: "session.resume",
      session_id: created.session.id,
      resume_token: created.resume_token,
      last_received_server_event_seq: lastSeq,
    });
    const end = await resumed.waitFor("response.done", { since: 0, timeoutMs: 30_000 });
    expect(end.response).toMatchObject({ status: "completed" });
    const after = resumed.received.map((r) => r.event);
    // The resume is told why the slow socket was let go of, which its reader may never have received (1006).
    expect(after[0]).toMatchObject({ type: "session.resumed", detach_reason: "output_backpressure" });
    const replayed = seqs(after);
    expect(replayed).toEqual(replayed.map((_, i) => lastSeq + 1 + i));
    const whole = [...slow.frames, ...after];
    expect(whole.filter((e) => e.type === "response.created")).toHaveLength(1);
    expect(audioBytes(whole)).toBe(ANSWER_MS * 48);
    await resumed.close();
    await Promise.all(others.map((c) => c.close()));
  }, 120_000);
});
