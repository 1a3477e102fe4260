import type { DecisionBuilder } from "./builder.ts";
import { BYTES_PER_SAMPLE } from "./config.ts";
import type { ErrorCode } from "./errors.ts";
import type { DeliveredAudio, EndReason, ResponseStatus, RunnerOperation } from "./events.ts";
import { settleEstimatedItems, settleItem, settleUnspoken } from "./history.ts";
import { assistantItemIdFor, type ItemId, responseIdFor } from "./ids.ts";
import { laneOf } from "./lane.ts";
import type { StageLossCode, StageOutput } from "./stage.ts";
import type { SessionState } from "./state.ts";

/**
 * The response lifecycle (BEHAVIOUR.md, "Turn-taking"; reference/realtime-duplex-api.md, "Response lifecycle"):
 * starting a response, model output (audio, text, tool calls), the end of a turn and the atomic cancel.
 */

/** Opens a new response (`response.created` and the assistant item), after settling what history owes. */
export const startResponse = (
  b: DecisionBuilder,
  at: number,
  source: "model" | "client" | "turn_detection",
  metadata: Readonly<Record<string, unknown>> | null,
  overrides: {
    modalities?: readonly ("audio" | "text")[] | null;
    instructions?: string | null;
    conversation?: "auto" | "none";
    /** The user item whose commit asked for the response; `deferred` when it waited for another response. */
    inReplyTo?: ItemId;
    deferred?: boolean;
  } = {},
): void => {
  b.push(...settleEstimatedItems(b.state, at));
  const responseId = responseIdFor(b.state.sessionId, b.state.responseCount + 1);
  const outOfBand = overrides.conversation === "none";
  b.push({
    type: "ResponseStarted",
    data: {
      responseId,
      itemId: assistantItemIdFor(responseId),
      previousItemId: outOfBand ? null : b.state.lastItemId,
      turnId: b.state.turnId + 1,
      metadata,
      source,
      modalities: overrides.modalities ?? b.state.config.outputModalities,
      instructions: overrides.instructions ?? null,
      ...(outOfBand ? { conversation: "none" as const } : {}),
      ...(overrides.inReplyTo === undefined ? {} : { inReplyTo: overrides.inReplyTo }),
      ...(overrides.deferred ? { deferred: true } : {}),
      // Sessions recorded before 6e96108 open the message item with the response (EarlierRules).
      ...(b.state.rules?.messageOpensWithResponse === true ? {} : { messageLater: true }),
    },
  });
};

/**
 * Opens the active response's assistant message item (`MessageStarted`) if it is not open yet: at its first audio
 * or text, or when it ends having made nothing at all (BEHAVIOUR.md scenario 9: the item of a response cancelled
 * before its first audio exists, empty). A response that only calls tools never opens one, as OpenAI's does not.
 */
const openMessage = (b: DecisionBuilder): void => {
  const response = b.state.response;
  if (response === null || response.messageOutputIndex !== null) return;
  b.push({
    type: "MessageStarted",
    data: {
      responseId: response.id,
      itemId: response.itemId,
      previousItemId: response.outOfBand ? null : b.state.lastItemId,
      outputIndex: response.functionCalls.length,
      ...(response.outOfBand ? { outOfBand: true } : {}),
    },
  });
};

/**
 * Starts the oldest deferred response once no response is active (BEHAVIOUR.md, "Turn-taking": deferred responses
 * start when the active one ends or is cancelled, one at a time, in commit order). Does nothing otherwise.
 */
export const startDeferredResponse = (b: DecisionBuilder, at: number): void => {
  const next = b.state.deferredTurns[0];
  if (b.state.phase !== "open" || b.state.response !== null || next === undefined) return;
  startResponse(b, at, next.source, null, { inReplyTo: next.itemId, deferred: true });
};

/**
 * Drops the deferred responses at a barge-in (BEHAVIOUR.md, "Turn-taking": a barge-in answers the barging
 * utterance): their user items stay in history, and the response to the barging utterance answers them too.
 */
export const dropDeferredResponses = (b: DecisionBuilder, reason: "barge_in" | "turn_detected"): void => {
  const itemIds = b.state.deferredTurns.map((t) => t.itemId);
  if (itemIds.length > 0) b.push({ type: "DeferredResponsesDropped", data: { itemIds, reason } });
};

/**
 * Tells the client of speech it has not heard about yet (`speech_started` held back during a response): at a
 * barge-in, before the cancel, when the response ends while the user still speaks, or when the speech stops (a
 * server-VAD commit is always preceded by its own speech_started). Never without turn detection: speech events come
 * from server-VAD turn detection only (BEHAVIOUR.md, "Turn-taking").
 */
