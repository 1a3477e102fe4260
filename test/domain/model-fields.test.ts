import { describe, expect, it } from "vitest";
import {
  type Capabilities,
  type Command,
  type DomainEvent,
  decide,
  evolve,
  type Input,
  type ItemId,
  laneOf,
  MODEL_PROFILES,
  type RefAudioInput,
  type ResponseId,
  responseProgressOf,
  type SessionState,
  withProfile,
} from "../../src/domain/index.ts";
import { type Effect, effectsOf } from "../../src/engine/effects.ts";
import {
  ack,
  append,
  appendFrames,
  audio,
  cancel,
  command,
  create,
  ECHO_CAPABILITIES,
  given,
  opened,
  stage,
  truncate,
  update,
} from "./decider-spec.ts";

/** Derived ids of SESSION_ID (tag "01234567"). */
const R1 = "resp_01234567_1";
const R2 = "resp_01234567_2";
const I1 = `item_${R1}`;
const I2 = `item_${R2}`;
const U1 = "item_01234567_u1";
const U2 = "item_01234567_u2";

const PERSONAPLEX = withProfile(ECHO_CAPABILITIES, MODEL_PROFILES.personaplex);
const NEMOTRON = withProfile(ECHO_CAPABILITIES, MODEL_PROFILES.nemotron_voicechat);
const MINICPMO = withProfile(ECHO_CAPABILITIES, MODEL_PROFILES.minicpmo_4_5);
const TOOLS: Capabilities = { ...ECHO_CAPABILITIES, supportsToolCalls: true };

const WEATHER = {
  type: "function" as const,
  name: "get_weather",
  description: "",
  parameters: { type: "object" },
};

const clip = (sha: string, bytes = 44): RefAudioInput => ({
  mimeType: "audio/wav",
  audio: new Uint8Array(bytes),
  sha256: sha.repeat(64 / sha.length),
});

const text = (t: string): Command => ({
  type: "conversation.item.create",
  eventId: null,
  previousItemId: null,
  itemId: null,
  item: { type: "message", role: "user", content: [{ type: "input_text", text: t }] },
});

/** The effects the engine derives from deciding `input` on `state`. */
const effectsOfForTest = (state: SessionState, input: Input): Effect[] => {
  const events = decide(state, input);
  return effectsOf(input, events, state, events.reduce(evolve, state));
};

const types = (events: readonly DomainEvent[]): string[] => events.map((e) => e.type);
const history = (state: SessionState, id: string) => state.history.find((h) => h.id === id);

