import type { Capabilities, SessionConfig } from "./config.ts";
import { type EndpointerState, initialEndpointer } from "./endpointing.ts";
import type { DomainEvent, FunctionCallItem, HistoryItem } from "./events.ts";
import { type ItemId, type ResponseId, type SessionId, userItemIdFor } from "./ids.ts";
import type { AudioTextMark, PlaybackLedger } from "./playback.ts";

/** Turn states of BEHAVIOUR.md, "Identity". */
export type TurnState =
  | "idle"
  | "user_speaking"
  | "user_committed"
  | "assistant_generating"
  | "assistant_playing"
  | "barge_in";

/** The active response. `phase`: created (precreated or started), streaming (spoke / audio sent). */
export interface ActiveResponse {
  readonly id: ResponseId;
  readonly itemId: ItemId;
  /** The item before the response's assistant item, as `conversation.item.added` told the client. */
  readonly previousItemId: ItemId | null;
  readonly turnId: number;
  readonly phase: "created" | "streaming";
  readonly metadata: Readonly<Record<string, unknown>> | null;
  readonly modalities: readonly ("audio" | "text")[];
  readonly spoke: boolean;
  /** The text part of a text-modality response, or null before its first text delta. */
  readonly text: string | null;
  readonly functionCalls: readonly FunctionCallItem[];
  /** User speech that overlapped this response so far, ms (BEHAVIOUR.md, "Turn-taking": overlap). */
  readonly overlapMs: number;
  /** The last overlap decision of this response (`action:reason`), or null. */
  readonly lastOverlap?: string | null;
}

/** What the session knows of one assistant item's audio, for playback truth and history. */
export interface AssistantAudio {
  readonly responseId: ResponseId;
  readonly itemId: ItemId;
  readonly ledger: PlaybackLedger;
  readonly transcript: string;
  readonly marks: readonly AudioTextMark[];
  /** Engine clock (ms) of the first audio delta, for the playback estimate. */
  readonly firstDeltaAt: number | null;
  /** The smallest truncation so far, ms of the item's audio, or null. */
  readonly truncatedAtMs: number | null;
  readonly ended: boolean;
  /** True when the response ended with status completed. */
  readonly completed: boolean;
  /** True once a `playback.ack` named this item: its history slot stays open to later acks. */
  readonly acked: boolean;
  /** True once a later user commit settled the item's history without an ack reserving it. */
  readonly sealed: boolean;
}

export interface InputBuffer {
  /** ms and bytes of un-committed audio. */
  readonly bufferedMs: number;
  readonly bufferedBytes: number;
  /** The session's input clock: ms of audio appended since the session opened (never reset). */
  readonly clockMs: number;
  readonly vadFrames: number;
  readonly endpointer: EndpointerState;
  /** The user item the current speech will be committed as, once speech started. */
  readonly speechItemId: ItemId | null;
  /** Text appended with `input.text.append` since the last commit. */
  readonly text: string;
  /** Where the current speech started (ms on the input clock), and whether the client was told. */
  readonly speechStartMs: number | null;
  readonly speechAnnounced: boolean;
}

/** The whole state of a session, folded from its domain events by `evolve`. */
export interface SessionState {
  readonly phase: "new" | "open" | "closed";
  readonly sessionId: SessionId;
  readonly config: SessionConfig;
  readonly capabilities: Capabilities;
  readonly epoch: number;
  readonly turnId: number;
  readonly turnState: TurnState;
  readonly responseCount: number;
  readonly userItemCount: number;
  readonly input: InputBuffer;
  /** The last item the client was told about (for `previous_item_id`). */
  readonly lastItemId: ItemId | null;
  readonly response: ActiveResponse | null;
  readonly audio: Readonly<Record<string, AssistantAudio>>;
  readonly history: readonly HistoryItem[];
  /** `estimated` until the client's first `playback.ack` (BEHAVIOUR.md, "Playback truth", ours). */
  readonly playbackMode: "estimated" | "acknowledged";
  /** The socket generation that holds the session (1 at creation, + 1 per resume). */
  readonly attachmentGeneration: number;
  /** SHA-256 (hex) of the current resume token; the token itself is never in the log. */
  readonly resumeTokenSha256: string | null;
  /** False between a dropped socket (or a server restart) and a resume. */
  readonly attached: boolean;
}

