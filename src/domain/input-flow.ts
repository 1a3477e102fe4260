import type { DecisionBuilder } from "./builder.ts";
import type { AudioAppend, ClientVad } from "./commands.ts";
import { SERVER_VAD_DEFAULTS } from "./config.ts";
import { type EndpointerParams, stepClientDecisions, stepEndpointer } from "./endpointing.ts";
import { settleEstimatedItems } from "./history.ts";
import { type ItemId, userItemIdFor } from "./ids.ts";
import { laneOf } from "./lane.ts";
import { announceSpeech, cancelResponse, dropDeferredResponses, startResponse } from "./response-flow.ts";
import type { SessionState } from "./state.ts";

/** Silero VAD frame: 512 samples at 16 kHz = 32 ms (DESIGN.md, "Ports": Vad). */
export const VAD_FRAME_MS = 32;

const nextUserItemId = (state: SessionState): ItemId =>
  state.input.speechItemId ?? userItemIdFor(state.sessionId, state.userItemCount + 1);

/**
 * Seals the buffered audio into a user item and, in the turn lane when asked, opens a response
 * (BEHAVIOUR.md scenario 5). The caller has checked that the buffer is not empty. `atMs` is the commit point on
 * the input clock: the end of the speech for a server-VAD commit (audio after it stays buffered and the endpointer
 * goes on), or null for a client commit of everything buffered (the endpointer resets). `speechFromMs`: where a
 * server-VAD commit's speech started (prefix padding included); the item holds nothing buffered before it.
 */
export const commitInput = (
  b: DecisionBuilder,
  at: number,
  createResponse: boolean | null,
  source: "client" | "turn_detection",
  atMs: number | null = null,
  itemId: ItemId | null = null,
  speechFromMs: number | null = null,
): void => {
  b.push(...settleEstimatedItems(b.state, at));
  const s = b.state;
  // A server-VAD commit holds the utterance: from its start (minus the prefix padding) to its stop, not whatever
  // silence was buffered before it (issue 8: 13 minutes of silence made an item of 782784 ms).
  // Sessions recorded before 4cb232b committed everything buffered (EarlierRules).
  const from = s.rules?.serverVadCommitsWholeBuffer === true ? null : speechFromMs;
  const bufferStartMs = Math.max(s.input.clockMs - s.input.bufferedMs, from ?? Number.NEGATIVE_INFINITY);
  const commitMs = atMs === null ? s.input.clockMs : Math.min(s.input.clockMs, Math.max(bufferStartMs, atMs));
  const committed = itemId ?? nextUserItemId(s);
  const answer = responseWanted(s, createResponse);
  const deferred = answer === "deferred";
  b.push({
    type: "InputCommitted",
    data: {
      itemId: committed,
      previousItemId: s.lastItemId,
      audioMs: commitMs - bufferStartMs,
      clockMs: commitMs,
      historyLength: s.history.length + 1,
      resetEndpointer: atMs === null,
      text: s.input.text,
      responseDeferred: deferred,
      source,
    },
  });
  if (answer === "now") startResponse(b, at, source, null, { inReplyTo: committed });
  if (answer === "refused") {
    // Only a server-VAD commit gets here (a client's is refused before): the item stays in history, and the
    // next response answers it with the rest of the conversation.
    b.push({
      type: "DeferredResponseRefused",
      data: {
        itemId: committed,
        code: "input_backpressure",
        message: `${s.maxPendingTurns} responses are already waiting for the active one to end (max_pending_turns_per_session); ${committed} was committed without a response of its own`,
      },
    });
  }
};

/**
 * Whether a commit gets a response (BEHAVIOUR.md, "Turn-taking"): only in the turn lane when asked (the client's
 * `response_create`, else `turn_detection.create_response`); `now` when no response is active, `deferred` while one
 * is and fewer than `max_pending_turns_per_session` wait, else `refused`. OpenAI: commit => item, response.create
 * => response; without turn detection a commit only makes an item unless it asks for a response.
 */
