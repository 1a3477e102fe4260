import type { DecisionBuilder } from "./builder.ts";
import type { EndReason } from "./events.ts";
import { settleEstimatedItems, settleItem } from "./history.ts";
import { assistantItemIdFor, responseIdFor } from "./ids.ts";
import type { StageOutput } from "./stage.ts";

/**
 * The response lifecycle (BEHAVIOUR.md, "Turn-taking"; reference/realtime-duplex-api.md, "Response lifecycle"):
 * starting a response, model output, the end of a turn and the atomic cancel.
 */

/** Opens a new response (`response.created` and the assistant item), after settling what history owes. */
export const startResponse = (
  b: DecisionBuilder,
  at: number,
  source: "model" | "client" | "turn_detection",
  metadata: Readonly<Record<string, unknown>> | null,
): void => {
  b.push(...settleEstimatedItems(b.state, at));
  const responseId = responseIdFor(b.state.sessionId, b.state.responseCount + 1);
  b.push({
    type: "ResponseStarted",
    data: {
      responseId,
      itemId: assistantItemIdFor(responseId),
      previousItemId: b.state.lastItemId,
      turnId: b.state.turnId + 1,
      metadata,
      source,
    },
  });
};

/** Ends the active response: `completed` at end of turn, `failed` on a model failure. Settles its history. */
export const endResponse = (
  b: DecisionBuilder,
  at: number,
  status: "completed" | "failed",
  reason: EndReason | null,
  error: { code: "runtime_data_plane_stream_failed"; message: string } | null,
): void => {
  const response = b.state.response;
  if (response === null) return;
  const audio = b.state.audio[response.itemId];
  if (audio === undefined) return;
  b.push({
    type: "ResponseEnded",
    data: {
      responseId: response.id,
      itemId: response.itemId,
      status,
      reason,
      transcript: audio.transcript,
      spoke: response.spoke,
      audioSent: audio.ledger.sentMs > 0,
      metadata: response.metadata,
      playback: audio.ledger,
      error,
    },
  });
  const ended = b.state.audio[response.itemId];
  if (ended !== undefined) b.push(...settleItem(b.state, ended, at, status === "completed"));
};

/**
 * Cancels the active response atomically: the epoch advances (the engine aborts the runner's old epoch), the
 * response ends `cancelled` with `reason`, and history keeps what was heard by `at` (BEHAVIOUR.md, "Barge-in and
 * cancel are atomic"). Does nothing when no response is active.
 */
export const cancelResponse = (b: DecisionBuilder, at: number, reason: EndReason): void => {
  const response = b.state.response;
  if (response === null) return;
  const audio = b.state.audio[response.itemId];
  if (audio === undefined) return;
  b.push({ type: "EpochAdvanced", data: { epoch: b.state.epoch + 1, reason } });
  b.push({
    type: "ResponseEnded",
    data: {
      responseId: response.id,
      itemId: response.itemId,
      status: "cancelled",
      reason,
      transcript: audio.transcript,
      spoke: response.spoke,
      audioSent: audio.ledger.sentMs > 0,
      metadata: response.metadata,
      playback: audio.ledger,
      error: null,
    },
  });
  const ended = b.state.audio[response.itemId];
  if (ended !== undefined) b.push(...settleItem(b.state, ended, at, false));
};

const ensureSpeaking = (b: DecisionBuilder, at: number): void => {
  if (b.state.response === null) startResponse(b, at, "model", null);
  const response = b.state.response;
  if (response !== null && !response.spoke) {
    b.push({ type: "ResponseSpoke", data: { responseId: response.id, itemId: response.itemId } });
  }
};

/**
 * Applies one output of the model stage. Output stamped with an older epoch is dropped, terminal events included
 * (BEHAVIOUR.md, "Identity"): it leaves its input in the log and decides nothing.
 */
export const applyStageOutput = (b: DecisionBuilder, at: number, output: StageOutput): void => {
  if (b.state.phase !== "open" || output.epoch !== b.state.epoch) return;
  switch (output.kind) {
    case "speak":
      ensureSpeaking(b, at);
      return;
    case "audio": {
      ensureSpeaking(b, at);
      const response = b.state.response;
      const audio = response === null ? undefined : b.state.audio[response.itemId];
      if (response === null || audio === undefined) return;
      const rate = b.state.config.outputAudio.rate;
      const durationMs = (output.audio.byteLength / 2 / rate) * 1000;
      const generatedMs = audio.ledger.generatedMs + durationMs;
      const transcript = audio.transcript + output.transcript;
      b.push({
        type: "AudioDelivered",
        data: {
          responseId: response.id,
          itemId: response.itemId,
          audio: output.audio,
          sampleRateHz: rate,
          transcript: output.transcript,
          durationMs,
          mark: { textChars: transcript.length, audioEndMs: generatedMs },
          playback: { ...audio.ledger, generatedMs, sentMs: generatedMs },
          firstDeltaAt: audio.firstDeltaAt ?? at,
        },
      });
      return;
    }
    case "end_of_turn":
      endResponse(b, at, "completed", null, null);
      return;
    case "listen": {
      const response = b.state.response;
      if (response?.spoke) return;
      b.push({ type: "ModelListened", data: { reason: output.reason } });
      if (response !== null) endResponse(b, at, "completed", null, null);
      return;
    }
    case "failure":
      endResponse(b, at, "failed", "model_failure", {
        code: "runtime_data_plane_stream_failed",
        message: output.message,
      });
      return;
    default: {
      const unhandled: never = output;
      throw new Error(`applyStageOutput: unhandled output ${JSON.stringify(unhandled)}`);
    }
  }
};
