import { describe, expect, it } from "vitest";
import {
  type Capabilities,
  type Command,
  type DomainEvent,
  decide,
  defaultSessionConfig,
  evolve,
  type Input,
  type ItemId,
  initialState,
  type SessionConfig,
  type SessionState,
  type StageOutput,
} from "../../src/domain/index.ts";
import {
  ack,
  append,
  appendFrames,
  audio,
  cancel,
  clear,
  close,
  command,
  commit,
  create,
  createWithNothing,
  ECHO_CAPABILITIES,
  given,
  opened,
  SESSION_ID,
  stage,
  truncate,
  update,
} from "./decider-spec.ts";

/** Derived ids of SESSION_ID: tag "01234567" (ids.ts). */
const R1 = "resp_01234567_1";
const R2 = "resp_01234567_2";
const R3 = "resp_01234567_3";
const I1 = `item_${R1}`;
const I2 = `item_${R2}`;
const U1 = "item_01234567_u1";
const U2 = "item_01234567_u2";

const TURN_BASED: Capabilities = { ...ECHO_CAPABILITIES, implementationLevel: "turn_based", supportsBargeIn: false };

const serverVad = (extra: Record<string, unknown> = {}): Input =>
  command(update({ turnDetection: { type: "server_vad", ...extra } }));
const types = (events: readonly DomainEvent[]): string[] => events.map((e) => e.type);
const ofType = <T extends DomainEvent["type"]>(events: readonly DomainEvent[], type: T) =>
  events.filter((e): e is Extract<DomainEvent, { type: T }> => e.type === type);
const historyOf = (state: SessionState, id: string) => state.history.find((h) => h.id === id);
const silence = (frames: number): number[] => Array.from({ length: frames }, () => 0);
const speech = (frames: number): number[] => Array.from({ length: frames }, () => 0.9);

describe("session opening", () => {
  it("creates the session with attachment generation 1, the resume token hash and the default config", () => {
    const w = given().when(opened());
    w.then([
      {
        type: "SessionCreated",
        data: {
          sessionId: SESSION_ID,
          attachmentGeneration: 1,
          resumeTokenSha256: "ab".repeat(32),
          capabilities: ECHO_CAPABILITIES,
          config: defaultSessionConfig("test-model", ECHO_CAPABILITIES),
        },
      },
    ]);
    expect(w.events).toHaveLength(1);
    expect(w.after.phase).toBe("open");
    expect(w.after.epoch).toBe(0);
    expect(w.after.config).toEqual({
      model: "test-model",
      instructions: "",
      voice: null,
      outputModalities: ["audio", "text"],
      inputAudio: { format: "pcm16", rate: 24000 },
      outputAudio: { format: "pcm16", rate: 24000 },
      turnDetection: null,
      overlapPolicy: "listen_only",
      playbackCommitPolicy: "ack_only",
      temperature: null,
      autoResponse: true,
      nativeDuplex: true,
      idleTimeoutS: 300,
      tools: [],
      toolChoice: "auto",
      maxResponseOutputTokens: "inf",
      refAudio: null,
      responseTimeoutMs: 30000,
      overlapShortAckMs: 700,
      overlapBargeInMs: 1200,
      overlapSilenceRms: 0.003,
      speed: 1,
      tracing: null,
    });
  });

  it("keeps barge-in at 700 ms of overlap for a log recorded before overlap_barge_in_ms existed", () => {
    const { overlapBargeInMs: _b, overlapShortAckMs: _s, ...recorded } = defaultSessionConfig("m", ECHO_CAPABILITIES);
    const old = given(opened(), command(create()), stage(audio(500, "hel")));
    // Fold a SessionConfigured as an older log recorded it (no overlap fields), with barge_in_on_speech.
    const state = evolve(old.state, {
      type: "SessionConfigured",
      data: { config: { ...recorded, overlapPolicy: "barge_in_on_speech" } as SessionConfig },
    });
    expect(state.config.overlapBargeInMs).toBe(700);
    expect(state.config.overlapShortAckMs).toBe(700);
    const events = decide(state, command(appendFrames(speech(25))));
    expect(ofType(events, "OverlapDecided")[0]?.data).toMatchObject({ action: "barge_in", overlapMs: 800 });
  });

  it("defaults auto_response to false on a turn-based runner", () => {
    const w = given().when(opened(TURN_BASED));
    expect(w.after.config.autoResponse).toBe(false);
  });

  it("decides nothing for a second SessionOpened", () => {
    given(opened()).when(opened()).thenNothing();
  });

  it("detaches a resumable session when its socket drops, and resumes it with a new generation and token", () => {
    const detached = given(opened()).when({
      type: "AttachmentChanged",
      at: 1,
      data: { change: "detached", generation: 1, resumeTokenSha256: null, lastReceivedSeq: null },
    });
    detached.then([{ type: "SessionDetached", data: { attachmentGeneration: 1 } }]);
    expect(detached.after.attached).toBe(false);
    expect(detached.after.phase).toBe("open");
    const resumed = given(opened()).when({
      type: "AttachmentChanged",
      at: 2,
      data: { change: "resumed", generation: 2, resumeTokenSha256: "cd".repeat(32), lastReceivedSeq: 7 },
    });
    resumed.then([
      {
        type: "SessionResumed",
        data: { attachmentGeneration: 2, resumeTokenSha256: "cd".repeat(32), lastReceivedSeq: 7 },
      },
    ]);
    expect(resumed.after).toMatchObject({
      attachmentGeneration: 2,
      resumeTokenSha256: "cd".repeat(32),
      attached: true,
    });
  });

  it("closes a session whose runner cannot resume when its socket drops", () => {
    const w = given(opened({ ...TURN_BASED, supportsSessionResume: false }), command(create())).when({
      type: "AttachmentChanged",
      at: 1,
      data: { change: "detached", generation: 1, resumeTokenSha256: null, lastReceivedSeq: null },
    });
    expect(types(w.events)).toEqual([
      "EpochAdvanced",
      "MessageStarted",
      "ResponseEnded",
      "HistoryCommitted",
      "SessionClosed",
    ]);
    expect(ofType(w.events, "SessionClosed")[0]?.data.reason).toBe("disconnect");
  });

  it("after a restart cancels the active response (server_restart) and waits detached", () => {
    const w = given(opened(), command(create()), stage(audio(200, "hi"))).when({
      type: "SessionRecovered",
      at: 5,
      data: { reason: "server_restart" },
    });
    expect(types(w.events)).toEqual(["EpochAdvanced", "ResponseEnded", "HistoryCommitted", "SessionDetached"]);
    expect(ofType(w.events, "ResponseEnded")[0]?.data).toMatchObject({ status: "cancelled", reason: "server_restart" });
    expect(w.after.attached).toBe(false);
  });

  describe("an utterance of the model-native lane heard to its end and not answered when the runner lost its work", () => {
    const recovered = (reason: "server_restart" | "append_failed" = "server_restart"): Input => ({
      type: "SessionRecovered",
      at: 5,
      data: { reason },
    });
    // Speech from frame 1 (start 0 ms with the prefix padding), stopped at 640 ms (see the VAD tests below).
    const utterance = command(appendFrames([0, ...speech(3), ...silence(16)]));

    it.each(["server_restart", "append_failed"] as const)("is given to the new runner again after %s", (reason) => {
      const w = given(opened(), utterance).when(recovered(reason));
      expect(types(w.events)).toEqual(["UtteranceResubmitted", "SessionDetached"]);
      w.thenStartsWith([{ type: "UtteranceResubmitted", data: { audioStartMs: 0, audioEndMs: 640 } }]);
    });

    it("is not, once the model answered it (a response started) or chose to listen", () => {
      const answered = given(
        opened(),
        utterance,
        stage({ kind: "speak", epoch: 0 }),
        stage({ kind: "end_of_turn", epoch: 0 }),
      );
      expect(types(answered.when(recovered()).events)).not.toContain("UtteranceResubmitted");
      const listened = given(opened(), utterance, stage({ kind: "listen", epoch: 0, reason: "model_listen" }));
      expect(types(listened.when(recovered()).events)).not.toContain("UtteranceResubmitted");
    });

    it("is not after the client cleared the input, nor in the turn lane (where the commit made a turn)", () => {
      expect(types(given(opened(), utterance, command(clear())).when(recovered()).events)).not.toContain(
        "UtteranceResubmitted",
      );
      const turnLane = given(opened(), command(update({ autoResponse: false })), utterance);
      expect(types(turnLane.when(recovered()).events)).not.toContain("UtteranceResubmitted");
    });
  });

  describe("an utterance in progress when the session moves (issue 33, part 2: BEHAVIOUR.md, 'Moves lose nothing')", () => {
    const recovered: Input = { type: "SessionRecovered", at: 5, data: { reason: "server_restart" } };
    const owned: Input = { type: "SessionOwned", at: 5, data: { node: "node-b", epoch: 2 } };
    // Speech from frame 1 (start 0 ms with the prefix padding), still going at 192 ms.
    const speaking = command(appendFrames([0, ...speech(5)]));
    const carried = { type: "UtteranceResubmitted", data: { audioStartMs: 0, audioEndMs: 192, inProgress: true } };

    it.each([
      ["a restart", recovered],
      ["a takeover", owned],
    ])("is carried over to the new runner after %s, in the model-native lane", (_, move) => {
      const w = given(opened(), speaking).when(move);
      expect(types(w.events)).toEqual(["UtteranceResubmitted", "SessionDetached"]);
      w.thenStartsWith([carried as DomainEvent]);
      // The endpointer goes on where it was: still in speech, the same item to come.
      expect(w.after.input.endpointer.phase).toBe("speech");
      expect(w.after.input.speechStartMs).toBe(0);
    });

    it("in the turn lane too, and its end after the move commits one item from its start, answered", () => {
      const w = given(opened(), serverVad(), speaking).when(recovered);
      expect(types(w.events)).toEqual(["UtteranceResubmitted", "SessionDetached"]);
      w.thenStartsWith([carried as DomainEvent]);
      const ended = given(opened(), serverVad(), speaking, recovered).when(
        command(appendFrames([...speech(3), ...silence(16)])),
      );
      expect(types(ended.events)).toContain("SpeechStopped");
      expect(ofType(ended.events, "SpeechStarted")).toHaveLength(0);
      const committed = ofType(ended.events, "InputCommitted")[0];
      expect(committed?.data).toMatchObject({ itemId: U1, source: "turn_detection" });
      // From the speech's start before the move (0 ms) to its stop: the whole utterance in one item.
      expect(committed?.data.audioMs).toBe(committed?.data.clockMs);
      expect(types(ended.events)).toContain("ResponseStarted");
    });

    it("after an unanswered one: both, oldest first, each once", () => {
      const both = given(
        opened(),
        command(appendFrames([0, ...speech(3), ...silence(16)])),
        command(appendFrames(speech(4))),
      ).when(recovered);
      expect(types(both.events)).toEqual(["UtteranceResubmitted", "UtteranceResubmitted", "SessionDetached"]);
      const [first, second] = ofType(both.events, "UtteranceResubmitted");
      expect(first?.data).toEqual({ audioStartMs: 0, audioEndMs: 640 });
      expect(second?.data).toMatchObject({ inProgress: true, audioEndMs: 768 });
      expect(second?.data.audioStartMs).toBeGreaterThanOrEqual(640);
    });

    it("is not once the speech ended by a clear, nor for a session kept on the rule before it", () => {
      expect(types(given(opened(), speaking, command(clear())).when(recovered).events)).toEqual(["SessionDetached"]);
      const old = opened();
      const before: Input = {
        ...old,
        data: { ...(old as Extract<Input, { type: "SessionOpened" }>).data, rules: { noUtteranceCarriedOver: true } },
      } as Input;
      expect(types(given(before, speaking).when(recovered).events)).toEqual(["SessionDetached"]);
    });
  });
});

