/**
 * Server-VAD endpointing on frame probabilities (BEHAVIOUR.md, "Turn-taking"). Pure: the probabilities are
 * computed by the Silero VAD adapter before the decider and recorded on the append, so a replay reproduces the
 * same speech_started / speech_stopped without running the model.
 *
 * Start: consecutive frames at or above `threshold` totalling `minSpeechDurationMs`; the speech starts at the
 * first of them, and `audioStartMs` is that minus `prefixPaddingMs`, not before the last reset.
 * Stop: a silence candidate begins at the first frame below `max(threshold - 0.15, 0.01)`; frames below the
 * threshold after it (even above the lower threshold) do not restart it, a frame at or above the threshold cancels
 * it; speech stops at the end of the first frame below the lower threshold at which the candidate has lasted
 * `silenceDurationMs`. `audioEndMs` includes that trailing silence.
 */
export interface EndpointerParams {
  readonly threshold: number;
  readonly prefixPaddingMs: number;
  readonly silenceDurationMs: number;
  readonly minSpeechDurationMs: number;
}

/** Endpointer state. All times are ms on the session's input clock (ms of audio appended since the session opened). */
export interface EndpointerState {
  readonly phase: "silence" | "speech";
  /** Start of the current run of speech frames while in silence, or null. */
  readonly runStartMs: number | null;
  /** Start of the silence candidate while in speech, or null. */
  readonly silenceStartMs: number | null;
  /** Where the last reset (commit, clear, barge-in) put the floor for `audioStartMs`. */
  readonly floorMs: number;
}

export type EndpointerEvent =
  | { readonly type: "speech_started"; readonly speechStartMs: number; readonly audioStartMs: number }
  | { readonly type: "speech_stopped"; readonly audioEndMs: number };

export const initialEndpointer: EndpointerState = {
  phase: "silence",
  runStartMs: null,
  silenceStartMs: null,
  floorMs: 0,
};

/** The endpointer after a reset at `atMs`: silence, nothing pending, `audioStartMs` not before `atMs`. */
export const resetEndpointer = (atMs: number): EndpointerState => ({ ...initialEndpointer, floorMs: atMs });

/** The lower threshold that begins a silence candidate: `max(threshold - 0.15, 0.01)`. */
export const lowerThreshold = (threshold: number): number => Math.max(threshold - 0.15, 0.01);

/**
 * Runs the endpointer over consecutive frames. Frame `i` covers `[firstFrameStartMs + i*frameMs,
 * firstFrameStartMs + (i+1)*frameMs)`. A stop moves the floor of the next `audioStartMs` to it: an utterance's
 * prefix padding never reaches back into the one before (`floorOnStop` false: the floor stays, as sessions recorded
 * before 83a7701 without turn detection decided). Returns the new state and the events, in order.
 */
export const stepEndpointer = (
  state: EndpointerState,
  params: EndpointerParams,
  probabilities: readonly number[],
  firstFrameStartMs: number,
  frameMs: number,
  floorOnStop = true,
): { state: EndpointerState; events: EndpointerEvent[] } => {
  const lower = lowerThreshold(params.threshold);
  const events: EndpointerEvent[] = [];
  let s = state;
  probabilities.forEach((p, i) => {
    const start = firstFrameStartMs + i * frameMs;
    const end = start + frameMs;
    if (s.phase === "silence") {
      if (p < params.threshold) {
        s = { ...s, runStartMs: null };
        return;
      }
      const runStart = s.runStartMs ?? start;
      if (end - runStart >= params.minSpeechDurationMs) {
        events.push({
          type: "speech_started",
          speechStartMs: runStart,
          audioStartMs: Math.max(s.floorMs, runStart - params.prefixPaddingMs),
        });
        s = { ...s, phase: "speech", runStartMs: null, silenceStartMs: null };
      } else {
        s = { ...s, runStartMs: runStart };
      }
      return;
    }
    if (p >= params.threshold) {
      s = { ...s, silenceStartMs: null };
      return;
    }
    const silenceStart = s.silenceStartMs ?? (p < lower ? start : null);
    if (silenceStart !== null && p < lower && end - silenceStart >= params.silenceDurationMs) {
      events.push({ type: "speech_stopped", audioEndMs: end });
      s = { ...s, phase: "silence", runStartMs: null, silenceStartMs: null, floorMs: floorOnStop ? end : s.floorMs };
      return;
    }
    s = { ...s, silenceStartMs: silenceStart };
  });
  return { state: s, events };
};

/**
 * Runs the endpointer on a client's own VAD decisions for one chunk `[startMs, endMs)` of the input clock (the duplex
 * extension's `vad` object): `started` begins speech at the chunk's start (no minimum speech duration: the client
 * decided it), `audioStartMs` reaching back `prefixPaddingMs` but not before the floor; `stopped` ends it at the
 * chunk's end (no silence window: the client's VAD had its own), moving the floor there as `stepEndpointer` does.
 * An edge that does not change the phase is ignored. Returns the new state and the events, in order.
 */
export const stepClientDecisions = (
  state: EndpointerState,
  params: EndpointerParams,
  edges: { readonly started: boolean; readonly stopped: boolean },
  startMs: number,
  endMs: number,
  floorOnStop = true,
): { state: EndpointerState; events: EndpointerEvent[] } => {
  const events: EndpointerEvent[] = [];
  let s = state;
  if (edges.started && s.phase === "silence") {
    events.push({
      type: "speech_started",
      speechStartMs: startMs,
      audioStartMs: Math.max(s.floorMs, startMs - params.prefixPaddingMs),
    });
    s = { ...s, phase: "speech", runStartMs: null, silenceStartMs: null };
  }
  if (edges.stopped && s.phase === "speech") {
    events.push({ type: "speech_stopped", audioEndMs: endMs });
    s = { ...s, phase: "silence", runStartMs: null, silenceStartMs: null, floorMs: floorOnStop ? endMs : s.floorMs };
  }
  return { state: s, events };
};
