/**
 * Domain events: what the decider made of an input (DESIGN.md, "The session stream"), the log's decisions that the
 * state folds (evolve.ts) and the wire renders (protocol/server-events.ts). The inputs, the message envelope and
 * history's items live beside it (inputs.ts, message.ts, history-item.ts) and are importable from here too.
 */
import type { CloseReason } from "./close-reasons.ts";
import type { AudioEncoding, Capabilities, SessionConfig } from "./config.ts";
import type { EarlierRules } from "./earlier-rules.ts";
import type { EndpointerState } from "./endpointing.ts";
import type { ErrorCode } from "./errors.ts";
import type { FunctionCallItem, HistoryItem } from "./history-item.ts";
import type { ItemId, ResponseId, SessionId } from "./ids.ts";
import type { DetachReason, RunnerOperation } from "./inputs.ts";
import type { Message } from "./message.ts";
import type { AudioTextMark, PlaybackLedger } from "./playback.ts";
import type { IncompleteReason, StageLossCode, TranscriptFailureCode } from "./stage.ts";
import type { TurnState } from "./state.ts";

export type { FunctionCallItem, HistoryItem } from "./history-item.ts";
export type { DeliveredAudio, DetachReason, Input, InputType, RunnerOperation } from "./inputs.ts";
export { INPUT_TYPES } from "./inputs.ts";
export type { Message } from "./message.ts";

/** The session's state as `session.updated` shows it (reference, "Tier 2": session object extensions). */
export interface SessionSnapshot {
  readonly turnState: string;
  readonly activeResponseId: ResponseId | null;
  readonly activeResponseTurnId: number | null;
  /** The ledger of the active (else the last) response, ms. */
  readonly playback: PlaybackLedger;
}

/**
 * How a response ended (OpenAI's `response.done.status`): `incomplete` when the model stopped at a limit of its own
 * (`max_output_tokens`, `content_filter`).
 */
export type ResponseStatus = "completed" | "cancelled" | "failed" | "incomplete";

/** Why a response ended, as `status_details.reason` (reference: vLLM reasons; OpenAI's incomplete reasons). */
export type EndReason =
  | "response_timeout"
  | "barge_in"
  | "turn_detected"
  | "client_cancelled"
  | "session_closed"
  | "model_failure"
  | "server_restart"
  | "append_failed"
  /** The model stopped the response itself for a reason other than the user barging in. */
  | "model_cancelled"
  | IncompleteReason;

/**
 * Decisions: what `decide` made of an input. The wire projection renders server events from these alone, so each
 * carries what its server events show.
 */
