import type { DecisionBuilder } from "./builder.ts";
import type { AudioAppend } from "./commands.ts";
import { SERVER_VAD_DEFAULTS } from "./config.ts";
import { stepEndpointer } from "./endpointing.ts";
import { settleEstimatedItems } from "./history.ts";
import { type ItemId, userItemIdFor } from "./ids.ts";
import { cancelResponse, startResponse } from "./response-flow.ts";
import type { SessionState } from "./state.ts";

/** Silero VAD frame: 512 samples at 16 kHz = 32 ms (DESIGN.md, "Ports": Vad). */
export const VAD_FRAME_MS = 32;

/**
 * The lane of a session (BEHAVIOUR.md, "Turn-taking"): `native` when the model decides (auto_response on a
 * model-native runner, no turn detection), else `turn`, where commits create items and responses.
 */
export const laneOf = (state: SessionState): "native" | "turn" =>
  state.config.autoResponse &&
  state.config.turnDetection === null &&
  state.capabilities.implementationLevel === "model_native_duplex"
    ? "native"
    : "turn";

const nextUserItemId = (state: SessionState): ItemId =>
  state.input.speechItemId ?? userItemIdFor(state.sessionId, state.userItemCount + 1);

/**
 * Seals the buffered audio into a user item and, in the turn lane when asked, opens a response
 * (BEHAVIOUR.md scenario 5). The caller has checked that the buffer is not empty. `atMs` is the commit point on
 * the input clock: the end of the speech for a server-VAD commit (audio after it stays buffered and the endpointer
 * goes on), or null for a client commit of everything buffered (the endpointer resets).
 */
export const commitInput = (
  b: DecisionBuilder,
  at: number,
  createResponse: boolean | null,
  source: "client" | "turn_detection",
  atMs: number | null = null,
): void => {
  b.push(...settleEstimatedItems(b.state, at));
  const s = b.state;
  const bufferStartMs = s.input.clockMs - s.input.bufferedMs;
  const commitMs = atMs === null ? s.input.clockMs : Math.min(s.input.clockMs, Math.max(bufferStartMs, atMs));
  b.push({
    type: "InputCommitted",
    data: {
      itemId: nextUserItemId(s),
      previousItemId: s.lastItemId,
      audioMs: commitMs - bufferStartMs,
      clockMs: commitMs,
      historyLength: s.history.length + 1,
      resetEndpointer: atMs === null,
    },
  });
  const wanted = createResponse ?? b.state.config.turnDetection?.createResponse ?? true;
  if (laneOf(b.state) === "turn" && wanted && b.state.response === null) {
    startResponse(b, at, source, null);
  }
};

/**
 * `input_audio_buffer.append`: buffers the audio, runs server-VAD endpointing on the recorded frame
 * probabilities, and acts on what it hears: a barge-in when the policy says so, a commit when speech stops in the
 * turn lane with server VAD.
 */
export const appendAudio = (b: DecisionBuilder, at: number, command: AudioAppend): void => {
  const s = b.state;
  const rate = s.capabilities.inputSampleRateHz;
  const durationMs = (command.audio.byteLength / 2 / rate) * 1000;
  const params = s.config.turnDetection ?? SERVER_VAD_DEFAULTS;
  // With server VAD a stop is a commit, which resets the floor of the next speech's prefix padding.
  const stepped = stepEndpointer(
    s.input.endpointer,
    params,
    command.vad,
    s.input.vadFrames * VAD_FRAME_MS,
    VAD_FRAME_MS,
    s.config.turnDetection !== null,
  );
  b.push({
    type: "AudioBuffered",
    data: {
      durationMs,
      bytes: command.audio.byteLength,
      clockMs: s.input.clockMs + durationMs,
      vadFrames: s.input.vadFrames + command.vad.length,
      endpointer: stepped.state,
    },
  });
  for (const event of stepped.events) {
    if (event.type === "speech_started") {
      b.push({ type: "SpeechStarted", data: { itemId: nextUserItemId(b.state), audioStartMs: event.audioStartMs } });
      const td = b.state.config.turnDetection;
      if (
        b.state.response &&
        td?.interruptResponse &&
        b.state.config.overlapPolicy === "barge_in_on_speech" &&
        b.state.capabilities.supportsBargeIn
      ) {
        cancelResponse(b, at, "turn_detected");
      }
    } else {
      b.push({ type: "SpeechStopped", data: { itemId: nextUserItemId(b.state), audioEndMs: event.audioEndMs } });
      if (b.state.config.turnDetection !== null && b.state.input.bufferedBytes > 0) {
        commitInput(b, at, null, "turn_detection", event.audioEndMs);
      }
    }
  }
};
