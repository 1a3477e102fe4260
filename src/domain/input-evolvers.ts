/**
 * The input flow's evolvers: the input buffer (audio and text appended, cleared, committed into a user item), the
 * endpointer's speech start and stop, the model-native lane's unanswered utterance, deferred turns, and the user
 * item's transcript (BEHAVIOUR.md, "Turn detection").
 */
import { type FlowEvolvers, unchanged } from "./evolver.ts";
import { type ItemId, userItemIdFor } from "./ids.ts";
import { laneOf } from "./lane.ts";
import type { SessionState } from "./state.ts";

/** The user item count after `itemId` is used: + 1 when it is the next derived id, unchanged when already counted. */
export const countUserItem = (state: SessionState, itemId: ItemId): number =>
  itemId === userItemIdFor(state.sessionId, state.userItemCount + 1) ? state.userItemCount + 1 : state.userItemCount;

export const INPUT_EVOLVERS = {
  AudioBuffered: (state, event) => ({
    ...state,
    input: {
      ...state.input,
      bufferedMs: state.input.bufferedMs + event.data.durationMs,
      bufferedBytes: state.input.bufferedBytes + event.data.bytes,
      clockMs: event.data.clockMs,
      vadFrames: event.data.vadFrames,
      endpointer: event.data.endpointer,
    },
  }),
  SpeechStarted: (state, event) => ({
    ...state,
    userItemCount: countUserItem(state, event.data.itemId),
    input: {
      ...state.input,
      speechItemId: event.data.itemId,
      speechStartMs: event.data.audioStartMs,
      speechAnnounced: event.data.announced,
    },
    turnState: state.response === null ? "user_speaking" : state.turnState,
  }),
  SpeechAnnounced: (state) => ({ ...state, input: { ...state.input, speechAnnounced: true } }),
  // The next utterance gets an item of its own, whether or not this one is committed. In the model-native lane it
  // waits for the model's answer.
  SpeechStopped: (state, event) => ({
    ...state,
    input: {
      ...state.input,
      speechItemId: null,
      speechStartMs: null,
      speechAnnounced: false,
      unanswered:
        laneOf(state) === "native"
          ? { audioStartMs: state.input.speechStartMs ?? event.data.audioEndMs, audioEndMs: event.data.audioEndMs }
          : (state.input.unanswered ?? null),
    },
    turnState: state.response === null ? "idle" : state.turnState,
  }),
  // The model's answer to the utterance may be to keep listening.
  ModelListened: (state) =>
    state.input.unanswered ? { ...state, input: { ...state.input, unanswered: null } } : state,
  UtteranceResubmitted: unchanged,
  InputCleared: (state, event) => ({
    ...state,
    input: {
      ...state.input,
      bufferedMs: 0,
      bufferedBytes: 0,
      speechItemId: null,
      text: "",
      // Cleared input is not answered.
      unanswered: null,
      endpointer: {
        ...state.input.endpointer,
        phase: "silence",
        runStartMs: null,
        silenceStartMs: null,
        floorMs: event.data.clockMs,
      },
    },
    turnState: state.response === null ? "idle" : state.turnState,
  }),
  InputCommitted: (state, event) => {
    const sealed = Object.fromEntries(
      Object.entries(state.audio).map(([id, a]) => [id, a.ended && !a.acked ? { ...a, sealed: true } : a]),
    );
    // Audio after the commit point (speech that went on within the same append) stays buffered.
    const remainingMs = Math.max(0, state.input.clockMs - event.data.clockMs);
    const bytesPerMs = state.input.bufferedMs > 0 ? state.input.bufferedBytes / state.input.bufferedMs : 0;
    return {
      ...state,
      userItemCount: countUserItem(state, event.data.itemId),
      input: {
        ...state.input,
        bufferedMs: remainingMs,
        bufferedBytes: Math.round(remainingMs * bytesPerMs),
        speechItemId: state.input.speechItemId === event.data.itemId ? null : state.input.speechItemId,
        text: "",
        endpointer: event.data.resetEndpointer
          ? { phase: "silence", runStartMs: null, silenceStartMs: null, floorMs: event.data.clockMs }
          : state.input.endpointer,
      },
      lastItemId: event.data.itemId,
      audio: sealed,
      history: [
        ...state.history,
        {
          id: event.data.itemId,
          type: "message",
          role: "user",
          text: state.input.text,
          audioMs: event.data.audioMs,
          status: "completed",
          audio: event.data.audioMs > 0,
        },
      ],
      turnState: state.response === null ? "user_committed" : state.turnState,
      deferredTurns: event.data.responseDeferred
        ? [...state.deferredTurns, { itemId: event.data.itemId, source: event.data.source ?? "client" }]
        : state.deferredTurns,
    };
  },
  DeferredResponsesDropped: (state) => ({ ...state, deferredTurns: [] }),
  InputTextAppended: (state, event) => ({
    ...state,
    input: { ...state.input, text: state.input.text + event.data.text },
  }),
  InputTranscribed: (state, event) => ({
    ...state,
    history: state.history.map((h) => (h.id === event.data.itemId ? { ...h, text: event.data.transcript } : h)),
  }),
  InputTranscriptionFailed: unchanged,
} satisfies FlowEvolvers;
