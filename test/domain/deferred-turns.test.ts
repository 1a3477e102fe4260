import { describe, expect, it } from "vitest";
import { type DomainEvent, type Input, type ItemId, responseProgressOf } from "../../src/domain/index.ts";
import {
  append,
  appendFrames,
  audio,
  cancel,
  clear,
  command,
  commit,
  create,
  given,
  opened,
  stage,
  update,
} from "./decider-spec.ts";

/**
 * BEHAVIOUR.md, "Turn-taking": "A commit while a response is active is deferred, not dropped:
 * `input_audio_buffer.committed` carries `response_create_deferred: true`, and its response starts when the active
 * one ends, one at a time, in commit order (bounded by `max_pending_turns_per_session`). A barge-in answers the
 * barging utterance; `input.cancel` and `input_audio_buffer.clear` drop only uncommitted input."
 */

const R1 = "resp_01234567_1";
const R2 = "resp_01234567_2";
const R3 = "resp_01234567_3";
const U1 = "item_01234567_u1";
const U2 = "item_01234567_u2";
const U5 = "item_01234567_u5";

const types = (events: readonly DomainEvent[]): string[] => events.map((e) => e.type);
const ofType = <T extends DomainEvent["type"]>(events: readonly DomainEvent[], type: T) =>
  events.filter((e): e is Extract<DomainEvent, { type: T }> => e.type === type);
const silence = (frames: number): number[] => Array.from({ length: frames }, () => 0);
const speech = (frames: number): number[] => Array.from({ length: frames }, () => 0.9);

/** Server VAD that answers each utterance but never interrupts (issue 8's case). */
const noInterrupt = (): Input => command(update({ turnDetection: { type: "server_vad", interruptResponse: false } }));
/** One utterance of 320 ms and the 512 ms of silence that ends it. */
const utterance = (): Input[] => [command(appendFrames(speech(10))), command(appendFrames(silence(16)))];
const endOfTurn = (epoch = 0): Input => stage({ kind: "end_of_turn", epoch });

/** R1 is speaking (the client asked for it); the user then says one thing, committed by server VAD. */
const oneDeferred = (): Input[] => [
  opened(),
  noInterrupt(),
  command(create()),
  stage(audio(400, "hi")),
  ...utterance(),
];

