import type { DecisionBuilder } from "./builder.ts";
import type { ErrorCode } from "./errors.ts";
import type { EndReason, ResponseStatus, RunnerOperation } from "./events.ts";
import { settleEstimatedItems, settleItem, settleUnspoken } from "./history.ts";
import { assistantItemIdFor, type ItemId, responseIdFor } from "./ids.ts";
import type { StageLossCode } from "./stage.ts";
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
export const openMessage = (b: DecisionBuilder): void => {
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
  // A model server that refused the session at its own capacity is a retryable refusal, not a failure.
  b.push({ type: "SessionClosed", data: { reason: code === "duplex_session_busy" ? "model_busy" : "runner_failed" } });
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