export type DomainEvent =
  | Message<
      "SessionCreated",
      {
        readonly sessionId: SessionId;
        readonly config: SessionConfig;
        readonly capabilities: Capabilities;
        readonly attachmentGeneration: number;
        readonly resumeTokenSha256: string | null;
        /** Deferred responses a session may hold (absent in older logs: 4). */
        readonly maxPendingTurns?: number;
        /**
         * When the session's maximum lifetime ends (ms since the Unix epoch, engine clock): `SessionOpened.at` plus
         * `maxLifetimeS`; absent: no limit.
         */
        readonly lifetimeEndsAt?: number;
        /** `SessionOpened.rules`, kept by the session (absent: today's). */
        readonly rules?: EarlierRules;
      }
    >
  | Message<
      "SessionConfigured",
      {
        readonly config: SessionConfig;
        /** What the session object shows of the session's state when it was reconfigured (absent in older logs). */
        readonly view?: SessionSnapshot;
      }
    >
  | Message<
      "RequestRejected",
      {
        readonly code: ErrorCode;
        readonly message: string;
        readonly param: string | null;
        readonly clientEventId: string | null;
        readonly commandType: string | null;
      }
    >
  | Message<
      "AudioBuffered",
      {
        /** ms and bytes of PCM16 at the runner input rate added to the buffer. */
        readonly durationMs: number;
        readonly bytes: number;
        /** The input clock after this append, ms. */
        readonly clockMs: number;
        /** VAD frames consumed in total after this append. */
        readonly vadFrames: number;
        readonly endpointer: EndpointerState;
      }
    >
  | Message<
      "SpeechStarted",
      {
        readonly itemId: ItemId;
        readonly audioStartMs: number;
        /**
         * False without turn detection (no speech event is sent then), or when the speech overlaps a response:
         * `speech_started` then waits until the overlap decides to barge in, the response ends or the speech stops
         * (`SpeechAnnounced`), since stock clients read it as "the response was cancelled".
         */
        readonly announced: boolean;
      }
    >
  | Message<"SpeechAnnounced", { readonly itemId: ItemId; readonly audioStartMs: number }>
  /** `announced`: false without turn detection, when no speech event is sent. */
  | Message<"SpeechStopped", { readonly itemId: ItemId; readonly audioEndMs: number; readonly announced: boolean }>
  | Message<"InputCleared", { readonly clockMs: number }>
  | Message<
      "InputCommitted",
      {
        readonly itemId: ItemId;
        readonly previousItemId: ItemId | null;
        /** ms of audio in the item. */
        readonly audioMs: number;
        /** The commit point on the input clock (ms): the end of the speech for a server-VAD commit. */
        readonly clockMs: number;
        readonly historyLength: number;
        /** Explicit commits reset the endpointer; a server-VAD commit keeps it (speech may already go on). */
        readonly resetEndpointer: boolean;
        /** Text appended with `input.text.append` that the item also holds. */
        readonly text: string;
        /**
         * True when the commit asked for a response while one was active: its response waits for the active one
         * to end (`response_create_deferred`; absent in older logs: false).
         */
        readonly responseDeferred?: boolean;
        /** Who committed: the client, or server VAD when speech stopped (absent in older logs). */
        readonly source?: "client" | "turn_detection";
      }
    >
  | Message<
      "DeferredResponsesDropped",
      {
        /** The user items whose deferred responses will not start: the response after a barge-in answers them. */
        readonly itemIds: readonly ItemId[];
        readonly reason: "barge_in" | "turn_detected";
      }
    >
  | Message<
      "DeferredResponseRefused",
      {
        /** A server-VAD commit made this user item, but `max_pending_turns_per_session` responses already wait. */
        readonly itemId: ItemId;
        readonly code: "input_backpressure";
        readonly message: string;
      }
    >
  | Message<
      "ResponseStarted",
      {
        readonly responseId: ResponseId;
        readonly itemId: ItemId;
        readonly previousItemId: ItemId | null;
        readonly turnId: number;
        readonly metadata: Readonly<Record<string, unknown>> | null;
        readonly source: "model" | "client" | "turn_detection";
        readonly modalities: readonly ("audio" | "text")[];
        readonly instructions: string | null;
        /** `none`: an out-of-band response, outside the conversation (absent in older logs: `auto`). */
        readonly conversation?: "auto" | "none";
        /** The user item whose commit asked for this response, when one did (absent: none). */
        readonly inReplyTo?: ItemId;
        /** True when it was deferred: it starts the first of the session's deferred responses. */
        readonly deferred?: boolean;
        /**
         * True when the assistant message item waits for the first audio or text (`MessageStarted`), so that a
         * response that only calls tools carries no message (absent in older logs: the item opens with the response).
         */
        readonly messageLater?: boolean;
      }
    >
  | Message<
      "MessageStarted",
      {
        /** The response's assistant message item enters the response (and the conversation, when in-band). */
        readonly responseId: ResponseId;
        readonly itemId: ItemId;
        readonly previousItemId: ItemId | null;
        /** Its index in `response.output`: after the function calls made before it. */
        readonly outputIndex: number;
        /** The item of an out-of-band response: in no conversation (absent: in-band). */
        readonly outOfBand?: boolean;
      }
    >
  | Message<"ResponseSpoke", { readonly responseId: ResponseId; readonly itemId: ItemId }>
  | Message<
      "AudioDelivered",
      {
        readonly responseId: ResponseId;
        readonly itemId: ItemId;
        /** Mono audio in the session's output format (`format`, absent: PCM16) at `sampleRateHz` (bytes). */
        readonly audio: Uint8Array;
        readonly sampleRateHz: number;
        /** The encoding of `audio` when it is not PCM16 (absent in older logs and for PCM16). */
        readonly format?: AudioEncoding;
        readonly transcript: string;
        readonly durationMs: number;
        /** The cumulative mark after this delta. */
        readonly mark: AudioTextMark;
        readonly playback: PlaybackLedger;
        /** Engine clock (ms) of the response's first audio delta: the start of the playback estimate. */
        readonly firstDeltaAt: number;
      }
    >
  | Message<
      "ResponseEnded",
      {
        readonly responseId: ResponseId;
        readonly itemId: ItemId;
        readonly previousItemId: ItemId | null;
        readonly status: ResponseStatus;
        readonly reason: EndReason | null;
        readonly transcript: string;
        readonly spoke: boolean;
        readonly audioSent: boolean;
        readonly metadata: Readonly<Record<string, unknown>> | null;
        readonly playback: PlaybackLedger;
        readonly error: { readonly code: ErrorCode; readonly message: string } | null;
        /** The text part of a text-modality response, or null. */
        readonly text: string | null;
        readonly functionCalls: readonly FunctionCallItem[];
        /** An out-of-band response: its item is in no conversation (absent: in-band). */
        readonly outOfBand?: boolean;
        /** What the response was asked to contain (absent in older logs: judged by what it produced). */
        readonly modalities?: readonly ("audio" | "text")[];
        /** The message item's index in `response.output`, or null when the response only called tools (absent: 0). */
        readonly messageOutputIndex?: number | null;
      }
    >
  | Message<"TextStarted", { readonly responseId: ResponseId; readonly itemId: ItemId }>
  | Message<"TextDelivered", { readonly responseId: ResponseId; readonly itemId: ItemId; readonly delta: string }>
  | Message<
      "FunctionCallDelivered",
      {
        readonly responseId: ResponseId;
        readonly outputIndex: number;
        readonly previousItemId: ItemId | null;
        readonly call: FunctionCallItem;
        /** A call of an out-of-band response: in its output only, not in the conversation. */
        readonly outOfBand?: boolean;
      }
    >
  | Message<
      "MalformedFunctionCall",
      { readonly callId: string | null; readonly name: string | null; readonly arguments: string }
    >
  | Message<"InputTranscribed", { readonly itemId: ItemId; readonly transcript: string }>
  | Message<
      "InputTranscriptionFailed",
      { readonly itemId: ItemId; readonly code: TranscriptFailureCode; readonly message: string }
    >
  | Message<"InputTextAppended", { readonly text: string }>
  | Message<"ItemCreated", { readonly item: HistoryItem; readonly previousItemId: ItemId | null }>
  | Message<"ItemRetrieved", { readonly item: HistoryItem }>
  | Message<"ItemDeleted", { readonly itemId: ItemId }>
  | Message<"OutputAudioCleared", { readonly responseId: ResponseId | null }>
  | Message<
      "OverlapDecided",
      {
        readonly action: "drop" | "listen" | "barge_in";
        readonly reason: string;
        readonly policy: string;
        /** Speech overlapping the active response so far, ms. */
        readonly overlapMs: number;
        /**
         * Whether the client is told (`overlap.decision`): only when the action or its reason changes within a
         * response, so a client is not sent one event per silent append (absent in older logs: told).
         */
        readonly reported?: boolean;
        /** The chunk was `force_listen` (the wire's `force_listen: true`); absent: it was not. */
        readonly forceListen?: true;
      }
    >
  | Message<"RuntimeControlReported", { readonly signal: string; readonly supported: boolean; readonly detail: string }>
  /**
   * The session took a client's turn-taking signal (`barge_in`, or `turn.signal{event: "barge_in"}`; the newest
   * reference revision's `turn.event`): `source` names the command, `turnState` is the turn state after it.
   */
  | Message<
      "TurnSignalled",
      { readonly event: "barge_in"; readonly source: "barge_in" | "turn.signal"; readonly turnState: TurnState }
    >
  | Message<"EventsAcknowledged", { readonly seq: number }>
  | Message<
      "SessionResumed",
      {
        readonly attachmentGeneration: number;
        readonly resumeTokenSha256: string | null;
        readonly lastReceivedSeq: number;
        /** Why the socket before this one was detached, when its detach said (`SessionDetached.reason`). */
        readonly detachReason?: DetachReason;
        /**
         * The session as it stands at the resume, for `session.resumed.session` (the reference's newest revision):
         * its configuration and what the session object shows of its state. Absent in logs recorded before it.
         */
        readonly config?: SessionConfig;
        readonly view?: SessionSnapshot;
      }
    >
  | Message<
      "SessionDetached",
      {
        readonly attachmentGeneration: number;
        /** Why (absent: a restart or a move detached it, or a log written before reasons were recorded). */
        readonly reason?: DetachReason;
      }
    >
  | Message<
      "UtteranceResubmitted",
      {
        /**
         * The model-native lane's utterance the model had not answered when its runner lost its work (a restart, a
         * failed append): its logged audio, from `audioStartMs` to `audioEndMs` on the input clock (ms), goes to the
         * new runner again, so the user is answered as after a dropped socket. The client is told nothing.
         */
        readonly audioStartMs: number;
        readonly audioEndMs: number;
        /**
         * True for an utterance still in progress when the session moved (issue 33, part 2): its speech started before
         * the restart or takeover and had not stopped. Its audio so far, from `audioStartMs` (prefix padding included)
         * to `audioEndMs` (the input clock at the move), goes to the new runner now, and the rest of it follows live,
         * so the runner hears one utterance from its start. Absent: an utterance that ended (older logs too).
         */
        readonly inProgress?: true;
      }
    >
  | Message<
      "ModelListened",
      {
        readonly reason: string;
        /**
         * The precreated response the decision ends (its `ResponseEnded` follows), null when none was open; absent in
         * logs written before it was recorded (EarlierRules `listenNamesNoResponse`).
         */
        readonly responseId?: ResponseId | null;
      }
    >
  | Message<"EpochAdvanced", { readonly epoch: number; readonly reason: EndReason | "input_cancelled" }>
  | Message<
      "PlaybackAcknowledged",
      {
        readonly responseId: ResponseId;
        readonly itemId: ItemId;
        readonly playedMs: number;
        readonly committedMs: number;
        readonly truncate: boolean;
        readonly playback: PlaybackLedger;
        readonly historyCommitted: boolean;
      }
    >
  | Message<"ItemTruncated", { readonly itemId: ItemId; readonly contentIndex: number; readonly audioEndMs: number }>
  | Message<"HistoryCommitted", { readonly item: HistoryItem; readonly committedMs: number | null }>
  | Message<"HeartbeatAcknowledged", Record<string, never>>
  | Message<
      "RunnerFailed",
      {
        /** The runner call that broke its contract, or `stage` when the runner reported its stage lost. */
        readonly operation: RunnerOperation | "stage";
        readonly code: "runtime_data_plane_stream_failed" | StageLossCode;
        readonly message: string;
      }
    >
  | Message<"SessionClosed", { readonly reason: CloseReason }>;

export { type CloseReason, isExpiry } from "./close-reasons.ts";

export type DomainEventType = DomainEvent["type"];