describe("a commit while a response is active is deferred (BEHAVIOUR.md, Turn-taking)", () => {
  it("commits the utterance with responseDeferred and starts no second response", () => {
    const w = given(opened(), noInterrupt(), command(create()), stage(audio(400, "hi")), utterance()[0] as Input).when(
      utterance()[1] as Input,
    );
    // The held-back speech_started goes out before its speech_stopped: every server-VAD commit is announced.
    expect(types(w.events)).toEqual([
      "AudioBuffered",
      "SpeechAnnounced",
      "SpeechStopped",
      "InputCommitted",
      "OverlapDecided",
    ]);
    expect(ofType(w.events, "InputCommitted")[0]?.data).toMatchObject({
      itemId: U1,
      responseDeferred: true,
      source: "turn_detection",
    });
    expect(w.after.response?.id).toBe(R1);
    expect(w.after.deferredTurns).toEqual([{ itemId: U1, source: "turn_detection" }]);
  });

  it("starts the deferred response when the active one completes, answering its own item", () => {
    const w = given(...oneDeferred()).when(endOfTurn());
    expect(types(w.events)).toEqual(["ResponseEnded", "HistoryCommitted", "ResponseStarted"]);
    w.thenStartsWith([
      { type: "ResponseEnded", data: { responseId: R1, status: "completed" } },
      { type: "HistoryCommitted" },
      {
        type: "ResponseStarted",
        data: { responseId: R2, source: "turn_detection", inReplyTo: U1, deferred: true, previousItemId: U1 },
      },
    ]);
    expect(w.after.deferredTurns).toEqual([]);
    expect(w.after.response?.id).toBe(R2);
  });

  it("answers two deferred commits one at a time, in commit order", () => {
    const g = given(...oneDeferred(), ...utterance());
    expect(g.state.deferredTurns.map((t) => t.itemId)).toEqual([U1, U2]);
    const first = g.when(endOfTurn());
    expect(ofType(first.events, "ResponseStarted").map((e) => [e.data.responseId, e.data.inReplyTo])).toEqual([
      [R2, U1],
    ]);
    const second = given(...oneDeferred(), ...utterance(), endOfTurn(), stage(audio(200, "a"))).when(endOfTurn());
    expect(ofType(second.events, "ResponseStarted").map((e) => [e.data.responseId, e.data.inReplyTo])).toEqual([
      [R3, U2],
    ]);
    const third = given(...oneDeferred(), ...utterance(), endOfTurn(), endOfTurn()).when(endOfTurn());
    // R3 made nothing: its empty message item opens as it ends.
    expect(types(third.events)).toEqual(["MessageStarted", "ResponseEnded", "HistoryCommitted"]);
    expect(third.after.response).toBeNull();
  });

  it("defers a client commit that asks for a response (response_create)", () => {
    const turnLane = command(update({ autoResponse: false }));
    const w = given(opened(), turnLane, command(create()), command(append(320, 0))).when(command(commit("c", true)));
    expect(types(w.events)).toEqual(["InputCommitted"]);
    expect(ofType(w.events, "InputCommitted")[0]?.data).toMatchObject({ responseDeferred: true, source: "client" });
    const next = given(opened(), turnLane, command(create()), command(append(320, 0)), command(commit("c", true))).when(
      endOfTurn(),
    );
    expect(ofType(next.events, "ResponseStarted")[0]?.data).toMatchObject({ source: "client", inReplyTo: U1 });
  });

  it("does not defer a commit that asks for no response, nor one in the native lane", () => {
    const turnLane = command(update({ autoResponse: false }));
    const plain = given(opened(), turnLane, command(create()), command(append(320, 0))).when(command(commit()));
    expect(ofType(plain.events, "InputCommitted")[0]?.data.responseDeferred).toBe(false);
    expect(plain.after.deferredTurns).toEqual([]);
    // The native lane: the model decides when to speak; a commit is a hint.
    const native = given(opened(), stage({ kind: "speak", epoch: 0 }), command(append(320, 0))).when(
      command(commit(null, true)),
    );
    expect(ofType(native.events, "InputCommitted")[0]?.data.responseDeferred).toBe(false);
    expect(native.after.deferredTurns).toEqual([]);
  });

  it("starts the deferred response at once when the active one is cancelled", () => {
    const w = given(...oneDeferred()).when(command(cancel()));
    expect(types(w.events)).toEqual(["EpochAdvanced", "ResponseEnded", "HistoryCommitted", "ResponseStarted"]);
    expect(ofType(w.events, "ResponseEnded")[0]?.data).toMatchObject({
      status: "cancelled",
      reason: "client_cancelled",
    });
    expect(ofType(w.events, "ResponseStarted")[0]?.data).toMatchObject({ responseId: R2, inReplyTo: U1 });
    expect(w.after.epoch).toBe(1);
  });

  it("keeps committed turns on input_audio_buffer.clear and input.cancel: they drop only uncommitted input", () => {
    const cleared = given(...oneDeferred()).when(command(clear()));
    expect(types(cleared.events)).toEqual(["InputCleared"]);
    expect(cleared.after.deferredTurns.map((t) => t.itemId)).toEqual([U1]);
    const cancelled = given(...oneDeferred()).when(command({ type: "input.cancel", eventId: null }));
    expect(types(cancelled.events)).toEqual([
      "EpochAdvanced",
      "ResponseEnded",
      "HistoryCommitted",
      "InputCleared",
      "ResponseStarted",
    ]);
    expect(ofType(cancelled.events, "ResponseStarted")[0]?.data.inReplyTo).toBe(U1);
  });

  it("starts the deferred response after a response that failed or timed out", () => {
    const failed = given(...oneDeferred()).when(stage({ kind: "failure", epoch: 0, message: "model went away" }));
    expect(types(failed.events).slice(-1)).toEqual(["ResponseStarted"]);
    const stalled = given(...oneDeferred());
    const progress = responseProgressOf(stalled.state) ?? "";
    const timedOut = stalled.when({ type: "TimerFired", at: 9, data: { timer: "response_timeout", progress } });
    expect(types(timedOut.events)).toEqual(["EpochAdvanced", "ResponseEnded", "HistoryCommitted", "ResponseStarted"]);
    expect(ofType(timedOut.events, "ResponseStarted")[0]?.data.inReplyTo).toBe(U1);
  });

  it("answers the barging utterance at a barge-in: the deferred responses are dropped, their items stay", () => {
    const w = given(...oneDeferred()).when(command({ type: "barge_in", eventId: null }));
    expect(types(w.events)).toEqual([
      "EpochAdvanced",
      "ResponseEnded",
      "HistoryCommitted",
      "DeferredResponsesDropped",
      "TurnSignalled",
    ]);
    expect(ofType(w.events, "DeferredResponsesDropped")[0]?.data).toEqual({ itemIds: [U1], reason: "barge_in" });
    expect(w.after.response).toBeNull();
    expect(w.after.deferredTurns).toEqual([]);
    expect(w.after.history.some((h) => h.id === U1)).toBe(true);
  });

  it("drops the deferred responses when server VAD barges in on long speech", () => {
    const g = given(
      opened(),
      command(update({ turnDetection: { type: "server_vad" } })),
      command(create()),
      command(append(320, 0)),
      command(commit(null, true)),
    );
    expect(g.state.deferredTurns.map((t) => t.itemId)).toEqual([U1]);
    const w = g.when(command(appendFrames(speech(40))));
    expect(ofType(w.events, "ResponseEnded")[0]?.data).toMatchObject({ reason: "turn_detected" });
    expect(ofType(w.events, "DeferredResponsesDropped")[0]?.data).toEqual({ itemIds: [U1], reason: "turn_detected" });
    expect(ofType(w.events, "ResponseStarted")).toEqual([]);
    // The barging utterance, once it stops, is answered.
    const answered = given(
      opened(),
      command(update({ turnDetection: { type: "server_vad" } })),
      command(create()),
      command(append(320, 0)),
      command(commit(null, true)),
      command(appendFrames(speech(40))),
    ).when(command(appendFrames(silence(16))));
    expect(ofType(answered.events, "ResponseStarted")[0]?.data).toMatchObject({ responseId: R2 });
  });

  it("does not answer a deferred item the client deleted", () => {
    const w = given(
      ...oneDeferred(),
      command({ type: "conversation.item.delete", eventId: null, itemId: U1 as ItemId }),
    ).when(endOfTurn());
    expect(types(w.events)).toEqual(["ResponseEnded", "HistoryCommitted"]);
  });

  it("starts the next deferred response after a server restart cancelled the active one: it runs while detached", () => {
    const w = given(...oneDeferred()).when({ type: "SessionRecovered", at: 9, data: { reason: "server_restart" } });
    expect(types(w.events)).toEqual([
      "EpochAdvanced",
      "ResponseEnded",
      "HistoryCommitted",
      "ResponseStarted",
      "SessionDetached",
    ]);
    expect(ofType(w.events, "ResponseEnded")[0]?.data).toMatchObject({ reason: "server_restart" });
    expect(ofType(w.events, "ResponseStarted")[0]?.data).toMatchObject({ responseId: R2, inReplyTo: U1 });
  });
});

