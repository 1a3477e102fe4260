/**
 * Applying the model stage's outputs (DESIGN.md, "Ports": ModelRunner; BEHAVIOUR.md, "Identity"): speech, audio,
 * text, tool calls, the end of a turn, the model's own cancel or listen, a failure or a lost stage, each decided
 * into the events of the active response (one starts in the model-native lane when the model speaks first).
 */
import type { DecisionBuilder } from "./builder.ts";
import { BYTES_PER_SAMPLE } from "./config.ts";
import type { DeliveredAudio } from "./events.ts";
import type { ItemId } from "./ids.ts";
import { laneOf } from "./lane.ts";
import {
  cancelResponse,
  dropDeferredResponses,
  endResponse,
  endSession,
  openMessage,
  startDeferredResponse,
  startResponse,
} from "./response-flow.ts";
import type { StageOutput } from "./stage.ts";
import { modelCallRefusal } from "./tool-ledger.ts";

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

/** An `audio` output: the response speaks, and its audio goes out as the client receives it (`AudioDelivered`). */
const deliverAudio = (
  b: DecisionBuilder,
  at: number,
  output: Extract<StageOutput, { kind: "audio" }>,
  delivered: DeliveredAudio | null,
): void => {
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
};

/** A `tool_call` output: a function call of the active response, or a malformed one reported as such. */
const deliverToolCall = (b: DecisionBuilder, at: number, output: Extract<StageOutput, { kind: "tool_call" }>): void => {
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
  // The tool ledger refuses a call it cannot open (an empty id or name, an id already a call), and the client is told;
  // sessions recorded before issue 35, part 1 delivered it (EarlierRules).
  const refusal = b.state.rules?.noToolLedger === true ? null : modelCallRefusal(b.state, output.callId, output.name);
  if (refusal !== null) {
    b.push({
      type: "RequestRejected",
      data: {
        code: refusal.code,
        message: refusal.message,
        param: refusal.param ?? null,
        clientEventId: null,
        commandType: null,
      },
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
};

/** A transcript of the user's words (or its failure), for the user item it names, else the last user message. */
const deliverInputTranscript = (
  b: DecisionBuilder,
  output: Extract<StageOutput, { kind: "input_transcript" | "input_transcript_failed" }>,
): void => {
  const named = output.itemId === undefined ? undefined : b.state.history.find((h) => h.id === output.itemId);
  const itemId = named?.role === "user" ? named.id : output.itemId === undefined ? lastUserItem(b) : null;
  if (itemId === null) return;
  if (output.kind === "input_transcript") {
    b.push({ type: "InputTranscribed", data: { itemId, transcript: output.transcript } });
  } else {
    b.push({ type: "InputTranscriptionFailed", data: { itemId, code: output.code, message: output.message } });
  }
};

/** A `listen` output: the model keeps listening; a response that had not spoken yet ends, the next deferred starts. */
const modelListened = (b: DecisionBuilder, at: number, output: Extract<StageOutput, { kind: "listen" }>): void => {
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
};

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
    deliverInputTranscript(b, output);
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
    case "audio":
      deliverAudio(b, at, output, delivered);
      return;
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
    case "tool_call":
      deliverToolCall(b, at, output);
      return;
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
    case "listen":
      modelListened(b, at, output);
      return;
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