describe("model-facing session fields", () => {
  it("keeps tools and tool_choice required as sent, on a model that calls tools", () => {
    const w = given(opened(TOOLS)).when(command(update({ tools: [WEATHER], toolChoice: "required" })));
    w.then([{ type: "SessionConfigured", data: { config: { tools: [WEATHER], toolChoice: "required" } } }]);
    expect(w.after.config.tools).toEqual([WEATHER]);
    expect(w.after.config.toolChoice).toBe("required");
  });

  it("refuses tools on a model that does not call them, and keeps the config", () => {
    given(opened(ECHO_CAPABILITIES))
      .when(command(update({ tools: [WEATHER], toolChoice: "required" }, "evt_tools")))
      .thenRejects("tool_calls_unsupported", "evt_tools");
  });

  it("accepts tools: [] everywhere (what stock clients send)", () => {
    const w = given(opened(PERSONAPLEX)).when(command(update({ tools: [], toolChoice: "auto" })));
    expect(types(w.events)).toEqual(["SessionConfigured"]);
  });

  it("refuses a tool_choice naming a function that is not a tool, a required choice without tools, twin tools", () => {
    given(opened(TOOLS))
      .when(command(update({ tools: [WEATHER], toolChoice: { type: "function", name: "get_time" } })))
      .thenRejects("bad_event");
    given(opened(TOOLS))
      .when(command(update({ toolChoice: "required" })))
      .thenRejects("bad_event");
    given(opened(TOOLS))
      .when(command(update({ tools: [WEATHER, WEATHER] })))
      .thenRejects("bad_event");
  });

  it("keeps instructions, voice, temperature, output token limit and modalities as in force", () => {
    const w = given(opened()).when(
      command(
        update({
          instructions: "Be brief.",
          voice: "alloy",
          temperature: 0.7,
          maxResponseOutputTokens: 512,
          outputModalities: ["text"],
        }),
      ),
    );
    expect(w.after.config).toMatchObject({
      instructions: "Be brief.",
      voice: "alloy",
      temperature: 0.7,
      maxResponseOutputTokens: 512,
      outputModalities: ["text"],
    });
  });

  it("refuses a temperature outside 0..2", () => {
    given(opened())
      .when(command(update({ temperature: 3 }, "evt_hot")))
      .thenRejects("bad_event", "evt_hot");
    given(opened())
      .when(command(update({ temperature: -0.1 })))
      .thenRejects("bad_event");
  });

  it("hands the session's tools and options to a response, with a response's own overriding them", () => {
    const s = given(opened(TOOLS), command(update({ tools: [WEATHER], temperature: 0.8 }))).state;
    const respond = effectsOfForTest(
      s,
      command({ ...(create() as Extract<Command, { type: "response.create" }>), temperature: 0.6, toolChoice: "none" }),
    ).find((e) => e.kind === "submit" && e.unit.kind === "respond");
    expect(respond).toMatchObject({
      unit: { kind: "respond", tools: [WEATHER], toolChoice: "none", temperature: 0.6, maxOutputTokens: "inf" },
    });
  });

  it("refuses a response whose tools and tool choice, with the session's, do not fit together", () => {
    const withTool = given(
      opened(TOOLS),
      command(update({ tools: [WEATHER], toolChoice: { type: "function", name: "get_weather" } })),
    );
    const other = { ...WEATHER, name: "get_time" };
    const respond = (extra: Partial<Extract<Command, { type: "response.create" }>>): Command => ({
      ...(create() as Extract<Command, { type: "response.create" }>),
      ...extra,
    });
    withTool.when(command(respond({ tools: [other] }))).thenRejects("bad_event");
    withTool.when(command(respond({ tools: [] }))).thenRejects("bad_event");
    withTool.when(command(respond({ tools: [other, other], toolChoice: "auto" }))).thenRejects("bad_event");
    expect(types(withTool.when(command(respond({ tools: [other], toolChoice: "auto" }))).events)).toEqual([
      "ResponseStarted",
    ]);
    const required = given(opened(TOOLS), command(update({ tools: [WEATHER], toolChoice: "required" })));
    required.when(command(respond({ tools: [] }))).thenRejects("bad_event");
  });

  it("hands a function_call_output item to the runner", () => {
    const s = given(
      opened(TOOLS),
      command({
        type: "conversation.item.create",
        eventId: null,
        previousItemId: null,
        itemId: "item_call" as ItemId,
        item: { type: "function_call", callId: "call_1", name: "get_weather", arguments: "{}" },
      }),
    ).state;
    const effects = effectsOfForTest(
      s,
      command({
        type: "conversation.item.create",
        eventId: null,
        previousItemId: null,
        itemId: null,
        item: { type: "function_call_output", callId: "call_1", output: '{"ok":true}' },
      }),
    );
    expect(effects).toEqual([
      {
        kind: "submit",
        unit: { kind: "function_call_output", epoch: 0, itemId: U2, callId: "call_1", output: '{"ok":true}' },
      },
    ]);
  });
});

