/**
 * The response flow's evolvers: a response from `ResponseStarted` to `ResponseEnded` (its message item, audio and
 * text deltas, function calls, the overlap decision during barge-in) and the failures that end or refuse one.
 */
import type { HistoryItem } from "./events.ts";
import { type FlowEvolvers, unchanged, updateAudio } from "./evolver.ts";
import type { ItemId } from "./ids.ts";
import { withCallOpened } from "./tool-ledger.ts";

/** The history entry of an assistant message item while its response runs. */
const openAssistantItem = (itemId: ItemId, modalities: readonly ("audio" | "text")[]): HistoryItem => ({
  id: itemId,
  type: "message",
  role: "assistant",
  text: "",
  audioMs: 0,
  status: "in_progress",
  audio: modalities.includes("audio"),
});

export const RESPONSE_EVOLVERS = {
  ResponseStarted: (state, event) => {
    const outOfBand = event.data.conversation === "none";
    return {
      ...state,
      input: state.input.unanswered ? { ...state.input, unanswered: null } : state.input,
      deferredTurns: event.data.deferred
        ? state.deferredTurns.filter((t) => t.itemId !== event.data.inReplyTo)
        : state.deferredTurns,
      responseCount: state.responseCount + 1,
      turnId: event.data.turnId,
      // An out-of-band response is never a previous_item_id, nor in history; a message that opens later becomes
      // the last item then.
      lastItemId: outOfBand || event.data.messageLater ? state.lastItemId : event.data.itemId,
      response: {
        id: event.data.responseId,
        itemId: event.data.itemId,
        previousItemId: event.data.previousItemId,
        turnId: event.data.turnId,
        phase: "created",
        metadata: event.data.metadata,
        modalities: event.data.modalities,
        spoke: false,
        text: null,
        functionCalls: [],
        overlapMs: 0,
        outOfBand,
        messageOutputIndex: event.data.messageLater ? null : 0,
      },
      audio: {
        ...state.audio,
        [event.data.itemId]: {
          responseId: event.data.responseId,
          itemId: event.data.itemId,
          ledger: { generatedMs: 0, sentMs: 0, playedMs: 0, committedMs: 0 },
          transcript: "",
          marks: [],
          firstDeltaAt: null,
          truncatedAtMs: null,
          ended: false,
          completed: false,
          acked: false,
          sealed: false,
          spoke: false,
          outOfBand,
        },
      },
      history:
        outOfBand || event.data.messageLater
          ? state.history
          : [...state.history, openAssistantItem(event.data.itemId, event.data.modalities)],
      turnState: "assistant_generating",
    };
  },
  MessageStarted: (state, event) =>
    state.response === null
      ? state
      : {
          ...state,
          lastItemId: state.response.outOfBand ? state.lastItemId : event.data.itemId,
          response: {
            ...state.response,
            previousItemId: event.data.previousItemId,
            messageOutputIndex: event.data.outputIndex,
          },
          history: state.response.outOfBand
            ? state.history
            : [...state.history, openAssistantItem(event.data.itemId, state.response.modalities)],
        },
  ResponseSpoke: (state, event) =>
    state.response === null
      ? state
      : {
          ...updateAudio(state, event.data.itemId, (a) => ({ ...a, spoke: true })),
          response: { ...state.response, spoke: true, phase: "streaming" },
        },
  AudioDelivered: (state, event) => {
    const withAudio = updateAudio(state, event.data.itemId, (a) => ({
      ...a,
      ledger: event.data.playback,
      transcript: a.transcript + event.data.transcript,
      marks: [...a.marks, event.data.mark],
      firstDeltaAt: a.firstDeltaAt ?? event.data.firstDeltaAt,
    }));
    return { ...withAudio, turnState: "assistant_playing" };
  },
  TextStarted: (state) =>
    state.response === null ? state : { ...state, response: { ...state.response, text: "", phase: "streaming" } },
  TextDelivered: (state, event) =>
    state.response === null
      ? state
      : {
          ...state,
          response: { ...state.response, text: (state.response.text ?? "") + event.data.delta },
          turnState: "assistant_playing",
        },
  FunctionCallDelivered: (state, event) => {
    const { call } = event.data;
    const item: HistoryItem = {
      id: call.itemId,
      type: "function_call",
      role: "assistant",
      text: "",
      audioMs: 0,
      status: "completed",
      audio: false,
      callId: call.callId,
      name: call.name,
      arguments: call.arguments,
    };
    // Every call the model makes opens in the tool ledger at the epoch it was made in (out-of-band ones too).
    const toolCalls = withCallOpened(state.toolCalls ?? [], call, state.epoch);
    if (event.data.outOfBand === true) {
      return state.response === null
        ? { ...state, toolCalls }
        : {
            ...state,
            toolCalls,
            response: { ...state.response, functionCalls: [...state.response.functionCalls, call] },
          };
    }
    return {
      ...state,
      toolCalls,
      lastItemId: call.itemId,
      history: [...state.history, item],
      response:
        state.response === null ? null : { ...state.response, functionCalls: [...state.response.functionCalls, call] },
    };
  },
  OverlapDecided: (state, event) =>
    state.response === null
      ? state
      : {
          ...state,
          response: {
            ...state.response,
            overlapMs: event.data.overlapMs,
            lastOverlap: `${event.data.action}:${event.data.reason}`,
          },
        },
  ResponseEnded: (state, event) => {
    const ended = updateAudio(state, event.data.itemId, (a) => ({
      ...a,
      ended: true,
      // An incomplete response is done too: everything it made was sent; its item stays marked incomplete.
      completed: event.data.status === "completed" || event.data.status === "incomplete",
      ...(event.data.status === "incomplete" ? { incomplete: true } : {}),
      ledger: event.data.playback,
    }));
    const speaking = state.input.endpointer.phase === "speech";
    return { ...ended, response: null, turnState: speaking ? "user_speaking" : "idle" };
  },
  MalformedFunctionCall: unchanged,
  RunnerFailed: unchanged,
  DeferredResponseRefused: unchanged,
} satisfies FlowEvolvers;
