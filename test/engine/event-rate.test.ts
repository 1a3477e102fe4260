import { afterEach, describe, expect, it } from "vitest";
import type { SessionConfig } from "../../src/domain/index.ts";
import {
  type EventRateLimits,
  type EventRateState,
  INITIAL_EVENT_RATE,
  takeEventToken,
} from "../../src/engine/event-rate.ts";
import {
  createEngine,
  type Engine,
  type EventStore,
  type SessionHost,
  type SessionSink,
  streamOf,
} from "../../src/engine/index.ts";
import { createResampler } from "../../src/infra/audio/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/sqlite.ts";
import { parseScript } from "../../src/infra/runners/script.ts";
import { createScriptedRunner } from "../../src/infra/runners/scripted.ts";
import { type DecodedFrame, decodeClientFrame } from "../../src/protocol/index.ts";
import { replayEntries } from "../../src/replay/index.ts";

/**
 * The event rate of a session (issue 32, part 2; BEHAVIOUR.md, "The edges"): the token bucket as a pure function of
 * (state, now), and the session host that applies it to a socket's frames, on a virtual clock with an in-memory
 * store: the first refusal of a second is logged and told with its event_id and the count dropped since the last
 * one, the rest of that second leave no trace, audio appends are not counted, and the log replays identical.
 */

const LIMITS: EventRateLimits = { perS: 100, burst: 200 };

/** Runs `count` events at `nowMs` through the bucket; the verdicts' kinds, counted, and the bucket after them. */
const run = (state: EventRateState, nowMs: number, count: number) => {
  const kinds: Record<string, number> = {};
  const told: number[] = [];
  let s = state;
  for (let i = 0; i < count; i += 1) {
    const { state: next, verdict } = takeEventToken(s, nowMs, LIMITS);
    s = next;
    kinds[verdict.kind] = (kinds[verdict.kind] ?? 0) + 1;
    if (verdict.kind === "tell") told.push(verdict.dropped);
  }
  return { kinds, told, state: s };
};

describe("the event rate's token bucket", () => {
  it("passes a burst of 200 at once, then tells the first refusal and drops the rest of that second", () => {
    const { kinds, told } = run(INITIAL_EVENT_RATE, 1_000, 1_000);
    expect(kinds).toEqual({ pass: 200, tell: 1, drop: 799 });
    expect(told).toEqual([0]);
  });

  it("refills 100 a second, and tells again only a second after the last refusal told, with the count dropped since", () => {
    const burst = run(INITIAL_EVENT_RATE, 1_000, 1_000);
    // Half a second later: 50 tokens, and the other 50 still within the second of the refusal told.
    const half = run(burst.state, 1_500, 100);
    expect(half.kinds).toEqual({ pass: 50, drop: 50 });
    // A second after it: 50 more tokens, then a refusal told, carrying the 799 + 50 dropped meanwhile.
    const second = run(half.state, 2_000, 100);
    expect(second.kinds).toEqual({ pass: 50, tell: 1, drop: 49 });
    expect(second.told).toEqual([849]);
  });

  it("never holds more than the burst, however long the session was quiet", () => {
    const { state } = run(INITIAL_EVENT_RATE, 0, 10);
    expect(run(state, 3_600_000, 1_000).kinds).toEqual({ pass: 200, tell: 1, drop: 799 });
  });

  it("refills nothing for a clock that goes back", () => {
    const { state } = run(INITIAL_EVENT_RATE, 10_000, 200);
    expect(run(state, 5_000, 1).kinds).toEqual({ tell: 1 });
  });
});

const SCRIPT = parseScript(
  "name: quiet\nwhen_exhausted: repeat_last\nturns:\n  - on: respond\n    actions: [end_turn]\n",
  "quiet.yaml",
);

/** A socket's frame as the server hands it to the host: decoded in the mailbox with the session's configuration. */
const frame =
  (event: Record<string, unknown>) =>
  (config: SessionConfig): DecodedFrame => {
    const text = JSON.stringify(event);
    return decodeClientFrame(text, Buffer.byteLength(text), {
      inputRateHz: config.inputAudio.rate,
      inputAudio: config.inputAudio,
    });
  };