export const announceSpeech = (b: DecisionBuilder): void => {
  const input = b.state.input;
  if (b.state.config.turnDetection === null && b.state.rules?.speechEventsWithoutTurnDetection !== true) return;
  if (input.speechItemId === null || input.speechAnnounced || input.speechStartMs === null) return;
  b.push({ type: "SpeechAnnounced", data: { itemId: input.speechItemId, audioStartMs: input.speechStartMs } });
};

/** The `ResponseEnded` of the active response with `status`, or null when none is active. */
const ending = (
  b: DecisionBuilder,
  status: ResponseStatus,
  reason: EndReason | null,
  error: { code: ErrorCode; message: string } | null,
) => {
  const response = b.state.response;
  const audio = response === null ? undefined : b.state.audio[response.itemId];
  if (response === null || audio === undefined) return null;
  return {
    type: "ResponseEnded" as const,
    data: {
      responseId: response.id,
      itemId: response.itemId,
      previousItemId: response.previousItemId,
      status,
      reason,
      transcript: audio.transcript,
      spoke: response.spoke,
      audioSent: audio.ledger.sentMs > 0,
      metadata: response.metadata,
      playback: audio.ledger,
      error,
      text: response.text,
      functionCalls: response.functionCalls,
      messageOutputIndex: response.messageOutputIndex,
      ...(response.outOfBand ? { outOfBand: true } : {}),
      modalities: response.modalities,
    },
  };
};

/**
 * Ends the active response with `status`: the epoch first advances when `advanceEpoch` (the engine aborts the
 * runner's old epoch), then `ResponseEnded`, the history of what was heard by `at`, and any held-back speech.
 * Does nothing when no response is active.
 */
const finishResponse = (
  b: DecisionBuilder,
  at: number,
  status: ResponseStatus,
  reason: EndReason | null,
  error: { code: ErrorCode; message: string } | null,
  advanceEpoch: EndReason | null,
): void => {
  if (b.state.response === null) return;
  if (advanceEpoch !== null)
    b.push({ type: "EpochAdvanced", data: { epoch: b.state.epoch + 1, reason: advanceEpoch } });
  if (b.state.response?.functionCalls.length === 0) openMessage(b);
  const response = b.state.response;
  if (response === null) return;
  const event = ending(b, status, reason, error);
  if (event === null) return;
  b.push(event);
  const ended = b.state.audio[event.data.itemId];
  // An incomplete response is done: its history holds what was heard, as a completed one's, marked incomplete.
  if (ended !== undefined) b.push(...settleItem(b.state, ended, at, ended.completed));
  b.push(...settleUnspoken(response, status));
  announceSpeech(b);
};

/**
 * Ends the active response without cutting it: `completed` at end of turn, `incomplete` at a limit of the model's,
 * `failed` on a model failure. Settles its history.
 */
export const endResponse = (
  b: DecisionBuilder,
  at: number,
  status: "completed" | "failed" | "incomplete",
  reason: EndReason | null,
  error: { code: ErrorCode; message: string } | null,
): void => finishResponse(b, at, status, reason, error, null);

/**
 * Cancels the active response atomically: the epoch advances (the engine aborts the runner's old epoch), the
 * response ends `cancelled` with `reason`, and history keeps what was heard by `at` (BEHAVIOUR.md, "Barge-in and
 * cancel are atomic"). Does nothing when no response is active.
 */
export const cancelResponse = (b: DecisionBuilder, at: number, reason: EndReason): void =>
  finishResponse(b, at, "cancelled", reason, null, reason);

/**
 * Opens a response for model output that came while none is active: only in the model-native lane, where the model
 * decides when to speak. In the turn lane nothing but `response.create` or a server-VAD commit with
 * `create_response` starts one (BEHAVIOUR.md, "Turn-taking"), so such output is dropped: it stays in the log as
 * the input it was. Returns whether a response is active after it.
 */
const ensureResponse = (b: DecisionBuilder, at: number): boolean => {
  const lane = laneOf(b.state);
  // Sessions recorded before c073d28 started one in the turn lane too (EarlierRules).
  const starts = lane === "native" || b.state.rules?.speechEventsWithoutTurnDetection === true;
  if (b.state.response === null && starts) startResponse(b, at, "model", null);
  return b.state.response !== null;
};