describe("session.update", () => {
  it("configures the session with the patched values and keeps the rest", () => {
    const g = given(opened());
    const w = g.when(command(update({ instructions: "be brief", voice: "alloy" })));
    w.then([
      { type: "SessionConfigured", data: { config: { ...g.state.config, instructions: "be brief", voice: "alloy" } } },
    ]);
    expect(w.events).toHaveLength(1);
    expect(w.after.config).toEqual({ ...g.state.config, instructions: "be brief", voice: "alloy" });
  });

  it("rejects semantic_vad with unsupported_turn_detection and keeps the previous config (scenario 17)", () => {
    const g = given(opened(), serverVad({ silenceDurationMs: 700 }));
    const before = g.state.config;
    const w = g.when(command(update({ turnDetection: { type: "semantic_vad" } }, "evt_sem")));
    w.thenRejects("unsupported_turn_detection", "evt_sem");
    w.then([
      { type: "RequestRejected", data: { param: "session.turn_detection.type", commandType: "session.update" } },
    ]);
    expect(w.after.config).toEqual(before);
    expect(w.after.config.turnDetection).toMatchObject({ type: "server_vad", silenceDurationMs: 700 });
  });

  it("fills server_vad with the documented defaults and implies barge_in_on_speech", () => {
    const w = given(opened()).when(serverVad());
    expect(types(w.events)).toEqual(["SessionConfigured"]);
    expect(w.after.config.turnDetection).toEqual({
      type: "server_vad",
      threshold: 0.5,
      prefixPaddingMs: 300,
      silenceDurationMs: 500,
      minSpeechDurationMs: 96,
      createResponse: true,
      interruptResponse: true,
    });
    expect(w.after.config.overlapPolicy).toBe("barge_in_on_speech");
  });

  it("keeps listen_only under server_vad on a model without barge-in", () => {
    const w = given(opened(TURN_BASED)).when(serverVad());
    expect(w.after.config.overlapPolicy).toBe("listen_only");
  });

  it("keeps an explicit overlap policy next to server_vad", () => {
    const w = given(opened()).when(
      command(update({ turnDetection: { type: "server_vad" }, overlapPolicy: "listen_only" })),
    );
    expect(w.after.config.overlapPolicy).toBe("listen_only");
  });

  it("turns server VAD off with turn_detection null", () => {
    const w = given(opened(), serverVad()).when(command(update({ turnDetection: null })));
    expect(w.after.config.turnDetection).toBeNull();
  });

  it("rejects an unsupported input sample rate with unsupported_audio_format", () => {
    given(opened())
      .when(command(update({ inputAudio: { format: "pcm16", rate: 3 } }, "evt_rate")))
      .thenRejects("unsupported_audio_format", "evt_rate");
  });
});

describe("input_audio_buffer.append", () => {
  it("buffers the audio with its duration and advances the input clock", () => {
    const w = given(opened()).when(command(append(320, 0)));
    w.then([{ type: "AudioBuffered", data: { durationMs: 320, bytes: 10240, clockMs: 320, vadFrames: 10 } }]);
    expect(w.events).toHaveLength(1);
    expect(w.after.input).toMatchObject({ bufferedMs: 320, bufferedBytes: 10240, clockMs: 320 });
  });

  it("accumulates the clock over appends", () => {
    const w = given(opened(), command(append(320, 0))).when(command(append(640, 0)));
    w.then([{ type: "AudioBuffered", data: { durationMs: 640, clockMs: 960, vadFrames: 30 } }]);
    expect(w.after.input.bufferedMs).toBe(960);
  });

  it("reports speech started and stopped from the VAD frames, and does not commit in the native lane", () => {
    // Default server-VAD parameters: speech from frame 1 (32 ms); the silence candidate begins at 128 ms and reaches
    // 500 ms at the end of the frame ending at 640 ms.
    const w = given(opened()).when(command(appendFrames([0, ...speech(3), ...silence(16)])));
    expect(types(w.events)).toEqual(["AudioBuffered", "SpeechStarted", "SpeechStopped"]);
    // Without turn detection the endpointer's marks only annotate the runner's units: nothing is announced.
    w.then([
      { type: "AudioBuffered" },
      { type: "SpeechStarted", data: { itemId: U1, audioStartMs: 0, announced: false } },
      { type: "SpeechStopped", data: { itemId: U1, audioEndMs: 640, announced: false } },
    ]);
    expect(w.after.input.bufferedMs).toBe(640);
    expect(w.after.history).toEqual([]);
    expect(w.after.response).toBeNull();
  });

  it("announces no speech without turn detection, also when speech barges in or outlasts a response", () => {
    const g = given(
      opened(),
      command(update({ overlapPolicy: "barge_in_on_speech" })),
      command(create()),
      stage(audio(500, "hel")),
    );
    const barge = g.when(command(appendFrames([...speech(40), ...silence(20)])));
    expect(types(barge.events)).toContain("EpochAdvanced");
    expect(types(barge.events)).not.toContain("SpeechAnnounced");
    expect(ofType(barge.events, "SpeechStarted").map((e) => e.data.announced)).toEqual([false]);
    expect(ofType(barge.events, "SpeechStopped").map((e) => e.data.announced)).toEqual([false]);
    // Speech that goes on past the end of a response the overlap did not cut.
    const outlast = given(opened(), command(create()), stage(audio(500, "hel")), command(appendFrames(speech(5))));
    expect(types(outlast.when(stage({ kind: "end_of_turn", epoch: 0 })).events)).not.toContain("SpeechAnnounced");
  });
});