describe("capability gates of a model profile", () => {
  it("refuses barge_in and turn.signal barge_in where barge-in is unsupported", () => {
    for (const caps of [PERSONAPLEX, NEMOTRON]) {
      given(opened(caps))
        .when(command({ type: "barge_in", eventId: "evt_b" }))
        .thenRejects("barge_in_unsupported", "evt_b");
      given(opened(caps))
        .when(command({ type: "turn.signal", eventId: "evt_t", event: "barge_in", payload: null }))
        .thenRejects("barge_in_unsupported", "evt_t");
    }
    expect(types(given(opened(MINICPMO)).when(command({ type: "barge_in", eventId: null })).events)).toEqual([
      "EpochAdvanced",
      "TurnSignalled",
    ]);
  });

  it("tells a barge-in signal it took back as TurnSignalled (turn.event), after the cancel, with the turn state after", () => {
    const w = given(opened(MINICPMO), command(create())).when(
      command({ type: "turn.signal", eventId: "evt_t", event: "barge_in", payload: null }),
    );
    expect(types(w.events).at(-1)).toBe("TurnSignalled");
    expect(types(w.events)).toContain("ResponseEnded");
    expect(w.events.at(-1)).toEqual({
      type: "TurnSignalled",
      // The response it cut has ended: the turn is idle again (with no response it stays barge_in, below).
      data: { event: "barge_in", source: "turn.signal", turnState: "idle" },
    });
    // A signal it does not take (runtime.control) or refuses is no turn-taking signal taken.
    const unknown = given(opened(MINICPMO)).when(
      command({ type: "turn.signal", eventId: null, event: "user_turn_end", payload: null }),
    );
    expect(types(unknown.events)).toEqual(["RuntimeControlReported"]);
  });

  it("under the rule of an earlier release (noTurnEvents), takes a barge-in without TurnSignalled", () => {
    const old = opened(MINICPMO);
    const data = (old as Extract<Input, { type: "SessionOpened" }>).data;
    const ruled = { ...old, data: { ...data, rules: { noTurnEvents: true } } } as Input;
    expect(types(given(ruled).when(command({ type: "barge_in", eventId: null })).events)).toEqual(["EpochAdvanced"]);
  });

  it("refuses overlap_policy barge_in_on_speech without barge-in, and server VAD on a model-native model without it", () => {
    given(opened(PERSONAPLEX))
      .when(command(update({ overlapPolicy: "barge_in_on_speech" })))
      .thenRejects("barge_in_unsupported");
    for (const td of [{ type: "server_vad" }, { type: "server_vad", interruptResponse: false }]) {
      given(opened(PERSONAPLEX))
        .when(command(update({ turnDetection: td })))
        .thenRejects("unsupported_turn_detection");
    }
  });

  it("gives server VAD on a turn-based model without barge-in interrupt_response false, and refuses true", () => {
    const turnBased: Capabilities = { ...ECHO_CAPABILITIES, implementationLevel: "turn_based", supportsBargeIn: false };
    const w = given(opened(turnBased)).when(command(update({ turnDetection: { type: "server_vad" } })));
    expect(w.after.config.turnDetection).toMatchObject({ type: "server_vad", interruptResponse: false });
    expect(w.after.config.overlapPolicy).toBe("listen_only");
    given(opened(turnBased))
      .when(command(update({ turnDetection: { type: "server_vad", interruptResponse: true } })))
      .thenRejects("barge_in_unsupported");
  });

  it("refuses conversation.item.truncate without audio truncation, and takes a truncating ack as a plain ack", () => {
    const spoken = [
      opened(PERSONAPLEX),
      command(create()),
      stage(audio(1000, "hello")),
      stage({ kind: "end_of_turn", epoch: 0 }),
    ];
    given(...spoken)
      .when(command(truncate(I1, 200, "evt_cut")))
      .thenRejects("audio_truncate_unsupported", "evt_cut");
    const w = given(...spoken).when(command(ack({ responseId: R1, playedMs: 400, truncate: true })));
    w.then([
      { type: "PlaybackAcknowledged", data: { playedMs: 400, committedMs: 400, truncate: false } },
      { type: "HistoryCommitted" },
    ]);
    expect(w.after.audio[I1]?.truncatedAtMs).toBeNull();
    // A later ack still moves history forward: nothing capped it.
    const later = given(...spoken, command(ack({ responseId: R1, playedMs: 400, truncate: true }))).when(
      command(ack({ responseId: R1, playedMs: 1000 })),
    );
    expect(history(later.after, I1)?.text).toBe("hello");
  });

  it("keeps all of a completed answer under commit_all_on_done whatever was acked, and only the heard part of a cut one", () => {
    const policy = (p: "ack_only" | "commit_all_on_done") => [
      opened(),
      command(update({ playbackCommitPolicy: p })),
      command(create()),
      stage(audio(1000, "hello world")),
    ];
    const done = stage({ kind: "end_of_turn", epoch: 0 });
    const acked = command(ack({ responseId: R1, playedMs: 400 }));
    // Completed, 400 of 1000 ms acknowledged: all of it under commit_all_on_done, the acknowledged part under ack_only.
    expect(history(given(...policy("commit_all_on_done"), done, acked).state, I1)?.text).toBe("hello world");
    expect(history(given(...policy("ack_only"), done, acked).state, I1)?.text).toBe("hell");
    // Cut by the client after 400 ms were heard: the heard part under both policies.
    for (const p of ["commit_all_on_done", "ack_only"] as const) {
      const cut = given(...policy(p), acked, command(cancel()));
      expect(history(cut.state, I1)?.text).toBe("hell");
      expect(history(cut.state, I1)?.status).toBe("incomplete");
    }
  });

  it("ignores a tool call from a model that does not call tools", () => {
    given(opened(PERSONAPLEX), command(create()))
      .when(stage({ kind: "tool_call", epoch: 0, callId: "call_1", name: "get_weather", arguments: "{}" }))
      .thenNothing();
    const nemotron = given(opened(NEMOTRON), command(create())).when(
      stage({ kind: "tool_call", epoch: 0, callId: "call_1", name: "get_weather", arguments: "{}" }),
    );
    expect(types(nemotron.events)).toEqual(["FunctionCallDelivered"]);
  });

  it("puts MiniCPM-o's sessions in the chat-fallback lane until they opt in to native duplex", () => {
    const fallback = given(opened(MINICPMO)).state;
    expect(fallback.config).toMatchObject({ nativeDuplex: false, autoResponse: true });
    expect(laneOf(fallback)).toBe("turn");
    const native = given(opened(MINICPMO)).when(command(update({ nativeDuplex: true })));
    expect(laneOf(native.after)).toBe("native");
    // Native duplex with responses created by the client: the native implementation, in the turn lane.
    const explicit = given(opened(MINICPMO)).when(command(update({ nativeDuplex: true, autoResponse: false })));
    expect(explicit.after.config).toMatchObject({ nativeDuplex: true, autoResponse: false });
    expect(laneOf(explicit.after)).toBe("turn");
    // auto_response alone does not opt in.
    expect(laneOf(given(opened(MINICPMO)).when(command(update({ autoResponse: true }))).after)).toBe("turn");
  });

  it("takes native_duplex false on a model with no other implementation as the switch to the turn lane", () => {
    const w = given(opened(PERSONAPLEX)).when(command(update({ nativeDuplex: false })));
    expect(w.after.config).toMatchObject({ nativeDuplex: true, autoResponse: false });
    expect(laneOf(w.after)).toBe("turn");
    expect(laneOf(given(opened(PERSONAPLEX)).state)).toBe("native");
  });
});