const ensureSpeaking = (b: DecisionBuilder, at: number): void => {
  if (!ensureResponse(b, at)) return;
  openMessage(b);
  const response = b.state.response;
  if (response !== null && !response.spoke) {
    b.push({ type: "ResponseSpoke", data: { responseId: response.id, itemId: response.itemId } });
  }
};

/** The user item a model transcript belongs to: the last user message in history. */
const lastUserItem = (b: DecisionBuilder): ItemId | null =>
  b.state.history.findLast((h) => h.role === "user" && h.type === "message")?.id ?? null;

/**
 * Applies one output of the model stage. Output stamped with an older epoch is dropped, terminal events included
 * (BEHAVIOUR.md, "Identity"): it leaves its input in the log and decides nothing.
 */
export const applyStageOutput = (
  b: DecisionBuilder,
  at: number,
  output: StageOutput,
  delivered: DeliveredAudio | null = null,
): void => {
  if (b.state.phase !== "open") return;
  // A lost stage ends the session whatever epoch it names: nothing of any epoch can follow.
  if (output.kind === "stage_lost") {
    endSession(b, at, "stage", output.code, output.message);
    return;
  }
  // Units are stamped with epochs the session already reached: an output from a later one is no output of this
  // session's model, and breaks the runner's contract.
  if (output.epoch > b.state.epoch) {
    const message = `the model runner failed in emit: ${output.kind} names epoch ${output.epoch}, beyond the session's ${b.state.epoch}`;
    endSession(b, at, "emit", "runtime_data_plane_stream_failed", message);
    return;
  }
  // A transcript of the user's own words belongs to their item, not to a response: no epoch drops it, nor its
  // failure.
  if (output.kind === "input_transcript" || output.kind === "input_transcript_failed") {
    const named = output.itemId === undefined ? undefined : b.state.history.find((h) => h.id === output.itemId);
    const itemId = named?.role === "user" ? named.id : output.itemId === undefined ? lastUserItem(b) : null;
    if (itemId === null) return;
    if (output.kind === "input_transcript") {
      b.push({ type: "InputTranscribed", data: { itemId, transcript: output.transcript } });
    } else {
      b.push({ type: "InputTranscriptionFailed", data: { itemId, code: output.code, message: output.message } });
    }
    return;
  }
  if (output.epoch !== b.state.epoch) return;
  switch (output.kind) {
    case "upstream_session":
    case "history_seeded":
      // Recorded as the input it is; nothing of the session changes.
      return;
    case "speak":
      ensureSpeaking(b, at);
      return;
    case "audio": {
      ensureSpeaking(b, at);
      const response = b.state.response;
      const audio = response === null ? undefined : b.state.audio[response.itemId];
      if (response === null || audio === undefined) return;
      // The playback ledger counts ms of audio as the client receives it, whatever its format.
      const runnerRate = b.state.capabilities.outputSampleRateHz;
      const sent = delivered ?? { audio: output.audio, format: "pcm16" as const, rate: runnerRate };
      const durationMs = (sent.audio.byteLength / BYTES_PER_SAMPLE[sent.format] / sent.rate) * 1000;
      const generatedMs = audio.ledger.generatedMs + durationMs;
      const transcript = audio.transcript + output.transcript;
      b.push({
        type: "AudioDelivered",
        data: {
          responseId: response.id,
          itemId: response.itemId,
          audio: sent.audio,
          sampleRateHz: sent.rate,
          ...(sent.format === "pcm16" ? {} : { format: sent.format }),
          transcript: output.transcript,
          durationMs,
          mark: { textChars: transcript.length, audioEndMs: generatedMs },
          playback: { ...audio.ledger, generatedMs, sentMs: generatedMs },
          firstDeltaAt: audio.firstDeltaAt ?? at,
        },
      });
      return;
    }
    case "text": {
      ensureResponse(b, at);
      const response = b.state.response;
      if (response === null) return;
      openMessage(b);
      if (response.text === null)
        b.push({ type: "TextStarted", data: { responseId: response.id, itemId: response.itemId } });
      b.push({ type: "TextDelivered", data: { responseId: response.id, itemId: response.itemId, delta: output.text } });
      return;
    }
    case "tool_call": {
      // Tool calls are produced only by models that make them (reference, "Capability negotiation by model"): a
      // call from any other model is ignored; its output stays in the log as the input it was.
      if (!b.state.capabilities.supportsToolCalls) return;
      if (output.callId === null || output.name === null) {
        b.push({
          type: "MalformedFunctionCall",
          data: { callId: output.callId, name: output.name, arguments: output.arguments },
        });
        return;
      }
      ensureResponse(b, at);
      const response = b.state.response;
      if (response === null) return;
      const n = response.functionCalls.length + 1;
      b.push({
        type: "FunctionCallDelivered",
        data: {
          responseId: response.id,
          // After the message item when it opened first (OpenAI: output_index is the position in response.output).
          outputIndex: response.functionCalls.length + (response.messageOutputIndex === null ? 0 : 1),
          previousItemId: response.outOfBand ? null : b.state.lastItemId,
          ...(response.outOfBand ? { outOfBand: true } : {}),
          call: {
            itemId: `${response.itemId}_fc${n}` as ItemId,
            callId: output.callId,
            name: output.name,
            arguments: output.arguments,
          },
        },
      });
      return;
    }
    case "end_of_turn":
      endResponse(b, at, "completed", null, null);
      startDeferredResponse(b, at);
      return;
    case "incomplete":
      // Ended by the model at a limit of its own, not cut: the epoch stays, and the next turn is answered.
      endResponse(b, at, "incomplete", output.reason, null);
      startDeferredResponse(b, at);
      return;
    case "cancelled": {
      // The model's own cancel: the epoch advances and history keeps what was heard. When its VAD heard the user
      // barge in, the barging utterance is what gets answered next; any other reason (its own restart, say) cuts
      // only this response, and the turn deferred behind it is answered.
      if (output.reason === "turn_detected" || output.reason === "barge_in") {
        cancelResponse(b, at, output.reason);
        dropDeferredResponses(b, output.reason);
        return;
      }
      cancelResponse(b, at, "model_cancelled");
      startDeferredResponse(b, at);
      return;
    }
    case "listen": {
      const response = b.state.response;
      if (response?.spoke) return;
      // Sessions recorded before issue 33, part 3 named no response (EarlierRules).
      b.push(
        b.state.rules?.listenNamesNoResponse === true
          ? { type: "ModelListened", data: { reason: output.reason } }
          : { type: "ModelListened", data: { reason: output.reason, responseId: response?.id ?? null } },
      );
      if (response !== null) endResponse(b, at, "completed", null, null);
      startDeferredResponse(b, at);
      return;
    }
    case "failure":
      endResponse(b, at, "failed", "model_failure", {
        code: "runtime_data_plane_stream_failed",
        message: output.message,
      });
      startDeferredResponse(b, at);
      return;
    default: {
      const unhandled: never = output;
      throw new Error(`applyStageOutput: unhandled output ${JSON.stringify(unhandled)}`);
    }
  }
};