describe("input_audio_buffer.commit", () => {
  it("rejects an empty buffer with input_audio_buffer_empty: no item, no response (scenario 4)", () => {
    const w = given(opened(), serverVad()).when(command(commit("evt_c")));
    w.thenRejects("input_audio_buffer_empty", "evt_c");
    expect(w.after.history).toEqual([]);
    expect(w.after.response).toBeNull();
  });

  it("commits only an InputCommitted in the native lane", () => {
    const w = given(opened(), command(append(320, 0))).when(command(commit()));
    expect(types(w.events)).toEqual(["InputCommitted"]);
    w.then([
      {
        type: "InputCommitted",
        data: { itemId: U1, previousItemId: null, audioMs: 320, clockMs: 320, historyLength: 1 },
      },
    ]);
    expect(w.after.input).toMatchObject({ bufferedMs: 0, bufferedBytes: 0, clockMs: 320 });
    expect(w.after.history).toEqual([
      { id: U1, type: "message", role: "user", text: "", audioMs: 320, status: "completed", audio: true },
    ]);
    expect(w.after.response).toBeNull();
  });

  it("takes a commit with is_speech false as a declaration of silence: the audio dropped unheard, a listen", () => {
    const silence = { ...commit("evt_s"), declaredSilence: true as const };
    const w = given(opened(), serverVad(), command(append(320, 0))).when(command(silence));
    w.then([
      { type: "InputCleared", data: { clockMs: 320 } },
      { type: "ModelListened", data: { reason: "client_declared_silence", responseId: null } },
    ]);
    expect(w.after.history).toEqual([]);
    expect(w.after.response).toBeNull();
    expect(w.after.input).toMatchObject({ bufferedMs: 0, bufferedBytes: 0, clockMs: 320 });
    // Nothing buffered: still a listen, never input_audio_buffer_empty.
    given(opened())
      .when(command(silence))
      .then([{ type: "ModelListened", data: { reason: "client_declared_silence" } }]);
  });

  it("commits and starts a response in the turn lane with server VAD", () => {
    const w = given(opened(), serverVad(), command(append(320, 0))).when(command(commit()));
    expect(types(w.events)).toEqual(["InputCommitted", "ResponseStarted"]);
    w.then([
      { type: "InputCommitted", data: { itemId: U1 } },
      {
        type: "ResponseStarted",
        data: { responseId: R1, itemId: I1, previousItemId: U1, turnId: 1, metadata: null, source: "client" },
      },
    ]);
    expect(w.after.response?.id).toBe(R1);
  });

  it("without turn detection commits an item only: response.create makes the response (OpenAI semantics)", () => {
    const g = given(opened(), command(update({ autoResponse: false })), command(append(320, 0)));
    expect(types(g.when(command(commit())).events)).toEqual(["InputCommitted"]);
    const w = given(
      opened(),
      command(update({ autoResponse: false })),
      command(append(320, 0)),
      command(commit()),
    ).when(command(create()));
    expect(types(w.events)).toEqual(["ResponseStarted"]);
  });

  it("starts a response in the turn lane when the commit asks for one (response_create)", () => {
    const w = given(opened(), command(update({ autoResponse: false })), command(append(320, 0))).when(
      command(commit(null, true)),
    );
    expect(types(w.events)).toEqual(["InputCommitted", "ResponseStarted"]);
  });

  it("commits an item only on a turn-based model without turn detection", () => {
    const w = given(opened(TURN_BASED), command(append(320, 0))).when(command(commit()));
    expect(types(w.events)).toEqual(["InputCommitted"]);
  });

  it("does not start a response when the commit says create_response false", () => {
    const w = given(opened(), serverVad(), command(append(320, 0))).when(command(commit(null, false)));
    expect(types(w.events)).toEqual(["InputCommitted"]);
  });

  it("defers the response of a commit while one is active (deferred-turns.test.ts has the rest)", () => {
    const w = given(opened(), serverVad(), command(create()), command(append(320, 0))).when(command(commit()));
    expect(types(w.events)).toEqual(["InputCommitted"]);
    expect(ofType(w.events, "InputCommitted")[0]?.data.responseDeferred).toBe(true);
    expect(w.after.response?.id).toBe(R1);
    expect(w.after.responseCount).toBe(1);
  });
});

