import { afterEach, describe, expect, it } from "vitest";
import { ERROR_CODES } from "../../src/domain/index.ts";
import { Connection, type Engine, MAX_FRAMES_WHILE_ADOPTING, type SessionHost } from "../../src/engine/index.ts";
import { type PeekedFrame, peekFrame } from "../../src/protocol/index.ts";
import {
  type HarnessEngine,
  harnessEngine,
  type RecordingPort,
  recordingPort,
  until,
} from "../support/engine-session.ts";
import { type VirtualClock, virtualClock } from "../support/virtual-clock.ts";

/**
 * The connection rules without a socket (issue 34, part 3; src/engine/connection.ts): a `Connection` over a real
 * in-process engine (in-memory store, echo runner), a recording port and a virtual clock for its first-message timer.
 */

const silent = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
const TIMEOUT_MS = 10_000;

/** A text frame as the socket peeks it. */
const text = (event: Record<string, unknown>): PeekedFrame => peekFrame(Buffer.from(JSON.stringify(event)), false);

let built: HarnessEngine | null = null;
afterEach(async () => {
  await built?.close();
  built = null;
});

interface Opened {
  readonly engine: Engine;
  readonly port: RecordingPort;
  readonly clock: VirtualClock;
  readonly connection: Connection;
}

const connect = async (query: { autostart?: boolean } = {}, engine?: Engine): Promise<Opened> => {
  if (engine === undefined) built = await harnessEngine();
  const port = recordingPort();
  const clock = virtualClock();
  const used = engine ?? (built as HarnessEngine).engine;
  const connection = new Connection(used, port, silent, { scheduler: clock, query, firstMessageTimeoutMs: TIMEOUT_MS });
  connection.connected();
  return { engine: used, port, clock, connection };
};

const types = (port: RecordingPort): string[] => port.sent.map((e) => String(e.type));
const codes = (port: RecordingPort): unknown[] =>
  port.sent.filter((e) => e.type === "error").map((e) => (e.error as { code: string }).code);

