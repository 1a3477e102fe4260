import { withConfigDefaults } from "./config.ts";
import type { DomainEvent, HistoryItem } from "./events.ts";
import { type ItemId, userItemIdFor } from "./ids.ts";
import { laneOf } from "./lane.ts";
import { type AssistantAudio, DEFAULT_MAX_PENDING_TURNS, type SessionState } from "./state.ts";

const upsertHistory = (history: readonly HistoryItem[], item: HistoryItem): readonly HistoryItem[] =>
  history.some((h) => h.id === item.id) ? history.map((h) => (h.id === item.id ? item : h)) : [...history, item];

/** The user item count after `itemId` is used: + 1 when it is the next derived id, unchanged when already counted. */
const countUserItem = (state: SessionState, itemId: ItemId): number =>
  itemId === userItemIdFor(state.sessionId, state.userItemCount + 1) ? state.userItemCount + 1 : state.userItemCount;

/** Inserts `item` after `previousId` (at the end when null or unknown). */
const insertAfter = (
  history: readonly HistoryItem[],
  item: HistoryItem,
  previousId: ItemId | null,
): readonly HistoryItem[] => {
  const index = previousId === null ? -1 : history.findIndex((h) => h.id === previousId);
  return index < 0 ? [...history, item] : [...history.slice(0, index + 1), item, ...history.slice(index + 1)];
};

const updateAudio = (
  state: SessionState,
  itemId: ItemId,
  change: (audio: AssistantAudio) => AssistantAudio,
): SessionState => {
  const current = state.audio[itemId];
  return current === undefined ? state : { ...state, audio: { ...state.audio, [itemId]: change(current) } };
};

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

