import { describe, expect, it } from "vitest";
import type { ClientVad, Command, DomainEvent, Input } from "../../src/domain/index.ts";
import { appendFrames, command, create, given, opened, update } from "./decider-spec.ts";

/**
 * An append's hints from a client running its own VAD (the duplex extension's `vad` object and `force_listen`;
 * reference, "the annotated append"): its decisions take the place of the server's VAD for that chunk, and
 * `force_listen` keeps the model listening through it.
 */

const U1 = "item_01234567_u1";
const R1 = "resp_01234567_1";

const serverVad = (extra: Record<string, unknown> = {}): Input =>
  command(update({ turnDetection: { type: "server_vad", ...extra } }));
const types = (events: readonly DomainEvent[]): string[] => events.map((e) => e.type);
const ofType = <T extends DomainEvent["type"]>(events: readonly DomainEvent[], type: T) =>
  events.filter((e): e is Extract<DomainEvent, { type: T }> => e.type === type);
const frames = (n: number, p: number): number[] => Array.from({ length: n }, () => p);

const NO_VAD: ClientVad = {
  backend: "webrtc",
  isSpeech: null,
  speechActive: null,
  speechStarted: null,
  speechStopped: null,
  speechProbability: null,
};
/** `n` 32 ms frames whose server VAD probability is `p`, with the client's own `vad` decisions. */
const hinted = (n: number, p: number, vad: Partial<ClientVad>, extra: Partial<Command> = {}): Input =>
  command({ ...appendFrames(frames(n, p)), clientVad: { ...NO_VAD, ...vad }, ...extra } as Command);

describe("an append with the client's own VAD decisions", () => {
  it("starts speech at the chunk the client marks speech_started, whatever the server's VAD heard", () => {
    // 10 frames of 32 ms heard as silence by the server (320 ms), then the client's start on the next chunk.
    const g = given(opened(), serverVad(), command(appendFrames(frames(10, 0))));
    const w = g.when(hinted(5, 0, { speechStarted: true }));
    w.then([
      { type: "AudioBuffered", data: { clockMs: 480, endpointer: { phase: "speech" } } },
      // From the chunk's start (320 ms), prefix padding (300 ms) reaching back to 20 ms.
      { type: "SpeechStarted", data: { itemId: U1, audioStartMs: 20, announced: true } },
    ]);
  });

  it("stops speech at the end of the chunk marked speech_stopped, with no silence window, and commits it", () => {
    const g = given(opened(), serverVad(), hinted(5, 0, { speechStarted: true }), hinted(5, 0.9, {}));
    // The server's VAD still hears speech: the client's stop decides.
    const w = g.when(hinted(2, 0.9, { speechStopped: true }));
    expect(types(w.events)).toEqual(["AudioBuffered", "SpeechStopped", "InputCommitted", "ResponseStarted"]);
    expect(ofType(w.events, "SpeechStopped")[0]?.data).toMatchObject({ itemId: U1, audioEndMs: 384 });
    expect(ofType(w.events, "InputCommitted")[0]?.data).toMatchObject({
      itemId: U1,
      source: "turn_detection",
      audioMs: 384,
    });
  });

  it("reads speech_active as the edges: true in silence starts, false in speech stops", () => {
    const started = given(opened(), serverVad()).when(hinted(3, 0, { speechActive: true }));
    expect(types(started.events)).toEqual(["AudioBuffered", "SpeechStarted"]);
    const kept = given(opened(), serverVad(), hinted(3, 0, { speechActive: true })).when(
      hinted(3, 0, { speechActive: true }),
    );
    expect(types(kept.events)).toEqual(["AudioBuffered"]);
    const stopped = given(opened(), serverVad(), hinted(3, 0, { speechActive: true })).when(
      hinted(3, 0.9, { speechActive: false }),
    );
    expect(ofType(stopped.events, "SpeechStopped")[0]?.data.audioEndMs).toBe(192);
  });

  it("lets the client's speech_active false hold off the server's VAD: no speech however loud the frames", () => {
    const w = given(opened(), serverVad()).when(hinted(20, 0.99, { speechActive: false }));
    expect(types(w.events)).toEqual(["AudioBuffered"]);
    expect(w.after.input.endpointer.phase).toBe("silence");
  });

  it("runs the server's endpointer on the client's speech_probability in place of its own", () => {
    // 8 frames at 0.9 from the client over frames the server heard as silence: speech after 250 ms (8 x 32).
    const w = given(opened(), serverVad()).when(hinted(8, 0, { speechProbability: 0.9 }));
    expect(ofType(w.events, "SpeechStarted")[0]?.data).toMatchObject({ audioStartMs: 0 });
    const low = given(opened(), serverVad()).when(hinted(8, 0.9, { speechProbability: 0.1 }));
    expect(types(low.events)).toEqual(["AudioBuffered"]);
    const flag = given(opened(), serverVad()).when(hinted(8, 0, { isSpeech: true }));
    expect(types(flag.events)).toEqual(["AudioBuffered", "SpeechStarted"]);
  });

  it("judges overlap by the client's VAD: a chunk it calls silence is dropped, not a barge-in", () => {
    const w = given(opened(), serverVad(), command(create())).when(hinted(40, 0.9, { isSpeech: false }));
    expect(ofType(w.events, "OverlapDecided")[0]?.data).toMatchObject({ action: "drop", overlapMs: 0 });
    expect(w.after.epoch).toBe(0);
  });
});