describe("max_pending_turns_per_session bounds the deferred responses (BEHAVIOUR.md, Defaults and limits)", () => {
  const fourDeferred = (): Input[] => [...oneDeferred(), ...utterance(), ...utterance(), ...utterance()];

  it("refuses a fifth client commit that asks for a response with input_backpressure, changing nothing", () => {
    const g = given(...fourDeferred(), command(append(320, 0)));
    expect(g.state.deferredTurns).toHaveLength(4);
    g.when(command(commit("evt_5", true))).thenRejects("input_backpressure", "evt_5");
  });

  it("commits a fifth server-VAD utterance without a response of its own, and says so with input_backpressure", () => {
    const g = given(...fourDeferred(), utterance()[0] as Input);
    const w = g.when(utterance()[1] as Input);
    expect(types(w.events)).toEqual([
      "AudioBuffered",
      "SpeechAnnounced",
      "SpeechStopped",
      "InputCommitted",
      "DeferredResponseRefused",
      "OverlapDecided",
    ]);
    expect(ofType(w.events, "InputCommitted")[0]?.data).toMatchObject({ itemId: U5, responseDeferred: false });
    expect(ofType(w.events, "DeferredResponseRefused")[0]?.data).toMatchObject({
      itemId: U5,
      code: "input_backpressure",
    });
    expect(w.after.deferredTurns).toHaveLength(4);
    expect(w.after.history.some((h) => h.id === U5)).toBe(true);
  });

  it("takes the bound from the deployment (SessionOpened)", () => {
    const open = opened();
    const one: Input = open.type === "SessionOpened" ? { ...open, data: { ...open.data, maxPendingTurns: 1 } } : open;
    const g = given(one, noInterrupt(), command(create()), ...utterance(), command(append(320, 0)));
    expect(g.state.maxPendingTurns).toBe(1);
    g.when(command(commit("evt_2", true))).thenRejects("input_backpressure", "evt_2");
  });
});