/** Folds one domain event into the state. Pure; every case of the union is handled. */
export const evolve = (state: SessionState, event: DomainEvent): SessionState => {
  switch (event.type) {
    case "SessionCreated":
      return {
        ...state,
        phase: "open",
        sessionId: event.data.sessionId,
        config: withConfigDefaults(event.data.config),
        capabilities: event.data.capabilities,
        attachmentGeneration: event.data.attachmentGeneration,
        resumeTokenSha256: event.data.resumeTokenSha256,
        attached: true,
        maxPendingTurns: event.data.maxPendingTurns ?? DEFAULT_MAX_PENDING_TURNS,
        ...(event.data.rules === undefined ? {} : { rules: event.data.rules }),
      };
    case "SessionConfigured":
      return { ...state, config: withConfigDefaults(event.data.config) };
    case "RequestRejected":
    case "DeferredResponseRefused":
    case "RunnerFailed":
    case "HeartbeatAcknowledged":
      return state;
    case "ModelListened":
      // The model's answer to the utterance may be to keep listening.
      return state.input.unanswered ? { ...state, input: { ...state.input, unanswered: null } } : state;
    case "UtteranceResubmitted":
      return state;
    case "AudioBuffered":
      return {
        ...state,
        input: {
          ...state.input,
          bufferedMs: state.input.bufferedMs + event.data.durationMs,
          bufferedBytes: state.input.bufferedBytes + event.data.bytes,
          clockMs: event.data.clockMs,
          vadFrames: event.data.vadFrames,
          endpointer: event.data.endpointer,
        },
      };
    case "SpeechStarted":
      return {
        ...state,
        userItemCount: countUserItem(state, event.data.itemId),
        input: {
          ...state.input,
          speechItemId: event.data.itemId,
          speechStartMs: event.data.audioStartMs,
          speechAnnounced: event.data.announced,
        },
        turnState: state.response === null ? "user_speaking" : state.turnState,
      };
    case "SpeechStopped":
      // The next utterance gets an item of its own, whether or not this one is committed. In the model-native lane it
      // waits for the model's answer.
      return {
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
      };
    case "InputCleared":
      return {
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
      };
    case "InputCommitted": {
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
    }
    case "DeferredResponsesDropped":
      return { ...state, deferredTurns: [] };
    case "MessageStarted":
      return state.response === null
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
          };
    case "ResponseStarted": {
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
    }
    case "ResponseSpoke":
      return state.response === null
        ? state
        : {
            ...updateAudio(state, event.data.itemId, (a) => ({ ...a, spoke: true })),
            response: { ...state.response, spoke: true, phase: "streaming" },
          };
    case "AudioDelivered": {
      const withAudio = updateAudio(state, event.data.itemId, (a) => ({
        ...a,
        ledger: event.data.playback,
        transcript: a.transcript + event.data.transcript,
        marks: [...a.marks, event.data.mark],
        firstDeltaAt: a.firstDeltaAt ?? event.data.firstDeltaAt,
      }));
      return { ...withAudio, turnState: "assistant_playing" };
    }
    case "ResponseEnded": {
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
    }
    case "EpochAdvanced":
      return { ...state, epoch: event.data.epoch, turnState: "barge_in" };
    case "PlaybackAcknowledged":
      return {
        ...updateAudio(state, event.data.itemId, (a) => ({
          ...a,
          ledger: event.data.playback,
          acked: true,
          truncatedAtMs: event.data.truncate
            ? Math.min(a.truncatedAtMs ?? Number.POSITIVE_INFINITY, event.data.committedMs)
            : a.truncatedAtMs,
        })),
        playbackMode: "acknowledged",
      };
    case "ItemTruncated":
      // A truncation at or beyond the end of what was generated changes nothing (BEHAVIOUR.md, "Playback truth").
      return updateAudio(state, event.data.itemId, (a) =>
        event.data.audioEndMs >= a.ledger.generatedMs
          ? a
          : {
              ...a,
              truncatedAtMs: Math.min(a.truncatedAtMs ?? Number.POSITIVE_INFINITY, event.data.audioEndMs),
              ledger: { ...a.ledger, committedMs: Math.min(a.ledger.committedMs, event.data.audioEndMs) },
            },
      );
    case "HistoryCommitted":
      return { ...state, history: upsertHistory(state.history, event.data.item) };
    case "SessionClosed":
      return { ...state, phase: "closed", response: null };
    case "TextStarted":
      return state.response === null
        ? state
        : { ...state, response: { ...state.response, text: "", phase: "streaming" } };
    case "TextDelivered":
      return state.response === null
        ? state
        : {
            ...state,
            response: { ...state.response, text: (state.response.text ?? "") + event.data.delta },
            turnState: "assistant_playing",
          };
    case "FunctionCallDelivered": {
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
      if (event.data.outOfBand === true) {
        return state.response === null
          ? state
          : { ...state, response: { ...state.response, functionCalls: [...state.response.functionCalls, call] } };
      }
      return {
        ...state,
        lastItemId: call.itemId,
        history: [...state.history, item],
        response:
          state.response === null
            ? null
            : { ...state.response, functionCalls: [...state.response.functionCalls, call] },
      };
    }
    case "InputTranscribed":
      return {
        ...state,
        history: state.history.map((h) => (h.id === event.data.itemId ? { ...h, text: event.data.transcript } : h)),
      };
    case "InputTextAppended":
      return { ...state, input: { ...state.input, text: state.input.text + event.data.text } };
    case "ItemCreated":
      return {
        ...state,
        userItemCount: state.userItemCount + 1,
        lastItemId: event.data.item.id,
        history: insertAfter(state.history, event.data.item, event.data.previousItemId),
      };
    case "ItemDeleted":
      return {
        ...state,
        history: state.history.filter((h) => h.id !== event.data.itemId),
        // A deleted user item is not answered later.
        deferredTurns: state.deferredTurns.filter((t) => t.itemId !== event.data.itemId),
      };
    case "OverlapDecided":
      return state.response === null
        ? state
        : {
            ...state,
            response: {
              ...state.response,
              overlapMs: event.data.overlapMs,
              lastOverlap: `${event.data.action}:${event.data.reason}`,
            },
          };
    case "SpeechAnnounced":
      return { ...state, input: { ...state.input, speechAnnounced: true } };
    case "SessionResumed": {
      const { detachReason: _told, ...rest } = state;
      return {
        ...rest,
        attachmentGeneration: event.data.attachmentGeneration,
        resumeTokenSha256: event.data.resumeTokenSha256,
        attached: true,
      };
    }
    case "SessionDetached": {
      const { detachReason: _before, ...rest } = state;
      return event.data.reason === undefined
        ? { ...rest, attached: false }
        : { ...rest, attached: false, detachReason: event.data.reason };
    }
    case "MalformedFunctionCall":
    case "InputTranscriptionFailed":
    case "ItemRetrieved":
    case "OutputAudioCleared":
    case "RuntimeControlReported":
    case "EventsAcknowledged":
      return state;
    default: {
      const unhandled: never = event;
      throw new Error(`evolve: unhandled event ${JSON.stringify(unhandled)}`);
    }
  }
};