export const responseWanted = (
  state: SessionState,
  createResponse: boolean | null,
): "none" | "now" | "deferred" | "refused" => {
  // Sessions recorded before 83a7701 answered a commit that did not say (EarlierRules).
  const wanted =
    createResponse ?? state.config.turnDetection?.createResponse ?? state.rules?.speechNeverHeldBack === true;
  if (laneOf(state) !== "turn" || !wanted) return "none";
  if (state.response === null) return "now";
  // Sessions recorded before 5a45cdf answered no commit made while a response was active (EarlierRules).
  if (state.rules?.commitDuringResponseUnanswered === true) return "none";
  return state.deferredTurns.length < state.maxPendingTurns ? "deferred" : "refused";
};

/**
 * The utterance in progress, if the user is speaking: where its speech started (prefix padding included) and the
 * input clock now, ms. Null outside speech (a commit or a clear that reset the endpointer ended it too).
 */
export const speechInProgress = (state: SessionState): { audioStartMs: number; audioEndMs: number } | null =>
  state.input.endpointer.phase === "speech" && state.input.speechStartMs !== null
    ? { audioStartMs: state.input.speechStartMs, audioEndMs: state.input.clockMs }
    : null;

/**
 * Whether the model listens through this append: the client marked it `force_listen`, or it starts within the
 * session's first `force_listen_count` chunks of `chunk_period_ms` on the input clock (`state` is the session before
 * it). The runner's unit is marked from the same answer (src/engine/effects.ts).
 */
export const forcedListen = (state: SessionState, command: AudioAppend): boolean =>
  command.forceListen === true ||
  state.input.clockMs < (state.config.forceListenCount ?? 0) * state.capabilities.chunkPeriodMs;

/**
 * The endpointer's step over one append of `durationMs`. On the client's own VAD decisions where it sent them (`vad`
 * with `speech_started`, `speech_stopped` or `speech_active`; an `speech_active` that differs from the phase is the
 * edge, an explicit edge wins): `stepClientDecisions`. Else on frame probabilities: the client's `speech_probability`
 * (or its `vad.is_speech` as 1 or 0) for every frame the chunk completed, else the server's VAD's.
 */
const endpointerStep = (
  s: SessionState,
  params: EndpointerParams,
  command: AudioAppend,
  durationMs: number,
  floorOnStop: boolean,
): ReturnType<typeof stepEndpointer> => {
  const v = command.clientVad;
  if (v !== undefined && (v.speechStarted !== null || v.speechStopped !== null || v.speechActive !== null)) {
    const speaking = s.input.endpointer.phase === "speech";
    const edges = {
      started: v.speechStarted ?? (v.speechActive === true && !speaking),
      stopped: v.speechStopped ?? (v.speechActive === false && speaking),
    };
    const from = s.input.clockMs;
    return stepClientDecisions(s.input.endpointer, params, edges, from, from + durationMs, floorOnStop);
  }
  const p = v?.speechProbability ?? (v?.isSpeech === undefined || v.isSpeech === null ? null : Number(v.isSpeech));
  const frames = p === null ? command.vad : command.vad.map(() => p);
  return stepEndpointer(
    s.input.endpointer,
    params,
    frames,
    s.input.vadFrames * VAD_FRAME_MS,
    VAD_FRAME_MS,
    floorOnStop,
  );
};