describe("server VAD in the turn lane", () => {
  it("commits and responds when speech is followed by 500 ms of silence, in that order (scenario 5)", () => {
    const g = given(opened(), serverVad(), command(appendFrames(speech(10))));
    expect(g.state.input.speechItemId).toBe(U1);
    // Silence from 320 ms; the candidate reaches 500 ms at the end of the 16th silent frame (832 ms).
    const w = g.when(command(appendFrames(silence(16))));
    expect(types(w.events)).toEqual(["AudioBuffered", "SpeechStopped", "InputCommitted", "ResponseStarted"]);
    w.then([
      { type: "AudioBuffered", data: { clockMs: 832 } },
      { type: "SpeechStopped", data: { itemId: U1, audioEndMs: 832 } },
      { type: "InputCommitted", data: { itemId: U1, audioMs: 832, clockMs: 832 } },
      { type: "ResponseStarted", data: { responseId: R1, previousItemId: U1, source: "turn_detection" } },
    ]);
    expect(w.after.userItemCount).toBe(1);
  });

  it("does not stop before the silence reaches silence_duration_ms", () => {
    const w = given(opened(), serverVad(), command(appendFrames(speech(10)))).when(command(appendFrames(silence(15))));
    expect(types(w.events)).toEqual(["AudioBuffered"]);
  });

  it("does the whole turn in one append: started, stopped, committed, responded", () => {
    const w = given(opened(), serverVad()).when(command(appendFrames([...speech(10), ...silence(16)])));
    expect(types(w.events)).toEqual([
      "AudioBuffered",
      "SpeechStarted",
      "SpeechStopped",
      "InputCommitted",
      "ResponseStarted",
    ]);
  });

  it("does not commit on speech stop when create_response is false, but still commits the item", () => {
    const w = given(opened(), serverVad({ createResponse: false }), command(appendFrames(speech(10)))).when(
      command(appendFrames(silence(16))),
    );
    expect(types(w.events)).toEqual(["AudioBuffered", "SpeechStopped", "InputCommitted"]);
  });

  it("puts audio_start_ms no earlier than the last commit (the reset keeps the session clock)", () => {
    const g = given(
      opened(),
      serverVad({ createResponse: false }),
      command(appendFrames(speech(10))),
      command(appendFrames(silence(16))),
    );
    expect(g.state.input.clockMs).toBe(832);
    // Speech begins at 832 + 64 = 896; minus 300 ms of padding would be 596, floored at the commit (832).
    const w = g.when(command(appendFrames([0, 0, ...speech(3)])));
    w.then([{ type: "AudioBuffered" }, { type: "SpeechStarted", data: { itemId: U2, audioStartMs: 832 } }]);
  });

  it("barges in on speech longer than a short remark while a response is active: epoch + 1, then the response ends turn_detected", () => {
    const g = given(opened(), serverVad(), command(create()));
    const w = g.when(command(appendFrames(speech(40))));
    expect(types(w.events)).toEqual([
      "AudioBuffered",
      "SpeechStarted",
      "OverlapDecided",
      "SpeechAnnounced",
      "EpochAdvanced",
      "MessageStarted",
      "ResponseEnded",
      "HistoryCommitted",
    ]);
    w.thenStartsWith([
      { type: "AudioBuffered" },
      // Held back while the response plays: stock clients read speech_started as "the response was cancelled".
      { type: "SpeechStarted", data: { itemId: U1, announced: false } },
      { type: "OverlapDecided", data: { action: "barge_in", policy: "barge_in_on_speech", overlapMs: 1280 } },
      { type: "SpeechAnnounced", data: { itemId: U1 } },
      { type: "EpochAdvanced", data: { epoch: 1, reason: "turn_detected" } },
      { type: "MessageStarted", data: { responseId: R1 } },
      { type: "ResponseEnded", data: { responseId: R1, status: "cancelled", reason: "turn_detected" } },
    ]);
    expect(w.after.epoch).toBe(1);
    expect(w.after.response).toBeNull();
  });

  it("acknowledges a short remark (<= 700 ms) without interrupting, and counts it towards the overlap", () => {
    const g = given(opened(), serverVad(), command(create()));
    const w = g.when(command(appendFrames(speech(20))));
    expect(types(w.events)).toEqual(["AudioBuffered", "SpeechStarted", "OverlapDecided"]);
    w.thenStartsWith([
      { type: "AudioBuffered" },
      { type: "SpeechStarted" },
      { type: "OverlapDecided", data: { action: "listen", reason: "short_ack", overlapMs: 640 } },
    ]);
    expect(w.after.response?.overlapMs).toBe(640);
    expect(w.after.epoch).toBe(0);
    // Beyond the short remark but not beyond overlap_barge_in_ms (1200): still listening.
    const more = given(opened(), serverVad(), command(create()), command(appendFrames(speech(20)))).when(
      command(appendFrames(speech(5))),
    );
    expect(ofType(more.events, "OverlapDecided")[0]?.data).toMatchObject({
      action: "listen",
      reason: "long_overlap_speech",
      overlapMs: 800,
    });
    expect(more.after.epoch).toBe(0);
    const beyond = given(opened(), serverVad(), command(create()), command(appendFrames(speech(20)))).when(
      command(appendFrames(speech(18))),
    );
    expect(ofType(beyond.events, "OverlapDecided")[0]?.data).toMatchObject({ action: "barge_in", overlapMs: 1216 });
    expect(beyond.after.epoch).toBe(1);
  });

  it("drops overlapping audio that is not speech", () => {
    const w = given(opened(), serverVad(), command(create())).when(command(appendFrames(silence(10))));
    expect(types(w.events)).toEqual(["AudioBuffered", "OverlapDecided"]);
    w.thenStartsWith([{ type: "AudioBuffered" }, { type: "OverlapDecided", data: { action: "drop", overlapMs: 0 } }]);
    expect(w.after.response?.id).toBe(R1);
  });

  it("does not barge in under listen_only", () => {
    const w = given(
      opened(),
      command(update({ turnDetection: { type: "server_vad" }, overlapPolicy: "listen_only" })),
      command(create()),
    ).when(command(appendFrames(speech(40))));
    expect(types(w.events)).toEqual(["AudioBuffered", "SpeechStarted", "OverlapDecided"]);
    expect(ofType(w.events, "OverlapDecided")[0]?.data).toMatchObject({
      action: "listen",
      reason: "long_overlap_speech",
    });
    expect(w.after.response?.id).toBe(R1);
    expect(w.after.epoch).toBe(0);
  });

  it("does not barge in on a model without barge-in support", () => {
    const w = given(opened(TURN_BASED), serverVad({}), command(create())).when(command(appendFrames(speech(40))));
    expect(types(w.events)).toEqual(["AudioBuffered", "SpeechStarted", "OverlapDecided"]);
    expect(ofType(w.events, "OverlapDecided")[0]?.data).toMatchObject({ action: "listen" });
    expect(w.after.response?.id).toBe(R1);
  });

  // Speech that restarts within the same append as a server-VAD auto-commit: the commit keeps the endpointer (the
  // speech goes on) and moves the prefix-padding floor to the stop. BEHAVIOUR.md: speech_started / speech_stopped
  // "exactly once per utterance" (scenario 18); chunking must not matter.
  const restartInOneAppend = (): Input[] => [
    opened(),
    serverVad({ createResponse: false }),
    command(appendFrames([...speech(10), ...silence(16), ...speech(10)])),
  ];
  it("reports the restart within the same append as the auto-commit as a second utterance", () => {
    const w = given(opened(), serverVad({ createResponse: false })).when(
      command(appendFrames([...speech(10), ...silence(16), ...speech(10)])),
    );
    expect(types(w.events)).toEqual([
      "AudioBuffered",
      "SpeechStarted",
      "SpeechStopped",
      "InputCommitted",
      "SpeechStarted",
    ]);
    expect(ofType(w.events, "SpeechStarted").map((e) => e.data.itemId)).toEqual([U1, U2]);
  });
  it("stops and commits speech that restarted within the same append as an auto-commit", () => {
    const w = given(...restartInOneAppend()).when(command(appendFrames(silence(16))));
    expect(types(w.events)).toEqual(["AudioBuffered", "SpeechStopped", "InputCommitted"]);
    expect(ofType(w.events, "InputCommitted")[0]?.data.itemId).toBe(U2);
  });
  // Same bug, second face: the restarted speech's audio_start_ms is 832 - 300 = 532, before the auto-commit that
  // reset the endpointer at the stop (832 ms). BEHAVIOUR.md: audio_start_ms is "not before the last reset".
  it("puts the restarted speech's audio_start_ms no earlier than the auto-commit's reset", () => {
    const w = given(opened(), serverVad({ createResponse: false })).when(
      command(appendFrames([...speech(10), ...silence(16), ...speech(10)])),
    );
    expect(ofType(w.events, "SpeechStarted")[1]?.data.audioStartMs).toBeGreaterThanOrEqual(832);
  });
});

describe("input_audio_buffer.clear", () => {
  it("clears the buffer without changing the epoch", () => {
    const g = given(opened(), command(create()), command(append(320, 0)));
    const w = g.when(command(clear()));
    w.then([{ type: "InputCleared", data: { clockMs: 320 } }]);
    expect(w.events).toHaveLength(1);
    expect(w.after.epoch).toBe(g.state.epoch);
    expect(w.after.input).toMatchObject({ bufferedMs: 0, bufferedBytes: 0, clockMs: 320 });
    expect(w.after.response?.id).toBe(R1);
  });

  it("leaves nothing to commit", () => {
    given(opened(), command(append(320, 0)), command(clear()))
      .when(command(commit("evt_after_clear")))
      .thenRejects("input_audio_buffer_empty", "evt_after_clear");
  });
});

describe("response.create", () => {
  it("starts a response that echoes the metadata", () => {
    const w = given(opened()).when(command(create({ topic: "weather" })));
    expect(types(w.events)).toEqual(["ResponseStarted"]);
    w.then([
      {
        type: "ResponseStarted",
        data: { responseId: R1, itemId: I1, turnId: 1, metadata: { topic: "weather" }, source: "client" },
      },
    ]);
    expect(w.after.response).toMatchObject({ id: R1, itemId: I1, metadata: { topic: "weather" } });
    // The message item enters history with the response's first output (a response may only call tools).
    expect(w.after.history).toEqual([]);
    const spoke = given(opened(), command(create({ topic: "weather" }))).when(stage({ kind: "speak", epoch: 0 }));
    expect(spoke.after.history).toEqual([
      { id: I1, type: "message", role: "assistant", text: "", audioMs: 0, status: "in_progress", audio: true },
    ]);
  });

  it("refuses a response.create with nothing to respond to with response_create_without_input, changing nothing", () => {
    // No audio, no text, no item, no instructions of the session or the response: the echo would speak silence.
    given(opened())
      .when(command(createWithNothing("evt_nothing")))
      .thenRejects("response_create_without_input", "evt_nothing");
    given(opened(), command(append(320, 0)), command(clear()))
      .when(command(createWithNothing("evt_heard")))
      .thenTypes(["ResponseStarted"]);
    // Whitespace says nothing: blank instructions of the session or the response, or blank text, are no input.
    const blankText: Command = { type: "input.text.append", eventId: null, text: "  " };
    given(opened(), command(update({ instructions: " \n " })), command(blankText))
      .when(command({ ...createWithNothing("evt_blank"), instructions: "\t" } as Command))
      .thenRejects("response_create_without_input", "evt_blank");
  });

  it("answers a response.create once there is something to respond to: text, an item, input, or instructions", () => {
    const text: Command = { type: "input.text.append", eventId: null, text: "Hello?" };
    const item: Command = {
      type: "conversation.item.create",
      eventId: null,
      previousItemId: null,
      item: { type: "message", role: "user", content: [{ type: "input_text", text: "Hi" }] },
    } as unknown as Command;
    for (const before of [[command(text)], [command(item)], [command(update({ instructions: "Greet the user." }))]]) {
      given(opened(), ...before)
        .when(command(createWithNothing()))
        .thenTypes(["ResponseStarted"]);
    }
    const withInput = {
      ...createWithNothing(),
      input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "Hi" }] }],
    } as unknown as Command;
    given(opened()).when(command(withInput)).thenTypes(["ResponseStarted"]);
    given(opened()).when(command(create())).thenTypes(["ResponseStarted"]);
  });

  it("under the rule of an earlier release (responseWithoutInputAnswered), starts a response with nothing heard", () => {
    const old = opened();
    const rules = {
      ...old,
      data: {
        ...(old as Extract<Input, { type: "SessionOpened" }>).data,
        rules: { responseWithoutInputAnswered: true },
      },
    } as Input;
    given(rules).when(command(createWithNothing())).thenTypes(["ResponseStarted"]);
  });

  it("rejects a second response while one is active with response_already_active", () => {
    given(opened(), command(create()))
      .when(command(create(null, "evt_twice")))
      .thenRejects("response_already_active", "evt_twice");
  });
});