describe("ref_audio", () => {
  it("keeps the clip's description in the config, never its bytes", () => {
    const w = given(opened(MINICPMO)).when(command(update({ refAudio: clip("ab", 1000) })));
    expect(w.after.config.refAudio).toEqual({ mimeType: "audio/wav", bytes: 1000, sha256: "ab".repeat(32) });
    // No bytes in the decision: the clip is in the log once, in the update (the input) that carried it.
    const binary = (value: unknown): boolean =>
      value instanceof Uint8Array || (typeof value === "object" && value !== null && Object.values(value).some(binary));
    expect(binary(w.events)).toBe(false);
    expect(binary(w.events.map((e) => ({ ...e, data: { ...e.data, audio: new Uint8Array(1) } })))).toBe(true);
  });

  it("refuses removing the clip a model requires", () => {
    given(opened(MINICPMO), command(update({ refAudio: clip("ab") })))
      .when(command(update({ refAudio: null }, "evt_rm")))
      .thenRejects("ref_audio_required", "evt_rm");
  });

  it("refuses another clip once the session has audio, and takes the same clip again", () => {
    const started = [opened(MINICPMO), command(update({ refAudio: clip("ab") })), command(append(320, 0))];
    given(...started)
      .when(command(update({ refAudio: clip("cd") }, "evt_voice")))
      .thenRejects("ref_audio_update_unsupported", "evt_voice");
    expect(types(given(...started).when(command(update({ refAudio: clip("ab") }))).events)).toEqual([
      "SessionConfigured",
    ]);
  });
});