describe("an append with force_listen", () => {
  const forced = { forceListen: true as const };

  it("is heard but never barges in: listen, reason force_listen, and the response goes on", () => {
    const w = given(opened(), serverVad(), command(create())).when(hinted(40, 0.9, {}, forced));
    const decided = ofType(w.events, "OverlapDecided");
    // Its speech does not count towards the overlap: a barge-in later needs speech of its own.
    expect(decided.map((e) => e.data)).toEqual([
      {
        action: "listen",
        reason: "force_listen",
        policy: "barge_in_on_speech",
        overlapMs: 0,
        reported: true,
        forceListen: true,
      },
    ]);
    expect(types(w.events)).not.toContain("EpochAdvanced");
    expect(w.after.response?.id).toBe(R1);
    // The same speech without force_listen barges in.
    const free = given(opened(), serverVad(), command(create())).when(hinted(40, 0.9, {}));
    expect(ofType(free.events, "OverlapDecided")[0]?.data.action).toBe("barge_in");
  });

  it("leaves the overlap where it was: a short remark after it is a short remark, not a barge-in", () => {
    const g = given(opened(), serverVad(), command(create()), hinted(40, 0.9, {}, forced));
    const w = g.when(hinted(4, 0.9, {}));
    expect(ofType(w.events, "OverlapDecided")[0]?.data).toMatchObject({
      action: "listen",
      reason: "short_ack",
      overlapMs: 128,
    });
    expect(w.after.epoch).toBe(0);
  });

  it("commits an utterance that ends on it without starting a response", () => {
    const g = given(opened(), serverVad(), hinted(5, 0, { speechStarted: true }));
    const w = g.when(hinted(2, 0, { speechStopped: true }, forced));
    expect(types(w.events)).toEqual(["AudioBuffered", "SpeechStopped", "InputCommitted"]);
    expect(w.after.response).toBeNull();
  });
});

describe("extra_body.force_listen_count", () => {
  // ECHO_CAPABILITIES: chunk_period_ms 200, so 3 chunks are the first 600 ms of the input clock.
  const counted = (): Input => command(update({ turnDetection: { type: "server_vad" }, forceListenCount: 3 }));

  it("keeps the model listening through the session's first chunks: a stop in them commits with no response", () => {
    const g = given(opened(), counted(), hinted(5, 0, { speechStarted: true }));
    const w = g.when(hinted(5, 0, { speechStopped: true }));
    expect(types(w.events)).toEqual(["AudioBuffered", "SpeechStopped", "InputCommitted"]);
    // Past them (an append starting at 640 ms) a stop is answered as usual.
    const later = given(
      opened(),
      counted(),
      command(appendFrames(frames(20, 0))),
      hinted(5, 0, { speechStarted: true }),
    );
    expect(types(later.when(hinted(5, 0, { speechStopped: true })).events)).toContain("ResponseStarted");
  });

  it("is kept in the configuration, and absent from it until a client sets it", () => {
    expect(given(opened(), counted()).state.config.forceListenCount).toBe(3);
    expect(given(opened(), serverVad()).state.config.forceListenCount).toBeUndefined();
    expect(given(opened(), counted(), serverVad()).state.config.forceListenCount).toBe(3);
  });
});

describe("extra_body.duplex_initial_user_text", () => {
  const initial = (eventId = "evt_u"): Input =>
    command(update({ instructions: "Be brief.", initialUserText: "Hello there." }, eventId));

  it("places a user text item after the configuration it came with", () => {
    const w = given(opened()).when(initial());
    expect(types(w.events)).toEqual(["SessionConfigured", "ItemCreated"]);
    expect(w.after.config.instructions).toBe("Be brief.");
    expect(w.after.history).toEqual([
      expect.objectContaining({ id: U1, type: "message", role: "user", text: "Hello there." }),
    ]);
  });

  it("is refused once the session has input, naming the field, and the update's other fields are not applied", () => {
    const w = given(opened(), command(appendFrames(frames(5, 0)))).when(initial("evt_late"));
    w.thenRejects("bad_event", "evt_late");
    expect(w.events[0]).toMatchObject({ data: { param: "session.extra_body.duplex_initial_user_text" } });
    expect(w.after.config.instructions).toBe("");
    expect(w.after.history).toEqual([]);
  });
});