describe("model stage output", () => {
  it("starts and speaks a response on speak", () => {
    const w = given(opened()).when(stage({ kind: "speak", epoch: 0 }));
    expect(types(w.events)).toEqual(["ResponseStarted", "MessageStarted", "ResponseSpoke"]);
    w.then([
      { type: "ResponseStarted", data: { responseId: R1, itemId: I1, source: "model", metadata: null } },
      { type: "MessageStarted", data: { responseId: R1, itemId: I1, previousItemId: null, outputIndex: 0 } },
      { type: "ResponseSpoke", data: { responseId: R1, itemId: I1 } },
    ]);
  });

  it.each([
    ["speak", { kind: "speak", epoch: 0 }],
    ["audio", audio(200, "hi")],
    ["text", { kind: "text", epoch: 0, text: "hi" }],
    ["tool_call", { kind: "tool_call", epoch: 0, callId: "call_1", name: "get_weather", arguments: "{}" }],
  ] as const)(
    "in the turn lane, %s with no active response starts nothing (only response.create or a VAD commit does)",
    (_kind, output) => {
      const turnLane = { ...ECHO_CAPABILITIES, supportsToolCalls: true };
      const g = given(opened(turnLane), command(update({ autoResponse: false })));
      g.when(stage(output as StageOutput)).thenNothing();
      // The same output answers a response the client asked for.
      expect(
        types(
          given(opened(turnLane), command(update({ autoResponse: false })), command(create())).when(
            stage(output as StageOutput),
          ).events,
        ),
      ).not.toEqual([]);
    },
  );

  it("counts delivered audio in the session's output format: 800 bytes of G.711 at 8 kHz are 100 ms", () => {
    const g = given(opened(), command(update({ outputAudio: { format: "g711_ulaw", rate: 8000 } })));
    const delivered = { audio: new Uint8Array(800).fill(0xff), format: "g711_ulaw" as const, rate: 8000 };
    const w = g.when({ type: "StageOutputReceived", at: 5000, data: { output: audio(100, "hi"), delivered } });
    expect(ofType(w.events, "AudioDelivered")[0]?.data).toMatchObject({
      audio: delivered.audio,
      sampleRateHz: 8000,
      format: "g711_ulaw",
      durationMs: 100,
      playback: { generatedMs: 100, sentMs: 100 },
    });
  });

  it("speaks a created response once", () => {
    const w = given(opened(), command(create())).when(stage({ kind: "speak", epoch: 0 }));
    expect(types(w.events)).toEqual(["MessageStarted", "ResponseSpoke"]);
    given(opened(), command(create()), stage({ kind: "speak", epoch: 0 }))
      .when(stage({ kind: "speak", epoch: 0 }))
      .thenNothing();
  });

  it("delivers audio with cumulative marks and ledger", () => {
    const g = given(opened(), stage({ kind: "speak", epoch: 0 }));
    const first = g.when(stage(audio(500, "hel")));
    expect(types(first.events)).toEqual(["AudioDelivered"]);
    first.then([
      {
        type: "AudioDelivered",
        data: {
          responseId: R1,
          itemId: I1,
          transcript: "hel",
          durationMs: 500,
          sampleRateHz: 24000,
          mark: { textChars: 3, audioEndMs: 500 },
          playback: { generatedMs: 500, sentMs: 500, playedMs: 0, committedMs: 0 },
        },
      },
    ]);
    const second = given(opened(), stage({ kind: "speak", epoch: 0 }), stage(audio(500, "hel"))).when(
      stage(audio(250, "lo")),
    );
    second.then([
      {
        type: "AudioDelivered",
        data: {
          transcript: "lo",
          durationMs: 250,
          mark: { textChars: 5, audioEndMs: 750 },
          playback: { generatedMs: 750, sentMs: 750, playedMs: 0, committedMs: 0 },
        },
      },
    ]);
    expect(second.after.audio[I1]?.marks).toEqual([
      { textChars: 3, audioEndMs: 500 },
      { textChars: 5, audioEndMs: 750 },
    ]);
    expect(second.after.audio[I1]?.transcript).toBe("hello");
  });

  it("starts and speaks a response on audio that comes first", () => {
    const w = given(opened()).when(stage(audio(100, "hi")));
    expect(types(w.events)).toEqual(["ResponseStarted", "MessageStarted", "ResponseSpoke", "AudioDelivered"]);
  });

  it("ends the response completed at end_of_turn, with transcript, metadata and ledger", () => {
    const g = given(opened(), command(create({ n: 1 })), stage(audio(500, "hel")), stage(audio(500, "lo")));
    const w = g.when(stage({ kind: "end_of_turn", epoch: 0 }));
    expect(types(w.events)).toEqual(["ResponseEnded", "HistoryCommitted"]);
    w.thenStartsWith([
      {
        type: "ResponseEnded",
        data: {
          responseId: R1,
          itemId: I1,
          status: "completed",
          reason: null,
          transcript: "hello",
          spoke: true,
          audioSent: true,
          metadata: { n: 1 },
          playback: { generatedMs: 1000, sentMs: 1000 },
          error: null,
        },
      },
    ]);
    expect(w.after.response).toBeNull();
    expect(w.after.epoch).toBe(0);
  });

  it("decides nothing at end_of_turn with no active response", () => {
    given(opened())
      .when(stage({ kind: "end_of_turn", epoch: 0 }))
      .thenNothing();
  });

  it("fails the response on a model failure with runtime_data_plane_stream_failed", () => {
    const w = given(opened(), command(create())).when(stage({ kind: "failure", epoch: 0, message: "boom" }));
    // A response that made nothing still has its (empty) message item.
    expect(types(w.events).filter((t) => t !== "HistoryCommitted")).toEqual(["MessageStarted", "ResponseEnded"]);
    w.thenStartsWith([
      { type: "MessageStarted", data: { responseId: R1 } },
      {
        type: "ResponseEnded",
        data: {
          responseId: R1,
          status: "failed",
          reason: "model_failure",
          error: { code: "runtime_data_plane_stream_failed", message: "boom" },
        },
      },
    ]);
    expect(w.after.response).toBeNull();
  });

  it("records listen with nothing active, and ignores listen once the response spoke", () => {
    given(opened())
      .when(stage({ kind: "listen", epoch: 0, reason: "unit" }))
      .then([{ type: "ModelListened", data: { reason: "unit" } }]);
    given(opened(), command(create()))
      .when(stage({ kind: "listen", epoch: 0, reason: "unit" }))
      .thenStartsWith([
        { type: "ModelListened", data: { reason: "unit" } },
        { type: "MessageStarted", data: { responseId: R1 } },
        { type: "ResponseEnded", data: { responseId: R1, status: "completed", spoke: false } },
      ]);
    given(opened(), stage(audio(100, "hi")))
      .when(stage({ kind: "listen", epoch: 0, reason: "unit" }))
      .thenNothing();
  });

  describe("after a cancel, output stamped with the old epoch decides nothing (scenario 8)", () => {
    const cancelled = (): Input[] => [opened(), command(create()), stage(audio(500, "hel")), command(cancel())];
    const outputs: [string, () => Input][] = [
      ["audio", () => stage(audio(500, "lo", 0))],
      ["speak", () => stage({ kind: "speak", epoch: 0 })],
      ["listen", () => stage({ kind: "listen", epoch: 0, reason: "x" })],
      ["end_of_turn", () => stage({ kind: "end_of_turn", epoch: 0 })],
      ["failure", () => stage({ kind: "failure", epoch: 0, message: "late" })],
    ];
    it.each(outputs)("drops old-epoch %s", (_name, output) => {
      const g = given(...cancelled());
      expect(g.state.epoch).toBe(1);
      const w = g.when(output());
      w.thenNothing();
      expect(w.after).toEqual(g.state);
    });

    it("drops old-epoch output after a server-VAD barge-in as well, and accepts the new epoch", () => {
      const inputs = [
        opened(),
        serverVad(),
        command(create()),
        stage(audio(500, "hel")),
        command(appendFrames(speech(40))),
      ];
      const g = given(...inputs);
      expect(g.state.epoch).toBe(1);
      g.when(stage(audio(500, "lo", 0))).thenNothing();
      g.when(stage({ kind: "end_of_turn", epoch: 0 })).thenNothing();
      // The turn lane: output of the new epoch before the barging utterance's commit starts no response.
      g.when(stage(audio(100, "ok", 1))).thenNothing();
      const stop = command(appendFrames(silence(20)));
      expect(ofType(g.when(stop).events, "ResponseStarted")[0]?.data).toMatchObject({
        responseId: R2,
        itemId: I2,
        turnId: 2,
        source: "turn_detection",
      });
      const fresh = given(...inputs, stop).when(stage(audio(100, "ok", 1)));
      expect(types(fresh.events)).toEqual(["MessageStarted", "ResponseSpoke", "AudioDelivered"]);
      expect(fresh.after.epoch).toBe(1);
    });
  });
});

