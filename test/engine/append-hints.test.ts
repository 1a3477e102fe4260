import { afterEach, describe, expect, it } from "vitest";
import { replayEntries } from "../../src/replay/index.ts";
import { type EngineSession, openEngineSession } from "../support/engine-session.ts";

/**
 * The timing hints of the duplex extension's `input_audio_buffer.append` (reference/realtime-duplex-api.md,
 * "input_audio_buffer.append": `duration_ms`, `audio_end_ms`; issue 35, part 3): each is checked against the bytes
 * and the session's input clock, a mismatch is `bad_event` naming the field, and a refused append changes nothing
 * (the clock, the buffer and the log's audio stay as they were). In process, on the echo, 16 kHz PCM16.
 */
let session: EngineSession | null = null;
afterEach(async () => {
  await session?.close();
  session = null;
});

/** `ms` of 16 kHz PCM16 silence, base64. */
const audio = (ms: number): string => Buffer.alloc(ms * 32).toString("base64");

const opened = async () => {
  const s = await openEngineSession();
  await s.send({
    type: "session.update",
    session: { turn_detection: null, input_audio_format: "pcm16", input_sample_rate_hz: 16000 },
  });
  await s.waitFor("session.updated");
  return s;
};

const append = (s: EngineSession, eventId: string, ms: number, extra: Record<string, unknown>) =>
  s.send({ type: "input_audio_buffer.append", event_id: eventId, audio: audio(ms), ...extra });

/** The `error` events sent since `since`, by the event id they echo. */
const errorsSince = (s: EngineSession, since: number) =>
  s.sent
    .slice(since)
    .filter((e) => e.type === "error")
    .map((e) => e.error as Record<string, unknown>);

describe("append timing hints", () => {
  it("takes duration_ms and audio_end_ms that agree with the bytes and the input clock", async () => {
    session = await opened();
    const since = session.sent.length;
    await append(session, "evt_1", 200, { duration_ms: 200, audio_end_ms: 200 });
    await append(session, "evt_2", 200, { duration_ms: 200, audio_end_ms: 400 });
    await append(session, "evt_3", 100, { duration_ms: 100.4 });
    await session.send({ type: "input_audio_buffer.commit", event_id: "evt_commit" });
    const committed = await session.waitFor("input_audio_buffer.committed", { since });
    expect(errorsSince(session, since)).toEqual([]);
    expect(committed).toMatchObject({ type: "input_audio_buffer.committed" });
    const log = await session.log();
    const buffered = log.filter((e) => e.type === "AudioBuffered").map((e) => (e.data as { clockMs: number }).clockMs);
    expect(buffered).toEqual([200, 400, 500]);
  });

  it("refuses a duration_ms the bytes do not have, and an audio_end_ms off the input clock, each naming the field", async () => {
    session = await opened();
    const since = session.sent.length;
    await append(session, "evt_ok", 200, { audio_end_ms: 200 });
    await append(session, "evt_long", 200, { duration_ms: 300 });
    await append(session, "evt_late", 200, { audio_end_ms: 1200 });
    await append(session, "evt_early", 200, { audio_end_ms: 200 });
    await session.send({ type: "session.heartbeat" });
    await session.waitFor("session.heartbeat_ack", { since });
    const errors = errorsSince(session, since);
    expect(errors.map((e) => [e.event_id, e.code, e.param])).toEqual([
      ["evt_long", "bad_event", "duration_ms"],
      ["evt_late", "bad_event", "audio_end_ms"],
      ["evt_early", "bad_event", "audio_end_ms"],
    ]);
    expect(String(errors[0]?.message)).toContain("duration_ms 300 is not the duration of the audio sent (200 ms");
    expect(String(errors[1]?.message)).toContain("audio_end_ms 1200 is not where this audio ends");
    // The refused appends changed nothing: the clock is where the one taken left it, and the next agrees with it.
    const log = await session.log();
    expect(log.filter((e) => e.type === "AudioBuffered").map((e) => (e.data as { clockMs: number }).clockMs)).toEqual([
      200,
    ]);
    const later = session.sent.length;
    await append(session, "evt_next", 200, { duration_ms: 200, audio_end_ms: 400 });
    await session.send({ type: "session.heartbeat" });
    await session.waitFor("session.heartbeat_ack", { since: later });
    expect(errorsSince(session, later)).toEqual([]);
    expect(replayEntries(await session.log()).ok).toBe(true);
  });
});