describe("a session host under the event rate", () => {
  let engine: Engine;
  let store: EventStore;
  let clock = 1_700_000_000_000;
  let sent: Record<string, unknown>[];
  const sink: SessionSink = {
    send: (json) => sent.push(JSON.parse(json) as Record<string, unknown>),
    replaced: () => undefined,
    failed: () => undefined,
    ended: () => undefined,
  };
  const open = async (): Promise<SessionHost> => {
    clock = 1_700_000_000_000;
    sent = [];
    store = createSqliteEventStore({ path: ":memory:" });
    engine = createEngine({
      store,
      runner: createScriptedRunner(SCRIPT),
      vad: null,
      createResampler,
      now: () => clock,
      limits: { eventsPerS: LIMITS.perS, eventBurst: LIMITS.burst },
    });
    const host = engine.open();
    if ("code" in host) throw new Error(host.message);
    host.attach(sink);
    await host.settled();
    return host;
  };
  afterEach(async () => {
    await engine.close();
    await store.close();
  });

  const clear = (eventId: string) => frame({ type: "input_audio_buffer.clear", event_id: eventId });
  const asEvent = { bytes: 40, turn: false, sniffed: "event" } as const;
  const errors = () =>
    sent
      .filter((e) => e.type === "error")
      .map((e) => e.error as { code: string; event_id: string | null; message: string });

  it("logs and tells one refusal a second with its event_id and the count dropped; the others leave nothing", async () => {
    const host = await open();
    const before = (await store.read(streamOf(host.sessionId))).length;
    for (let i = 0; i < 1_000; i += 1) void host.submit(clear(`a${i}`), asEvent);
    clock += 500;
    for (let i = 0; i < 100; i += 1) void host.submit(clear(`b${i}`), asEvent);
    clock += 500;
    for (let i = 0; i < 100; i += 1) void host.submit(clear(`c${i}`), asEvent);
    await host.settled();

    expect(errors()).toEqual([
      expect.objectContaining({
        code: "input_backpressure",
        event_id: "a200",
        message: expect.stringContaining("(0 dropped"),
      }),
      expect.objectContaining({
        code: "input_backpressure",
        event_id: "c50",
        message: expect.stringContaining("(849 dropped"),
      }),
    ]);
    expect(sent.filter((e) => e.type === "input_audio_buffer.cleared")).toHaveLength(300);
    const entries = (await store.read(streamOf(host.sessionId))).slice(before);
    const commands = entries.filter((e) => e.type === "CommandReceived");
    // 300 passed and 2 refusals told: 1,200 events, 302 inputs; nothing of the 898 dropped.
    expect(commands).toHaveLength(302);
    expect(entries.filter((e) => e.type === "RequestRejected").map((e) => e.metadata.at - 1_700_000_000_000)).toEqual([
      0, 1_000,
    ]);
    expect(replayEntries(await store.read(streamOf(host.sessionId))).divergence).toBeNull();

    // The session goes on: a command once a token is back is answered.
    clock += 20;
    sent = [];
    await host.submit(frame({ type: "session.heartbeat", event_id: "hb" }), asEvent);
    expect(sent.map((e) => e.type)).toEqual(["session.heartbeat_ack"]);
  });

  it("does not count audio appends, and counts a frame that only looked like one once it decodes as an event", async () => {
    const host = await open();
    for (let i = 0; i < 200; i += 1) void host.submit(clear(`a${i}`), asEvent);
    const audio = Buffer.alloc(960).toString("base64");
    for (let i = 0; i < 50; i += 1)
      void host.submit(frame({ type: "input_audio_buffer.append", event_id: `app${i}`, audio }), {
        bytes: 1_400,
        turn: false,
        sniffed: "append",
      });
    // Decoded on arrival (nothing that configures waits): counted there, and told.
    const sneaky = (eventId: string) =>
      frame({ x: { type: "input_audio_buffer.append" }, type: "input_audio_buffer.clear", event_id: eventId });
    const likeAppend = { bytes: 90, turn: false, sniffed: "append" } as const;
    void host.submit(sneaky("s1"), likeAppend);
    // Behind a session.update (the server's own, not counted), decoded as it is decided: counted then, dropped.
    const update = frame({ type: "session.update", session: {} })(host.current.config);
    void host.submit(update);
    void host.submit(sneaky("s2"), likeAppend);
    await host.settled();
    // A second later: the 100 tokens refilled are spent, then the next one is told, with the one dropped before.
    clock += 1_000;
    for (let i = 0; i < 100; i += 1) void host.submit(clear(`b${i}`), asEvent);
    void host.submit(update);
    void host.submit(sneaky("s3"), likeAppend);
    await host.settled();

    const entries = await store.read(streamOf(host.sessionId));
    const commands = entries
      .filter((e) => e.type === "CommandReceived")
      .map((e) => (e.data as { command: { type: string; eventId: string | null; code?: string } }).command);
    expect(commands.filter((c) => c.type === "input_audio_buffer.append")).toHaveLength(50);
    expect(commands.filter((c) => c.type === "invalid").map((c) => [c.eventId, c.code])).toEqual([
      ["s1", "input_backpressure"],
      ["s3", "input_backpressure"],
    ]);
    expect(errors().map((e) => [e.event_id, e.message.match(/\((\d+) dropped/)?.[1]])).toEqual([
      ["s1", "0"],
      ["s3", "1"],
    ]);
    expect(replayEntries(entries).divergence).toBeNull();
  });

  it("counts nothing of frames the server makes itself (no sniff: the chat completions route)", async () => {
    const host = await open();
    for (let i = 0; i < 400; i += 1) void host.submit(clear(`a${i}`), { bytes: 40, turn: false });
    await host.settled();
    expect(errors()).toEqual([]);
    expect(sent.filter((e) => e.type === "input_audio_buffer.cleared")).toHaveLength(400);
  });
});