describe("response.cancel", () => {
  it("advances the epoch, then ends the response cancelled with client_cancelled", () => {
    const w = given(opened(), command(create({ k: "v" })), stage(audio(500, "hel"))).when(command(cancel()));
    expect(types(w.events)).toEqual(["EpochAdvanced", "ResponseEnded", "HistoryCommitted"]);
    w.thenStartsWith([
      { type: "EpochAdvanced", data: { epoch: 1, reason: "client_cancelled" } },
      {
        type: "ResponseEnded",
        data: {
          responseId: R1,
          itemId: I1,
          status: "cancelled",
          reason: "client_cancelled",
          metadata: { k: "v" },
          audioSent: true,
        },
      },
    ]);
    expect(w.after.epoch).toBe(1);
    expect(w.after.response).toBeNull();
  });

  it("cancels the response it names when that is the active one", () => {
    const w = given(opened(), command(create())).when(command(cancel(R1)));
    w.thenStartsWith([
      { type: "EpochAdvanced", data: { epoch: 1 } },
      { type: "MessageStarted", data: { responseId: R1 } },
      { type: "ResponseEnded", data: { responseId: R1 } },
    ]);
  });

  it("rejects a cancel with nothing active with response_not_active (scenario 7)", () => {
    given(opened())
      .when(command(cancel(null, "evt_none")))
      .thenRejects("response_not_active", "evt_none");
  });

  it("never touches a newer response when it names an older one", () => {
    const g = given(opened(), command(create()), command(cancel()), command(create()));
    expect(g.state.response?.id).toBe(R2);
    const w = g.when(command(cancel(R1, "evt_old")));
    w.thenRejects("response_not_active", "evt_old");
    expect(w.after.response?.id).toBe(R2);
    expect(w.after.epoch).toBe(1);
  });

  it("never repeats a response id, even after a cancel; the assistant item is item_<response_id>", () => {
    const g = given(opened(), command(create()), command(cancel()));
    const w = g.when(command(create()));
    w.then([{ type: "ResponseStarted", data: { responseId: R2, itemId: I2, turnId: 2 } }]);
    const third = given(
      opened(),
      command(create()),
      command(cancel()),
      command(create()),
      stage({ kind: "end_of_turn", epoch: 1 }),
    ).when(command(create()));
    third.then([{ type: "ResponseStarted", data: { responseId: R3, itemId: `item_${R3}`, turnId: 3 } }]);
    const ids = [
      ...ofType(w.events, "ResponseStarted"),
      ...ofType(third.events, "ResponseStarted"),
      ...ofType(given(opened()).when(command(create())).events, "ResponseStarted"),
    ].map((e) => e.data.responseId);
    expect(ids).toEqual([R2, R3, R1]);
  });
});