describe("a response the model ends incomplete (OpenAI's status, at a limit of the model's)", () => {
  it("ends incomplete with its reason, keeps the epoch, cancels nothing, and answers the deferred turn", () => {
    const w = given(...oneDeferred()).when(stage({ kind: "incomplete", epoch: 0, reason: "max_output_tokens" }));
    expect(types(w.events)).toEqual(["ResponseEnded", "HistoryCommitted", "ResponseStarted"]);
    w.thenStartsWith([
      { type: "ResponseEnded", data: { responseId: R1, status: "incomplete", reason: "max_output_tokens" } },
      { type: "HistoryCommitted", data: { item: { id: `item_${R1}`, status: "incomplete" } } },
      { type: "ResponseStarted", data: { responseId: R2, inReplyTo: U1, deferred: true } },
    ]);
    expect(w.after.epoch).toBe(0);
    expect(types(w.events)).not.toContain("EpochAdvanced");
    expect(types(w.events)).not.toContain("OutputAudioCleared");
  });
});

describe("the transcript of a user item that failed", () => {
  it("is reported for the item it names, whatever epoch, and the next transcript keeps to its own item", () => {
    const g = given(opened(), command(append(320, 0)), command(commit()), command(append(320, 0)), command(commit()));
    const failed = g.when(
      stage({ kind: "input_transcript_failed", epoch: 0, itemId: U1, code: "upstream_commit_refused", message: "x" }),
    );
    failed.then([
      { type: "InputTranscriptionFailed", data: { itemId: U1, code: "upstream_commit_refused", message: "x" } },
    ]);
    const next = g.when(stage({ kind: "input_transcript", epoch: 0, itemId: U2, transcript: "hi" }));
    next.then([{ type: "InputTranscribed", data: { itemId: U2, transcript: "hi" } }]);
  });

  it("decides nothing for a seeded history: the input is recorded as it is", () => {
    given(opened())
      .when(stage({ kind: "history_seeded", epoch: 0, itemIds: ["a", "b"] }))
      .thenNothing();
  });
});

describe("a response the model cancels itself", () => {
  it("for a barge-in its VAD heard: the deferred turns are dropped (the barging utterance is answered next)", () => {
    const w = given(...oneDeferred()).when(stage({ kind: "cancelled", epoch: 0, reason: "turn_detected" }));
    expect(ofType(w.events, "ResponseEnded")[0]?.data).toMatchObject({ status: "cancelled", reason: "turn_detected" });
    expect(types(w.events)).toContain("DeferredResponsesDropped");
    expect(types(w.events)).not.toContain("ResponseStarted");
  });

  it("for another reason of its own (its restart): only that response ends, and the deferred turn is answered", () => {
    const w = given(...oneDeferred()).when(stage({ kind: "cancelled", epoch: 0, reason: "server_restart" }));
    expect(ofType(w.events, "ResponseEnded")[0]?.data).toMatchObject({
      status: "cancelled",
      reason: "model_cancelled",
    });
    expect(types(w.events)).not.toContain("DeferredResponsesDropped");
    expect(ofType(w.events, "ResponseStarted")[0]?.data).toMatchObject({ responseId: R2, inReplyTo: U1 });
  });
});