describe("out-of-band responses", () => {
  const oob = (extra: Partial<Extract<Command, { type: "response.create" }>> = {}): Command => ({
    ...(create({ purpose: "classify" }) as Extract<Command, { type: "response.create" }>),
    conversation: "none",
    ...extra,
  });

  it("starts a response outside the conversation: no history entry, no previous item", () => {
    const w = given(opened(), command(text("hello"))).when(command(oob()));
    w.then([
      {
        type: "ResponseStarted",
        data: { responseId: R1, conversation: "none", previousItemId: null, metadata: { purpose: "classify" } },
      },
    ]);
    expect(w.after.history.map((h) => h.id)).toEqual([U1]);
    expect(w.after.lastItemId).toBe(U1);
  });

  it("keeps its output out of history, out of retrieval and out of previous_item_id after it ends", () => {
    const inputs = [
      opened(),
      command(text("hello")),
      command(oob()),
      stage(audio(400, "classified")),
      stage({ kind: "end_of_turn", epoch: 0 }),
    ];
    const done = given(...inputs);
    expect(done.state.history.map((h) => h.id)).toEqual([U1]);
    done
      .when(command({ type: "conversation.item.retrieve", eventId: "evt_r", itemId: I1 as ItemId }))
      .thenRejects("item_not_found", "evt_r");
    const next = done.when(command(create()));
    expect(next.events[0]).toMatchObject({ type: "ResponseStarted", data: { responseId: R2, previousItemId: U1 } });
    const spoke = given(...inputs, command(create())).when(stage(audio(100, "hi")));
    expect(spoke.events[0]).toMatchObject({ type: "MessageStarted", data: { itemId: I2, previousItemId: U1 } });
    expect(spoke.after.history.map((h) => h.id)).toEqual([U1, I2]);
  });

  it("ends cancelled without a history entry", () => {
    const w = given(opened(), command(oob()), stage(audio(400, "partial"))).when(command(cancel()));
    expect(types(w.events)).toEqual(["EpochAdvanced", "ResponseEnded"]);
    expect(w.events[1]).toMatchObject({ data: { outOfBand: true, status: "cancelled" } });
    expect(w.after.history).toEqual([]);
  });

  it("acknowledges its playback without committing anything to history", () => {
    const w = given(
      opened(),
      command(oob()),
      stage(audio(400, "classified")),
      stage({ kind: "end_of_turn", epoch: 0 }),
    ).when(command(ack({ responseId: R1, playedMs: 400 })));
    w.then([{ type: "PlaybackAcknowledged", data: { playedMs: 400, historyCommitted: false } }]);
    expect(w.after.history).toEqual([]);
  });

  it("refuses an item_reference to an item that is not in the conversation", () => {
    given(opened())
      .when(command(oob({ input: [{ type: "item_reference", id: "item_missing" as ItemId }] })))
      .thenRejects("item_not_found");
  });

  it("hands its input items (references resolved) to the runner", () => {
    const s = given(opened(), command(text("hello"))).state;
    const respond = effectsOfForTest(
      s,
      command(
        oob({
          input: [
            { type: "item_reference", id: U1 as ItemId },
            { type: "message", role: "user", content: [{ type: "input_text", text: "Is this spam?" }] },
          ],
        }),
      ),
    ).find((e) => e.kind === "submit");
    expect(respond).toMatchObject({
      unit: {
        kind: "respond",
        conversation: "none",
        metadata: { purpose: "classify" },
        input: [
          { id: U1, text: "hello" },
          { id: `${R1}_input1`, role: "user", text: "Is this spam?" },
        ],
      },
    });
  });
});

describe("text responses", () => {
  it("keep their text in history, as an output_text item", () => {
    const w = given(
      opened(),
      command(update({ outputModalities: ["text"] })),
      command(text("hello")),
      command(create()),
      stage({ kind: "text", epoch: 0, text: "You wrote: " }),
      stage({ kind: "text", epoch: 0, text: "hello" }),
    ).when(stage({ kind: "end_of_turn", epoch: 0 }));
    expect(types(w.events)).toEqual(["ResponseEnded", "HistoryCommitted"]);
    expect(history(w.after, I1)).toEqual({
      id: I1,
      type: "message",
      role: "assistant",
      text: "You wrote: hello",
      audioMs: 0,
      status: "completed",
      audio: false,
    });
    const retrieved = given(
      opened(),
      command(update({ outputModalities: ["text"] })),
      command(text("hello")),
      command(create()),
      stage({ kind: "text", epoch: 0, text: "You wrote: hello" }),
      stage({ kind: "end_of_turn", epoch: 0 }),
    ).when(command({ type: "conversation.item.retrieve", eventId: null, itemId: I1 as ItemId }));
    retrieved.then([{ type: "ItemRetrieved", data: { item: { id: I1, text: "You wrote: hello", audio: false } } }]);
  });

  it("keep what was delivered when cancelled, as incomplete", () => {
    const w = given(opened(), command(create({}, null)), stage({ kind: "text", epoch: 0, text: "Half an " })).when(
      command(cancel(R1 as ResponseId)),
    );
    expect(history(w.after, I1)).toMatchObject({ text: "Half an ", status: "incomplete", audio: false });
  });
});