describe("playback truth", () => {
  it("keeps 'he' of 'hello' after acking 400 of 1000 ms and cancelling (scenario 7)", () => {
    const g = given(
      opened(),
      command(create()),
      stage(audio(1000, "hello")),
      command(ack({ responseId: R1, playedMs: 400 })),
    );
    const w = g.when(command(cancel()));
    w.then([
      { type: "EpochAdvanced" },
      { type: "ResponseEnded", data: { status: "cancelled" } },
      {
        type: "HistoryCommitted",
        data: { item: { id: I1, role: "assistant", text: "he", audioMs: 400, status: "incomplete" }, committedMs: 400 },
      },
    ]);
    expect(w.events).toHaveLength(3);
    expect(historyOf(w.after, I1)?.text).toBe("he");
  });

  it("survives a barge-in before the first audio delta and a truncate at 0 ms, and the next commit responds (scenario 9)", () => {
    const g = given(opened(), serverVad(), command(create()), command(appendFrames(speech(40))));
    expect(g.state.epoch).toBe(1);
    expect(g.state.response).toBeNull();
    const t = g.when(command(truncate(I1, 0, "evt_trunc")));
    expect(ofType(t.events, "RequestRejected")).toEqual([]);
    expect(types(t.events)).toEqual(["ItemTruncated"]);
    t.then([{ type: "ItemTruncated", data: { itemId: I1, audioEndMs: 0 } }]);
    expect(historyOf(t.after, I1)?.text ?? "").toBe("");

    const next = given(
      opened(),
      serverVad(),
      command(create()),
      command(appendFrames(speech(40))),
      command(truncate(I1, 0)),
    ).when(command(appendFrames([...speech(7), ...silence(16)])));
    expect(types(next.events)).toEqual(["AudioBuffered", "SpeechStopped", "InputCommitted", "ResponseStarted"]);
    next.then([
      { type: "AudioBuffered" },
      { type: "SpeechStopped", data: { itemId: U1 } },
      { type: "InputCommitted", data: { itemId: U1 } },
      { type: "ResponseStarted", data: { responseId: R2, itemId: I2, previousItemId: U1 } },
    ]);
    expect(historyOf(next.after, I1)?.text ?? "").toBe("");
  });

  it("survives a client cancel before the first audio delta the same way (scenario 9)", () => {
    const g = given(opened(), command(update({ autoResponse: false })), command(create()), command(cancel()));
    g.when(command(truncate(I1, 0))).then([{ type: "ItemTruncated", data: { audioEndMs: 0 } }]);
    const w = given(
      opened(),
      command(update({ autoResponse: false })),
      command(create()),
      command(cancel()),
      command(truncate(I1, 0)),
      command(append(320, 0)),
    ).when(command(commit(null, true)));
    expect(types(w.events)).toEqual(["InputCommitted", "ResponseStarted"]);
    expect(historyOf(w.after, I1)?.text).toBe("");
  });

  it("clamps an ack at 2535 ms for an item of 2450 ms, with no error and a complete history (scenario 10)", () => {
    const g = given(
      opened(),
      command(create()),
      stage(audio(2450, "hello world")),
      stage({ kind: "end_of_turn", epoch: 0 }),
    );
    const w = g.when(command(ack({ responseId: R1, playedMs: 2535 })));
    expect(types(w.events)).toEqual(["PlaybackAcknowledged", "HistoryCommitted"]);
    w.then([
      {
        type: "PlaybackAcknowledged",
        data: { responseId: R1, itemId: I1, playedMs: 2450, committedMs: 2450, historyCommitted: true },
      },
      {
        type: "HistoryCommitted",
        data: { item: { id: I1, text: "hello world", audioMs: 2450, status: "completed" } },
      },
    ]);
    expect(historyOf(w.after, I1)).toEqual({
      id: I1,
      type: "message",
      role: "assistant",
      text: "hello world",
      audioMs: 2450,
      status: "completed",
      audio: true,
    });
  });

  it("completes the history when the ack past the end comes before end_of_turn (scenario 10)", () => {
    const w = given(
      opened(),
      command(create()),
      stage(audio(2450, "hello world")),
      command(ack({ itemId: I1, playedMs: 2535 })),
    ).when(stage({ kind: "end_of_turn", epoch: 0 }));
    w.then([
      { type: "ResponseEnded", data: { status: "completed" } },
      { type: "HistoryCommitted", data: { item: { text: "hello world", status: "completed", audioMs: 2450 } } },
    ]);
  });

  it("clamps conversation.item.truncate past the end and changes nothing of the history", () => {
    const g = given(
      opened(),
      command(create()),
      stage(audio(1000, "hello")),
      stage({ kind: "end_of_turn", epoch: 0 }),
      command(ack({ responseId: R1, playedMs: 1000 })),
    );
    const w = g.when(command(truncate(I1, 5000)));
    expect(types(w.events)).toEqual(["ItemTruncated"]);
    w.then([{ type: "ItemTruncated", data: { audioEndMs: 1000 } }]);
    expect(w.after.history).toEqual(g.state.history);
  });

  // BEHAVIOUR.md: "A truncation at or beyond the item's end changes nothing", even while the response streams on.
  it("changes nothing with a truncation beyond the end made while the response still streams", () => {
    const w = given(
      opened(),
      command(create()),
      stage(audio(1000, "hello")),
      command(truncate(I1, 5000)),
      stage(audio(1000, " world")),
      command(ack({ responseId: R1, playedMs: 2000 })),
    ).when(stage({ kind: "end_of_turn", epoch: 0 }));
    expect(historyOf(w.after, I1)).toMatchObject({ text: "hello world", audioMs: 2000, status: "completed" });
  });

  it("rejects truncating an unknown item with item_not_found", () => {
    given(opened())
      .when(command(truncate("item_nope", 10, "evt_t")))
      .thenRejects("item_not_found", "evt_t");
  });

  describe("playback.ack", () => {
    const streaming = (): Input[] => [opened(), command(create()), stage(audio(1000, "hello"))];

    it("keeps played and committed as monotonic maxima", () => {
      const w = given(...streaming(), command(ack({ responseId: R1, playedMs: 600 }))).when(
        command(ack({ responseId: R1, playedMs: 400 })),
      );
      w.then([{ type: "PlaybackAcknowledged", data: { playedMs: 600, committedMs: 600 } }]);
      expect(w.after.audio[I1]?.ledger).toEqual({ generatedMs: 1000, sentMs: 1000, playedMs: 600, committedMs: 600 });
    });

    it("defaults committed_ms to played_ms and switches the session to acknowledged playback", () => {
      const g = given(...streaming());
      expect(g.state.playbackMode).toBe("estimated");
      const w = g.when(command(ack({ responseId: R1, playedMs: 300 })));
      w.then([{ type: "PlaybackAcknowledged", data: { playedMs: 300, committedMs: 300, historyCommitted: false } }]);
      expect(w.events).toHaveLength(1);
      expect(w.after.playbackMode).toBe("acknowledged");
    });

    it("lets truncate lower committed_ms and caps the item for good", () => {
      const g = given(
        ...streaming(),
        command(ack({ responseId: R1, playedMs: 600 })),
        command(ack({ responseId: R1, playedMs: 700, committedMs: 300, truncate: true })),
      );
      expect(g.state.audio[I1]?.ledger).toMatchObject({ playedMs: 700, committedMs: 300 });
      expect(g.state.audio[I1]?.truncatedAtMs).toBe(300);
      const w = g.when(command(ack({ responseId: R1, playedMs: 900 })));
      w.then([{ type: "PlaybackAcknowledged", data: { playedMs: 900, committedMs: 300 } }]);
      const ended = given(
        ...streaming(),
        command(ack({ responseId: R1, playedMs: 600 })),
        command(ack({ responseId: R1, playedMs: 700, committedMs: 300, truncate: true })),
        command(ack({ responseId: R1, playedMs: 1000 })),
      ).when(stage({ kind: "end_of_turn", epoch: 0 }));
      ended.then([
        { type: "ResponseEnded" },
        { type: "HistoryCommitted", data: { item: { text: "h", audioMs: 300, status: "incomplete" } } },
      ]);
    });

    it("keeps the smallest truncation when a later truncation is larger", () => {
      const w = given(...streaming(), command(truncate(I1, 200))).when(
        command(ack({ responseId: R1, playedMs: 800, committedMs: 800, truncate: true })),
      );
      w.then([{ type: "PlaybackAcknowledged", data: { committedMs: 200 } }]);
      expect(w.after.audio[I1]?.truncatedAtMs).toBe(200);
    });

    it("rejects an item and a response that name different responses with playback_item_mismatch", () => {
      given(opened(), command(create()), stage(audio(500, "a")), command(cancel()), stage(audio(500, "b", 1)))
        .when(command(ack({ responseId: R1, itemId: I2, playedMs: 100 }, "evt_mis")))
        .thenRejects("playback_item_mismatch", "evt_mis");
    });

    it("rejects an unknown response or item with playback_item_not_found", () => {
      given(...streaming())
        .when(command(ack({ responseId: "resp_nope", playedMs: 100 }, "evt_nf1")))
        .thenRejects("playback_item_not_found", "evt_nf1");
      given(...streaming())
        .when(command(ack({ itemId: "item_nope", playedMs: 100 }, "evt_nf2")))
        .thenRejects("playback_item_not_found", "evt_nf2");
      given(...streaming())
        .when(command(ack({ responseId: R1, itemId: "item_nope", playedMs: 100 }, "evt_nf3")))
        .thenRejects("playback_item_not_found", "evt_nf3");
      given(opened())
        .when(command(ack({ playedMs: 100 }, "evt_nf4")))
        .thenRejects("playback_item_not_found", "evt_nf4");
    });

    it("refuses an ack after a later user commit without an earlier ack with playback_ack_too_late", () => {
      given(...streaming(), stage({ kind: "end_of_turn", epoch: 0 }), command(append(320, 0)), command(commit()))
        .when(command(ack({ responseId: R1, playedMs: 1000 }, "evt_late")))
        .thenRejects("playback_ack_too_late", "evt_late");
    });

    it("updates the item in place when an earlier ack reserved its slot, without reordering history", () => {
      const g = given(
        ...streaming(),
        command(ack({ responseId: R1, playedMs: 200 })),
        stage({ kind: "end_of_turn", epoch: 0 }),
        command(append(320, 0)),
        command(commit()),
      );
      expect(g.state.history.map((h) => h.id)).toEqual([I1, U1]);
      const w = g.when(command(ack({ responseId: R1, playedMs: 1000 })));
      expect(types(w.events)).toEqual(["PlaybackAcknowledged", "HistoryCommitted"]);
      w.then([
        { type: "PlaybackAcknowledged", data: { playedMs: 1000, committedMs: 1000 } },
        { type: "HistoryCommitted", data: { item: { id: I1, text: "hello", status: "completed" } } },
      ]);
      expect(w.after.history.map((h) => h.id)).toEqual([I1, U1]);
      expect(historyOf(w.after, I1)?.text).toBe("hello");
    });
  });

  describe("estimated playback for a client that never acks (ours)", () => {
    const T = 50_000_000;

    it("keeps min(sent, time since the first delta) at cancel time", () => {
      const w = given(opened(), command(create(), T - 10), stage(audio(1000, "hello"), T)).when(
        command(cancel(), T + 400),
      );
      w.then([
        { type: "EpochAdvanced" },
        { type: "ResponseEnded" },
        { type: "HistoryCommitted", data: { item: { id: I1, text: "he", audioMs: 400, status: "incomplete" } } },
      ]);
      expect(w.after.playbackMode).toBe("estimated");
    });

    it("caps the estimate at what was sent (a cancelled item stays incomplete even when all of it was heard)", () => {
      const w = given(opened(), command(create(), T - 10), stage(audio(1000, "hello"), T)).when(
        command(cancel(), T + 9000),
      );
      expect(historyOf(w.after, I1)).toMatchObject({ text: "hello", audioMs: 1000, status: "incomplete" });
    });

    it("lets the history of a completed response catch up at the next commit", () => {
      const g = given(
        opened(),
        command(create(), T - 10),
        stage(audio(1000, "hello"), T),
        stage({ kind: "end_of_turn", epoch: 0 }, T + 100),
        command(append(320, 0), T + 200),
      );
      expect(historyOf(g.state, I1)?.status).toBe("incomplete");
      const w = g.when(command(commit(), T + 5000));
      expect(types(w.events)).toEqual(["HistoryCommitted", "InputCommitted"]);
      expect(historyOf(w.after, I1)).toMatchObject({ text: "hello", status: "completed" });
    });

    // A cancel stops the audio at the estimate (BEHAVIOUR.md: the estimate is used "for truncation at barge-in"):
    // later turn boundaries must not grow the cancelled item back.
    const boundaries: [string, Command][] = [
      ["the next commit", commit()],
      ["the next response.create", create()],
      ["session.close", close()],
    ];
    for (const [name, next] of boundaries) {
      it(`keeps a cancelled item at what was heard at the cancel, after ${name}`, () => {
        const g = given(
          opened(),
          command(create(), T - 10),
          stage(audio(1000, "hello"), T),
          command(cancel(), T + 400),
          command(append(320, 0), T + 500),
        );
        expect(historyOf(g.state, I1)).toMatchObject({ text: "he", audioMs: 400, status: "incomplete" });
        const w = g.when(command(next, T + 5000));
        expect(ofType(w.events, "HistoryCommitted")).toEqual([]);
        expect(historyOf(w.after, I1)).toMatchObject({ text: "he", audioMs: 400, status: "incomplete" });
      });
    }
  });
});