/**
 * The client's own VAD on an append (`vad`, `force_listen`; reference, "the annotated append"): with server VAD on,
 * real Silero hears the silence sent, and the client's decisions are what the session acts on, logged on the append
 * so that a replay acts on them too.
 */
describe("client VAD hints", () => {
  const vadSession = async () => {
    const s = await openEngineSession({ vad: "silero" });
    await s.send({
      type: "session.update",
      session: {
        turn_detection: { type: "server_vad", create_response: false },
        input_audio_format: "pcm16",
        input_sample_rate_hz: 16000,
      },
    });
    await s.waitFor("session.updated");
    return s;
  };

  it("speaks and ends an utterance where the client's VAD says, over audio the server's VAD calls silence", async () => {
    session = await vadSession();
    const since = session.sent.length;
    await append(session, "evt_1", 200, { vad: { backend: "webrtc", speech_started: true, speech_probability: 0.9 } });
    await append(session, "evt_2", 200, { vad: { speech_active: true } });
    await append(session, "evt_3", 100, { vad: { speech_stopped: true, speech_active: false } });
    const committed = await session.waitFor("input_audio_buffer.committed", { since });
    const types = session.sent.slice(since).map((e) => e.type);
    expect(types.filter((t) => String(t).startsWith("input_audio_buffer."))).toEqual([
      "input_audio_buffer.speech_started",
      "input_audio_buffer.speech_stopped",
      "input_audio_buffer.committed",
    ]);
    const started = session.sent.slice(since).find((e) => e.type === "input_audio_buffer.speech_started");
    const stopped = session.sent.slice(since).find((e) => e.type === "input_audio_buffer.speech_stopped");
    expect([started?.audio_start_ms, stopped?.audio_end_ms]).toEqual([0, 500]);
    expect(committed.item_id).toBe(stopped?.item_id);
    expect(errorsSince(session, since)).toEqual([]);
    const log = await session.log();
    const hints = log
      .filter((e) => e.type === "CommandReceived")
      .map((e) => (e.data as { command: { type: string; clientVad?: unknown } }).command)
      .filter((c) => c.type === "input_audio_buffer.append")
      .map((c) => c.clientVad);
    expect(hints[0]).toEqual({
      backend: "webrtc",
      isSpeech: null,
      speechActive: null,
      speechStarted: true,
      speechStopped: null,
      speechProbability: 0.9,
    });
    expect(replayEntries(log).ok).toBe(true);
  });

  it("refuses a vad object with an unknown field or a probability outside 0..1, naming it, and buffers nothing", async () => {
    session = await vadSession();
    const since = session.sent.length;
    await append(session, "evt_odd", 200, { vad: { speech_started: true, loud: true } });
    await append(session, "evt_p", 200, { vad: { speech_probability: 1.5 } });
    await append(session, "evt_fl", 200, { force_listen: "yes" });
    await append(session, "evt_empty", 0, { vad: { speech_started: true, speech_stopped: true } });
    await session.send({ type: "session.heartbeat" });
    await session.waitFor("session.heartbeat_ack", { since });
    const errors = errorsSince(session, since);
    expect(errors.map((e) => [e.event_id, e.code, e.param])).toEqual([
      ["evt_odd", "bad_event", "vad"],
      ["evt_p", "bad_event", "vad.speech_probability"],
      ["evt_fl", "bad_event", "force_listen"],
      ["evt_empty", "bad_event", "vad"],
    ]);
    expect(String(errors[0]?.message)).toContain("loud");
    const log = await session.log();
    expect(log.filter((e) => e.type === "AudioBuffered")).toEqual([]);
  });
});

describe("extra_body hints of the first session.update", () => {
  it("shows force_listen_count in the session and places duplex_initial_user_text as the first user item", async () => {
    session = await openEngineSession();
    const since = session.sent.length;
    await session.send({
      type: "session.update",
      event_id: "evt_open",
      session: { extra_body: { force_listen_count: 2, duplex_initial_user_text: "Hello there." } },
    });
    const added = await session.waitFor("conversation.item.added", { since });
    const updated = session.sent.slice(since).find((e) => e.type === "session.updated");
    expect(updated?.session).toMatchObject({ extra_body: { force_listen_count: 2 } });
    const types = session.sent.slice(since).map((e) => e.type);
    expect(types.indexOf("session.updated")).toBeLessThan(types.indexOf("conversation.item.added"));
    expect(added.item).toMatchObject({
      type: "message",
      role: "user",
      content: [{ type: "input_text", text: "Hello there." }],
    });
    expect(errorsSince(session, since)).toEqual([]);
    expect(replayEntries(await session.log()).ok).toBe(true);
  });
});
