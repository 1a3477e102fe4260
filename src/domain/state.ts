import type { Capabilities, SessionConfig } from "./config.ts";
import type { EarlierRules } from "./earlier-rules.ts";
import { type EndpointerState, initialEndpointer } from "./endpointing.ts";
import type { FunctionCallItem, HistoryItem } from "./history-item.ts";
import type { ItemId, ResponseId, SessionId } from "./ids.ts";
import type { DetachReason } from "./inputs.ts";
import type { AudioTextMark, PlaybackLedger } from "./playback.ts";
import type { ToolCallRow } from "./tool-ledger.ts";

export type { EarlierRules } from "./earlier-rules.ts";

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
  /** An out-of-band response (`conversation: "none"`): outside the conversation and its history. */
  readonly outOfBand: boolean;
  /**
   * The assistant message item's index in `response.output` once it opened (the first audio or text, or the end of
   * a response that made nothing), else null: a response that only calls tools has no message item.
   */
  readonly messageOutputIndex: number | null;
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
  /** True when the response ended with status completed (or incomplete: done, at a limit of the model's). */
  readonly completed: boolean;
  /** True when the response ended `incomplete`: its history item says so however much of it was heard. */
  readonly incomplete?: boolean;
  /** True once a `playback.ack` named this item: its history slot stays open to later acks. */
  readonly acked: boolean;
  /** True once a later user commit settled the item's history without an ack reserving it. */
  readonly sealed: boolean;
  /** True once the response spoke: history keeps its heard transcript; otherwise its text (or nothing). */
  readonly spoke: boolean;
  /** The item of an out-of-band response: never in history. */
  readonly outOfBand: boolean;
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
  /**
   * The model-native lane's last utterance whose end was heard and that the model has not answered yet (no response
   * started and no listen decision since): where it started (prefix padding included) and stopped, ms on the input
   * clock. A runner that lost its work (a restart, a failed append) is given its audio again.
   */
  readonly unanswered?: { readonly audioStartMs: number; readonly audioEndMs: number } | null;
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
  /** The session tool ledger: the function calls of the session, oldest first (tool-ledger.ts; absent: none). */
  readonly toolCalls?: readonly ToolCallRow[];
  /** `estimated` until the client's first `playback.ack` (BEHAVIOUR.md, "Playback truth", ours). */
  readonly playbackMode: "estimated" | "acknowledged";
  /** The socket generation that holds the session (1 at creation, + 1 per resume). */
  readonly attachmentGeneration: number;
  /** SHA-256 (hex) of the current resume token; the token itself is never in the log. */
  readonly resumeTokenSha256: string | null;
  /** False between a dropped socket (or a server restart) and a resume. */
  readonly attached: boolean;
  /** Why the last socket was detached, until a resume tells it (absent when its detach did not say). */
  readonly detachReason?: DetachReason;
  /**
   * Commits whose responses wait for the active one to end, oldest first (BEHAVIOUR.md, "Turn-taking": a commit
   * while a response is active is deferred). Never empty while no response is active.
   */
  readonly deferredTurns: readonly DeferredTurn[];
  /** `max_pending_turns_per_session`: deferred responses at most. */
  readonly maxPendingTurns: number;
  /** When the session's maximum lifetime ends (ms since the Unix epoch; absent: no limit). */
  readonly lifetimeEndsAt?: number;
  /** The rules of the earlier release that recorded the session (absent: today's). */
  readonly rules?: EarlierRules;
}

/** A commit whose response is deferred: the user item it answers, and what committed it. */
export interface DeferredTurn {
  readonly itemId: ItemId;
  readonly source: "client" | "turn_detection";
}

/** `max_pending_turns_per_session` of BEHAVIOUR.md, "Defaults and limits". */
export const DEFAULT_MAX_PENDING_TURNS = 4;

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
    nativeDuplex: true,
    idleTimeoutS: null,
    tools: [],
    toolChoice: "auto",
    maxResponseOutputTokens: "inf",
    refAudio: null,
    responseTimeoutMs: 30_000,
    overlapShortAckMs: 700,
    overlapBargeInMs: 1200,
    overlapSilenceRms: 0.003,
    speed: 1,
    tracing: null,
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
  deferredTurns: [],
  maxPendingTurns: DEFAULT_MAX_PENDING_TURNS,
};