describe("session lifetime", () => {
  it("closes with idle_ttl_expired when the idle timer fires", () => {
    const w = given(opened()).when({ type: "TimerFired", at: 1, data: { timer: "idle_ttl" } });
    w.then([{ type: "SessionClosed", data: { reason: "idle_ttl_expired" } }]);
    expect(w.events).toHaveLength(1);
    expect(w.after.phase).toBe("closed");
  });

  it("closes with disconnect_grace_expired when the grace timer fires", () => {
    given(opened())
      .when({ type: "TimerFired", at: 1, data: { timer: "disconnect_grace" } })
      .then([{ type: "SessionClosed", data: { reason: "disconnect_grace_expired" } }]);
  });

  it("cancels the active response before an idle close", () => {
    const w = given(opened(), command(create())).when({ type: "TimerFired", at: 1, data: { timer: "idle_ttl" } });
    expect(types(w.events).filter((t) => t !== "HistoryCommitted")).toEqual([
      "EpochAdvanced",
      "MessageStarted",
      "ResponseEnded",
      "SessionClosed",
    ]);
    expect(types(w.events).at(-1)).toBe("SessionClosed");
  });

  it("rejects every later command with session_closed and ignores later timers and model output", () => {
    const g = given(opened(), { type: "TimerFired", at: 1, data: { timer: "idle_ttl" } });
    const later: Command[] = [
      append(320, 0.9, "e1"),
      commit("e2"),
      clear("e3"),
      create(null, "e4"),
      cancel(null, "e5"),
      update({ instructions: "x" }, "e6"),
      close("e7"),
      { type: "session.heartbeat", eventId: "e8" },
      ack({ playedMs: 1 }, "e9"),
    ];
    for (const c of later) g.when(command(c)).thenRejects("session_closed", c.eventId);
    g.when({ type: "TimerFired", at: 2, data: { timer: "idle_ttl" } }).thenNothing();
    g.when(stage({ kind: "speak", epoch: 0 })).thenNothing();
  });

  it("closes with session_close on session.close", () => {
    const w = given(opened()).when(command(close()));
    w.then([{ type: "SessionClosed", data: { reason: "session_close" } }]);
    expect(w.events).toHaveLength(1);
  });

  it("cancels the active response first on session.close", () => {
    const w = given(opened(), command(create()), stage(audio(500, "hel"))).when(command(close()));
    expect(types(w.events).filter((t) => t !== "HistoryCommitted")).toEqual([
      "EpochAdvanced",
      "ResponseEnded",
      "SessionClosed",
    ]);
    w.thenStartsWith([
      { type: "EpochAdvanced", data: { epoch: 1 } },
      { type: "ResponseEnded", data: { responseId: R1, status: "cancelled", reason: "session_closed" } },
    ]);
    expect(w.after.phase).toBe("closed");
    expect(w.after.response).toBeNull();
  });

  it("acknowledges a heartbeat", () => {
    given(opened())
      .when(command({ type: "session.heartbeat", eventId: null }))
      .then([{ type: "HeartbeatAcknowledged", data: {} }]);
  });
});

describe("invalid frames", () => {
  it("rejects an invalid command with its code, message and event id echoed", () => {
    const w = given(opened()).when(
      command({
        type: "invalid",
        eventId: "evt_bad",
        code: "unknown_event",
        message: "type nope is not known",
        param: "type",
        eventType: "nope",
      }),
    );
    w.thenRejects("unknown_event", "evt_bad");
    w.then([
      {
        type: "RequestRejected",
        data: { message: "type nope is not known", param: "type", commandType: "nope", clientEventId: "evt_bad" },
      },
    ]);
  });

  it("rejects an invalid command the same way on a session that was never opened", () => {
    const w = given().when(
      command({ type: "invalid", eventId: null, code: "invalid_json", message: "x", param: null, eventType: null }),
    );
    w.thenRejects("invalid_json", null);
    expect(w.after).toEqual(initialState);
  });

  it("leaves buffered audio, epoch and turn untouched when it rejects", () => {
    const g = given(opened(), command(create()), command(append(320, 0)));
    const w = g.when(
      command({
        type: "invalid",
        eventId: "e",
        code: "bad_event",
        message: "x",
        param: null,
        eventType: "playback.ack",
      }),
    );
    w.thenRejects("bad_event", "e");
    expect(w.after.input.bufferedMs).toBe(320);
    expect(w.after.epoch).toBe(0);
    expect(w.after.turnId).toBe(1);
  });
});

describe("server VAD in the native lane", () => {
  it("gives each utterance an item of its own and floors its prefix padding at the previous stop", () => {
    const g = given(opened(), command(appendFrames([...speech(10), ...silence(20)])));
    const stopped = ofType(g.when(command(appendFrames([]))).events, "SpeechStopped");
    expect(stopped).toEqual([]);
    const w = g.when(command(appendFrames(speech(5))));
    const started = ofType(w.events, "SpeechStarted")[0];
    expect(started?.data.itemId).toBe(U2);
    const firstStop = ofType(
      given(opened()).when(command(appendFrames([...speech(10), ...silence(20)]))).events,
      "SpeechStopped",
    )[0];
    expect(firstStop?.data.itemId).toBe(U1);
    expect(started?.data.audioStartMs).toBeGreaterThanOrEqual(firstStop?.data.audioEndMs ?? Number.POSITIVE_INFINITY);
    expect(w.after.history).toEqual([]);
  });
});

describe("overlap reporting", () => {
  it("reports an overlap decision when its action or reason changes, not on every append", () => {
    const g = given(opened(), serverVad(), command(create()), command(appendFrames(silence(3))));
    expect(ofType(g.when(command(appendFrames(silence(3)))).events, "OverlapDecided")[0]?.data).toMatchObject({
      action: "drop",
      reported: false,
    });
    const first = given(opened(), serverVad(), command(create())).when(command(appendFrames(silence(3))));
    expect(ofType(first.events, "OverlapDecided")[0]?.data).toMatchObject({ action: "drop", reported: true });
    const changed = g.when(command(appendFrames(speech(3))));
    expect(ofType(changed.events, "OverlapDecided")[0]?.data).toMatchObject({ action: "listen", reported: true });
  });

  it("refuses a truncation of a content part that does not exist", () => {
    given(opened(), command(create()), stage(audio(500, "hi")))
      .when(
        command({
          type: "conversation.item.truncate",
          eventId: "t",
          itemId: I1 as ItemId,
          contentIndex: 5,
          audioEndMs: 100,
        }),
      )
      .thenRejects("bad_event", "t");
  });
});