/** Whether the client's own VAD calls a chunk speech (`is_speech`, else `speech_active`, else probability >= 0.5). */
const clientSpeech = (v: ClientVad | undefined): boolean | null =>
  v === undefined
    ? null
    : (v.isSpeech ?? v.speechActive ?? (v.speechProbability === null ? null : v.speechProbability >= 0.5));

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
  // Sessions recorded before 83a7701 moved the floor only at a server-VAD stop (EarlierRules).
  const floorOnStop = s.rules?.speechNeverHeldBack !== true || s.config.turnDetection !== null;
  const stepped = endpointerStep(s, params, command, durationMs, floorOnStop);
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
  const overlapping = b.state.response !== null;
  const forced = forcedListen(s, command);
  // The endpointer always runs (its marks annotate the runner's units), but only turn detection tells the client:
  // with turn_detection null no speech event is sent (BEHAVIOUR.md, "Turn-taking"; OpenAI's manual mode).
  const detecting = b.state.config.turnDetection !== null;
  // Sessions recorded before c073d28 told the client of speech without turn detection too (EarlierRules).
  const earlier = b.state.rules?.speechEventsWithoutTurnDetection === true;
  for (const event of stepped.events) {
    if (event.type === "speech_started") {
      b.push({
        type: "SpeechStarted",
        data: {
          itemId: nextUserItemId(b.state),
          audioStartMs: event.audioStartMs,
          announced:
            (detecting || earlier) && (b.state.response === null || b.state.rules?.speechNeverHeldBack === true),
        },
      });
    } else {
      const itemId = nextUserItemId(b.state);
      const speechFromMs = b.state.input.speechStartMs;
      // A server-VAD commit is preceded by its own speech_started, also when it was held back during a response
      // that the speech did not interrupt (interrupt_response false, or a listen decision).
      if (!earlier) announceSpeech(b);
      const announced = earlier ? b.state.input.speechAnnounced : detecting;
      b.push({ type: "SpeechStopped", data: { itemId, audioEndMs: event.audioEndMs, announced } });
      if (detecting && b.state.input.bufferedBytes > 0) {
        // On a force_listen chunk the model listens on: the utterance is committed, and no response starts.
        const respond = forced ? false : null;
        commitInput(b, at, respond, "turn_detection", event.audioEndMs, itemId, speechFromMs);
      }
    }
  }
  // Sessions recorded before 42f53f0 decided nothing of overlapping audio (EarlierRules).
  if (overlapping && b.state.response !== null && b.state.rules?.noOverlapDecisions !== true)
    decideOverlap(b, at, command, durationMs, forced);
};

/**
 * Decides what user audio that overlaps the active response means (BEHAVIOUR.md, "Turn-taking": overlap), and
 * reports it as `overlap.decision`. Speech is judged by the append's `is_speech`, else the client's own VAD (`vad`),
 * else the server's VAD probabilities (>= 0.5), else its RMS (>= `overlap_silence_rms`). Not speech: `drop`. Speech
 * up to `overlap_short_ack_ms` in all: a short remark, `listen`. Longer than `overlap_barge_in_ms` under
 * `barge_in_on_speech` on a model that supports barge-in: `barge_in`, which cancels the response (reason
 * `turn_detected` with server VAD, else `barge_in`). Otherwise `listen` (`long_overlap_speech`). Speech on a chunk the
 * model listens through (`forced`: `force_listen`, or within `force_listen_count`) is `listen` (`force_listen`) and
 * does not count towards the overlap.
 */
const decideOverlap = (
  b: DecisionBuilder,
  at: number,
  command: AudioAppend,
  durationMs: number,
  forced: boolean,
): void => {
  const response = b.state.response;
  if (response === null) return;
  const config = b.state.config;
  const speech =
    command.isSpeech ??
    clientSpeech(command.clientVad) ??
    (command.vad.length > 0 ? Math.max(...command.vad) >= 0.5 : command.rms >= config.overlapSilenceRms);
  // Speech the model was told to listen through does not count towards a barge-in.
  const overlapMs = response.overlapMs + (speech && !forced ? durationMs : 0);
  const policy = config.overlapPolicy;
  const mayBargeIn = policy === "barge_in_on_speech" && b.state.capabilities.supportsBargeIn;
  const [action, reason] = !speech
    ? (["drop", "overlap_not_speech"] as const)
    : forced
      ? (["listen", "force_listen"] as const)
      : overlapMs <= config.overlapShortAckMs
        ? (["listen", "short_ack"] as const)
        : mayBargeIn && overlapMs > config.overlapBargeInMs
          ? (["barge_in", config.turnDetection !== null ? "server_vad_utterance_active" : "overlap_speech"] as const)
          : (["listen", "long_overlap_speech"] as const);
  // Sessions recorded before 25f1415 reported every decision (EarlierRules).
  const reported = b.state.rules?.everyOverlapReported === true || response.lastOverlap !== `${action}:${reason}`;
  const marked = forced ? { forceListen: true as const } : {};
  b.push({ type: "OverlapDecided", data: { action, reason, policy, overlapMs, reported, ...marked } });
  if (action === "barge_in") {
    announceSpeech(b);
    const cancel = config.turnDetection !== null ? "turn_detected" : "barge_in";
    cancelResponse(b, at, cancel);
    dropDeferredResponses(b, cancel);
  }
};