describe("connection", () => {
  it("opens a session on connect and closes it unused at the first-message timeout, session.created first", async () => {
    const { port, clock, connection } = await connect();
    const host = connection.host as SessionHost;
    expect(connection.state).toBe("bound");
    await until(() => port.sent.length > 0, "session.created");
    clock.advance(TIMEOUT_MS);
    expect(types(port)).toEqual(["session.created", "error"]);
    expect(codes(port)).toEqual(["config_timeout"]);
    expect(port.closedWith).toEqual({ code: ERROR_CODES.config_timeout.closeCode, reason: "config_timeout" });
    expect(connection.state).toBe("closed");
    await until(() => host.isClosed, "the unused session closed");
  });

  it("keeps a session the client has used past the first-message timeout", async () => {
    const { port, clock, connection } = await connect();
    await until(() => port.sent.length > 0, "session.created");
    await connection.receive(text({ type: "session.update", event_id: "e1", session: { instructions: "hi" } }));
    clock.advance(TIMEOUT_MS * 3);
    expect(types(port)).toEqual(["session.created", "session.updated"]);
    expect(port.closedWith).toBeNull();
    expect(connection.state).toBe("bound");
  });

  it("with autostart=0 opens nothing, refuses what is not a resume, echoes a binary frame's event_id, then times out", async () => {
    const { port, clock, connection } = await connect({ autostart: false });
    expect(connection.host).toBeNull();
    await connection.receive(peekFrame(Buffer.from('{"event_id":"bin1","type":"session.update"}'), true));
    await connection.receive(text({ type: "session.update", event_id: "e2", session: {} }));
    expect(port.sent.map((e) => [e.type, (e.error as { code: string }).code, e.event_id ?? null])).toEqual([
      ["error", "invalid_json", null],
      ["error", "invalid_session_resume", null],
    ]);
    expect(port.sent.map((e) => (e.error as { event_id?: string }).event_id ?? null)).toEqual(["bin1", "e2"]);
    clock.advance(TIMEOUT_MS);
    expect(codes(port)).toEqual(["invalid_json", "invalid_session_resume", "config_timeout"]);
    expect(port.closedWith?.code).toBe(ERROR_CODES.config_timeout.closeCode);
    await connection.receive(text({ type: "session.update", event_id: "e3", session: {} }));
    expect(port.sent).toHaveLength(3);
  });

  it("detaches on a drop and resumes on another connection; a client's 1000 closes the session", async () => {
    const first = await connect();
    await until(() => first.port.sent.length > 0, "session.created");
    const created = first.port.sent[0] as { session: { id: string }; resume_token: string };
    await first.connection.receive(text({ type: "session.update", event_id: "e1", session: {} }));
    const host = first.connection.host as SessionHost;
    const seqs = first.port.sent.map((e) => Number(e.server_event_seq ?? 0));
    expect(types(first.port)).toEqual(["session.created", "session.updated"]);
    first.connection.closed(1006, "");
    expect(host.isClosed).toBe(false);
    const second = await connect({ autostart: false }, first.engine);
    await second.connection.receive(
      text({
        type: "session.resume",
        event_id: "r1",
        session_id: created.session.id,
        resume_token: created.resume_token,
        last_received_server_event_seq: Math.max(...seqs),
      }),
    );
    await until(() => second.port.sent.some((e) => e.type === "session.resumed"), "session.resumed");
    expect(second.connection.host).toBe(host);
    expect(second.connection.state).toBe("bound");
    second.connection.closed(1000, "");
    await until(() => host.isClosed, "the session closed by the client's 1000");
  });

  it("detaches a slow reader with output_backpressure and writes nothing of the session after it", async () => {
    const { port, connection } = await connect();
    await until(() => port.sent.length > 0, "session.created");
    connection.overflowed({ unsentBytes: 3_000_000, unsentEvents: 10, maxBytes: 2_097_152, maxEvents: 512 });
    expect(connection.state).toBe("detached");
    expect(codes(port)).toEqual(["output_backpressure"]);
    expect(port.closedWith?.code).toBe(ERROR_CODES.output_backpressure.closeCode);
    const before = port.sent.length;
    connection.sink.send(JSON.stringify({ type: "response.done" }));
    expect(port.sent).toHaveLength(before);
  });

  it("queues frames behind a takeover, drops those beyond the queue with their event_id, then gives up at the deadline", async () => {
    built = await harnessEngine();
    const real = built.engine;
    // A node on a shared store whose takeover never answers (a store that hangs).
    const hanging = Object.create(real, {
      nodeId: { value: "node-b" },
      get: { value: () => undefined },
      adopt: { value: () => new Promise(() => {}) },
    }) as Engine;
    const { port, clock, connection } = await connect({ autostart: false }, hanging);
    const resume = { type: "session.resume", event_id: "r1", session_id: "sess_x", resume_token: "t".repeat(43) };
    await connection.receive(text(resume));
    for (let i = 0; i < MAX_FRAMES_WHILE_ADOPTING; i += 1)
      await connection.receive(text({ type: "input_audio_buffer.append", event_id: `a${i}`, audio: "AAAA" }));
    expect(port.sent).toEqual([]);
    await connection.receive(text({ type: "input_audio_buffer.append", event_id: "over", audio: "AAAA" }));
    expect(codes(port)).toEqual(["input_backpressure"]);
    expect(port.sent[0]?.error).toMatchObject({ code: "input_backpressure", event_id: "over" });
    clock.advance(TIMEOUT_MS);
    expect(port.closedWith).toBeNull();
    clock.advance(TIMEOUT_MS);
    expect(codes(port)).toEqual(["input_backpressure", "internal_error"]);
    expect(port.closedWith).toEqual({ code: ERROR_CODES.internal_error.closeCode, reason: "internal_error" });
    expect(connection.state).toBe("closed");
  });

  it("answers each frame after its session expired with unknown_session, echoing the frame's event_id", async () => {
    const clock = virtualClock();
    built = await harnessEngine({ clock });
    const { port, connection } = await connect({}, built.engine);
    await until(() => types(port).includes("session.created"), "session.created");
    await connection.receive(text({ type: "session.update", event_id: "evt_idle", session: { idle_timeout_s: 5 } }));
    await until(() => types(port).includes("session.updated"), "session.updated");
    clock.advance(5_000);
    await until(() => types(port).includes("session.expired"), "session.expired");
    expect(connection.state).toBe("expired");
    await connection.receive(text({ type: "input_audio_buffer.clear", event_id: "evt_late" }));
    const error = port.sent.at(-1) as { type: string; error: Record<string, unknown> };
    expect(error.type).toBe("error");
    expect(error.error).toMatchObject({ code: "unknown_session", event_id: "evt_late" });
    // The socket stays open: the client reads why each frame went unanswered.
    expect(port.closedWith).toBeNull();
  });

  it("refuses a resume whose session_id is not an id, before any lookup, without echoing it (an attack on issue 34)", async () => {
    const { port, connection } = await connect({ autostart: false });
    for (const [eventId, sessionId] of [
      ["long", `sess_${"a".repeat(1024 * 1024)}`],
      ["path", "../../etc/passwd"],
      ["empty", ""],
    ] as const) {
      await connection.receive(
        text({ type: "session.resume", event_id: eventId, session_id: sessionId, resume_token: "t".repeat(43) }),
      );
    }
    await connection.receive(
      text({ type: "session.resume", event_id: "token", session_id: "sess_x", resume_token: "t".repeat(513) }),
    );
    expect(
      port.sent.map((e) => [(e.error as { code: string }).code, (e.error as { event_id: string }).event_id]),
    ).toEqual([
      ["invalid_session_resume", "long"],
      ["invalid_session_resume", "path"],
      ["invalid_session_resume", "empty"],
      ["invalid_session_resume", "token"],
    ]);
    for (const e of port.sent) expect(JSON.stringify(e).length).toBeLessThan(1024);
  });
});