const NO_CAPABILITIES: Capabilities = {
  implementationLevel: "turn_based",
  chunkPeriodMs: 0,
  supportsBargeIn: false,
  supportsSessionResume: false,
  supportsAudioTruncate: false,
  supportsToolCalls: false,
  supportsVideo: false,
  inputSampleRateHz: 16000,
  outputSampleRateHz: 24000,
};

/** Before `SessionOpened`: no id, no config of its own. */
export const initialState: SessionState = {
  phase: "new",
  sessionId: "" as SessionId,
  config: {
    model: "",
    instructions: "",
    voice: null,
    outputModalities: ["audio", "text"],
    inputAudio: { format: "pcm16", rate: 16000 },
    outputAudio: { format: "pcm16", rate: 24000 },
    turnDetection: null,
    overlapPolicy: "listen_only",
    playbackCommitPolicy: "ack_only",
    temperature: null,
    autoResponse: false,
    idleTimeoutS: null,
  },
  capabilities: NO_CAPABILITIES,
  epoch: 0,
  turnId: 0,
  turnState: "idle",
  responseCount: 0,
  userItemCount: 0,
  input: {
    bufferedMs: 0,
    bufferedBytes: 0,
    clockMs: 0,
    vadFrames: 0,
    endpointer: initialEndpointer,
    speechItemId: null,
    text: "",
    speechStartMs: null,
    speechAnnounced: false,
  },
  lastItemId: null,
  response: null,
  audio: {},
  history: [],
  playbackMode: "estimated",
  attachmentGeneration: 0,
  resumeTokenSha256: null,
  attached: false,
};

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

/** Folds one domain event into the state. Pure; every case of the union is handled. */
export const evolve = (state: SessionState, event: DomainEvent): SessionState => {
  switch (event.type) {
    case "SessionCreated":
      return {
        ...state,
        phase: "open",
        sessionId: event.data.sessionId,
        config: event.data.config,
        capabilities: event.data.capabilities,
        attachmentGeneration: event.data.attachmentGeneration,
        resumeTokenSha256: event.data.resumeTokenSha256,
        attached: true,
      };
    case "SessionConfigured":
      return { ...state, config: event.data.config };
    case "RequestRejected":
    case "HeartbeatAcknowledged":
    case "ModelListened":
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
      // The next utterance gets an item of its own, whether or not this one is committed.
      return {
        ...state,
        input: { ...state.input, speechItemId: null, speechStartMs: null, speechAnnounced: false },
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
      };
    }
    case "ResponseStarted":
      return {
        ...state,
        responseCount: state.responseCount + 1,
        turnId: event.data.turnId,
        lastItemId: event.data.itemId,
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
          },
        },
        history: [
          ...state.history,
          {
            id: event.data.itemId,
            type: "message",
            role: "assistant",
            text: "",
            audioMs: 0,
            status: "in_progress",
            audio: event.data.modalities.includes("audio"),
          },
        ],
        turnState: "assistant_generating",
      };
    case "ResponseSpoke":
      return state.response === null
        ? state
        : { ...state, response: { ...state.response, spoke: true, phase: "streaming" } };
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
        completed: event.data.status === "completed",
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
      return { ...state, history: state.history.filter((h) => h.id !== event.data.itemId) };
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
    case "SessionResumed":
      return {
        ...state,
        attachmentGeneration: event.data.attachmentGeneration,
        resumeTokenSha256: event.data.resumeTokenSha256,
        attached: true,
      };
    case "SessionDetached":
      return { ...state, attached: false };
    case "MalformedFunctionCall":
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