/**
 * Ends the session because its model stage is gone: the runner broke its port's contract (`operation`), or reported
 * its stage lost (`stage`, e.g. an upstream model server went away). The active response fails with `code`, the
 * client gets an `error` with `code`, history keeps what was heard, and the session closes (`runner_failed`).
 */
export const endSession = (
  b: DecisionBuilder,
  at: number,
  operation: RunnerOperation | "stage",
  code: "runtime_data_plane_stream_failed" | StageLossCode,
  message: string,
): void => {
  endResponse(b, at, "failed", "model_failure", { code, message });
  b.push({ type: "RunnerFailed", data: { operation, code, message } });
  b.push(...settleEstimatedItems(b.state, at));
  b.push({ type: "SessionClosed", data: { reason: "runner_failed" } });
};

/**
 * What the active response has made so far, as text: its id, audio generated (ms), text and function calls. The
 * engine arms the response timer with it; a timer that fires with the same progress finds the response stalled.
 */
export const responseProgressOf = (state: SessionState): string | null => {
  const response = state.response;
  if (response === null) return null;
  const audio = state.audio[response.itemId];
  return `${response.id}:${audio?.ledger.generatedMs ?? 0}:${response.text?.length ?? -1}:${response.functionCalls.length}:${response.spoke}`;
};

/**
 * Ends a response whose model made no progress for `response_timeout_ms` (BEHAVIOUR.md, "Defaults and limits"):
 * the epoch advances (the engine aborts the runner's old epoch), the response ends failed with `response_timeout`,
 * history keeps what was heard, and the next turn works.
 */
export const timeOutResponse = (b: DecisionBuilder, at: number): void => {
  finishResponse(
    b,
    at,
    "failed",
    "response_timeout",
    {
      code: "response_timeout",
      message: `the model produced nothing for ${b.state.config.responseTimeoutMs} ms; the response was ended`,
    },
    "response_timeout",
  );
  startDeferredResponse(b, at);
};