describe("a runner that breaks its contract", () => {
  it("ends its session: the response fails, the client gets a coded error, the session closes", () => {
    const w = given(opened(), command(create()), stage(audio(200, "hel"))).when({
      type: "RunnerFaulted",
      at: 5,
      data: { operation: "submit", message: "boom" },
    });
    expect(types(w.events)).toEqual(["ResponseEnded", "HistoryCommitted", "RunnerFailed", "SessionClosed"]);
    expect(w.events[0]).toMatchObject({
      data: { status: "failed", reason: "model_failure", error: { code: "runtime_data_plane_stream_failed" } },
    });
    expect(w.events[2]).toMatchObject({
      data: { operation: "submit", code: "runtime_data_plane_stream_failed", message: expect.stringContaining("boom") },
    });
    expect(w.events[3]).toMatchObject({ data: { reason: "runner_failed" } });
    expect(w.after.phase).toBe("closed");
  });

  it("ends its session when it emits an output of an epoch the session never reached", () => {
    const w = given(opened(), command(create())).when(stage({ kind: "speak", epoch: 5 }));
    expect(types(w.events)).toEqual([
      "MessageStarted",
      "ResponseEnded",
      "HistoryCommitted",
      "RunnerFailed",
      "SessionClosed",
    ]);
    expect(w.events[3]).toMatchObject({
      data: { operation: "emit", message: expect.stringContaining("names epoch 5, beyond the session's 0") },
    });
  });

  it("decides nothing once the session is closed", () => {
    given(opened(), command({ type: "session.close", eventId: null }))
      .when({ type: "RunnerFaulted", at: 5, data: { operation: "close", message: "boom" } })
      .thenNothing();
  });
});

describe("a stalled model (BEHAVIOUR.md, Defaults and limits: response_timeout_ms)", () => {
  const progress = (state: SessionState) => responseProgressOf(state) ?? "";

  it("ends a response that made no progress since its timer was armed: failed with response_timeout, epoch + 1", () => {
    const started = given(opened(), command(create()), stage(audio(200, "hel")));
    const w = started.when({
      type: "TimerFired",
      at: 9,
      data: { timer: "response_timeout", progress: progress(started.state) },
    });
    expect(types(w.events)).toEqual(["EpochAdvanced", "ResponseEnded", "HistoryCommitted"]);
    expect(w.events[1]).toMatchObject({
      data: { status: "failed", reason: "response_timeout", error: { code: "response_timeout" } },
    });
    expect(w.after.epoch).toBe(1);
    expect(w.after.response).toBeNull();
  });

  it("ignores a timer armed before the response moved on", () => {
    const before = given(opened(), command(create()), stage(audio(200, "hel"))).state;
    given(opened(), command(create()), stage(audio(200, "hel")), stage(audio(200, "lo")))
      .when({ type: "TimerFired", at: 9, data: { timer: "response_timeout", progress: progress(before) } })
      .thenNothing();
  });

  it("takes a session's own response_timeout_ms from extra_body", () => {
    const w = given(opened()).when(command(update({ responseTimeoutMs: 500 })));
    expect(w.after.config.responseTimeoutMs).toBe(500);
  });
});

describe("input transcripts (BEHAVIOUR.md, Turn-taking: a transcript belongs to the item it transcribes)", () => {
  const transcript = (itemId: string, text: string, epoch = 0) =>
    stage({ kind: "input_transcript", epoch, transcript: text, itemId });
  const turnLane = [opened(), command(update({ autoResponse: false }))];

  it("attaches each transcript to the item it names, whatever was committed since", () => {
    const w = given(
      ...turnLane,
      command(append(320, 0)),
      command({ type: "input_audio_buffer.commit", eventId: null, createResponse: false }),
      command(append(320, 0)),
      command({ type: "input_audio_buffer.commit", eventId: null, createResponse: false }),
      transcript(U1, "first words"),
    ).when(transcript(U2, "second words"));
    w.then([{ type: "InputTranscribed", data: { itemId: U2, transcript: "second words" } }]);
    expect(history(w.after, U1)?.text).toBe("first words");
    expect(history(w.after, U2)?.text).toBe("second words");
  });

  it("keeps a transcript that arrives after a cancel advanced the epoch", () => {
    const w = given(
      ...turnLane,
      command(append(320, 0)),
      command({ type: "input_audio_buffer.commit", eventId: null, createResponse: false }),
      command(create()),
      command(cancel()),
    ).when(transcript(U1, "my own words", 0));
    w.then([{ type: "InputTranscribed", data: { itemId: U1, transcript: "my own words" } }]);
  });
});

describe("a server-VAD commit after a long silence (issue 8: no unbounded item)", () => {
  it("holds the utterance (its start minus the prefix padding, to its stop), not the silence before it", () => {
    const frames = (p: number, n: number) => Array.from({ length: n }, () => p);
    const w = given(
      opened(),
      command(update({ turnDetection: { type: "server_vad", createResponse: false } })),
      command(appendFrames(frames(0, 600))),
      command(appendFrames(frames(0.9, 30))),
    ).when(command(appendFrames(frames(0, 25))));
    const committed = w.events.find((e) => e.type === "InputCommitted");
    expect(committed).toBeDefined();
    const audioMs = committed?.type === "InputCommitted" ? committed.data.audioMs : 0;
    // 30 frames of speech (960 ms) + 300 ms prefix padding + the silence until the stop (500 ms), never the
    // 19 s of silence before it.
    expect(audioMs).toBeGreaterThanOrEqual(960 + 300);
    expect(audioMs).toBeLessThanOrEqual(960 + 300 + 600);
  });
});

describe("a response that only calls tools (issue 8, case 5; OpenAI: the function_call item alone)", () => {
  const call = (callId: string) =>
    stage({ kind: "tool_call", epoch: 0, callId, name: "get_weather", arguments: '{"city":"Paris"}' });

  it("carries the function_call item at output 0 and no message item", () => {
    const w = given(opened(TOOLS), command(create())).when(call("call_1"));
    expect(types(w.events)).toEqual(["FunctionCallDelivered"]);
    expect(w.events[0]).toMatchObject({ data: { outputIndex: 0, previousItemId: null } });
    const ended = given(opened(TOOLS), command(create()), call("call_1")).when(
      stage({ kind: "end_of_turn", epoch: 0 }),
    );
    expect(types(ended.events)).toEqual(["ResponseEnded"]);
    expect(ended.events[0]).toMatchObject({
      data: { messageOutputIndex: null, functionCalls: [{ callId: "call_1" }] },
    });
    // History holds the call and no empty assistant message; the call is the last item.
    expect(ended.after.history.map((h) => h.type)).toEqual(["function_call"]);
    expect(history(ended.after, I1)).toBeUndefined();
    expect(ended.after.lastItemId).toBe(`${I1}_fc1`);
  });

  it("puts the message first when the response speaks before calling a tool", () => {
    const w = given(opened(TOOLS), command(create()), stage(audio(200, "Let me check."))).when(call("call_1"));
    expect(w.events[0]).toMatchObject({ type: "FunctionCallDelivered", data: { outputIndex: 1, previousItemId: I1 } });
  });

  it("opens the message after the calls when the response speaks after calling a tool", () => {
    const w = given(opened(TOOLS), command(create()), call("call_1")).when(stage(audio(200, "Done.")));
    expect(types(w.events)).toEqual(["MessageStarted", "ResponseSpoke", "AudioDelivered"]);
    expect(w.events[0]).toMatchObject({ data: { itemId: I1, outputIndex: 1, previousItemId: `${I1}_fc1` } });
  });

  it("keeps the empty message item of a response cancelled before any output (BEHAVIOUR.md scenario 9)", () => {
    const w = given(opened(TOOLS), command(create())).when(command(cancel()));
    expect(types(w.events).slice(0, 3)).toEqual(["EpochAdvanced", "MessageStarted", "ResponseEnded"]);
    expect(w.events[2]).toMatchObject({ data: { messageOutputIndex: 0 } });
  });
});
