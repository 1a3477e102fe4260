import type { AudioFormat, SessionPatch, ToolChoice, ToolDefinition } from "./config.ts";
import type { ErrorCode } from "./errors.ts";
import type { ItemId, ResponseId } from "./ids.ts";

/**
 * Client commands, as the codec decodes them from client events (reference/realtime-duplex-api.md,
 * "Client to server"). `eventId` is the client's `event_id`, echoed in an error that rejects the command.
 * Audio is PCM16 mono at the runner's input rate, converted by the engine before it is recorded.
 */
export type Command =
  | SessionUpdate
  | AudioAppend
  | AudioCommit
  | AudioClear
  | ResponseCreate
  | ResponseCancel
  | PlaybackAck
  | ItemTruncate
  | SessionHeartbeat
  | SessionClose
  | SessionEventAck
  | InputCancel
  | InputTextAppend
  | ItemCreate
  | ItemRetrieve
  | ItemDelete
  | OutputAudioClear
  | BargeIn
  | TurnSignal
  | InvalidFrame;

interface Base<T extends string> {
  readonly type: T;
  readonly eventId: string | null;
}

export interface SessionUpdate extends Base<"session.update"> {
  readonly patch: SessionPatch;
}

/**
 * The decisions of a client's own VAD for one append (the duplex extension's `vad` object: reference, "the annotated
 * append"). Each field is null where the client did not send it. `speechStarted` / `speechStopped` are edges at this
 * chunk's start / end; `speechActive` and `isSpeech` say whether the chunk is speech; `speechProbability` is 0..1.
 */
export interface ClientVad {
  /** The client's VAD, as it names it (`silero`, `webrtc`, ...; up to 64 characters), or null. */
  readonly backend: string | null;
  readonly isSpeech: boolean | null;
  readonly speechActive: boolean | null;
  readonly speechStarted: boolean | null;
  readonly speechStopped: boolean | null;
  readonly speechProbability: number | null;
}

/** `input_audio_buffer.append`. `vad` holds the Silero probability of each 32 ms frame this append completed. */
export interface AudioAppend extends Base<"input_audio_buffer.append"> {
  /** PCM16 little-endian mono at the runner's input rate (bytes). */
  readonly audio: Uint8Array;
  /** Client hint: `is_speech` of the duplex extension, or null. */
  readonly isSpeech: boolean | null;
  /** VAD probabilities (0..1) of the frames this append completed, computed by the engine. */
  readonly vad: readonly number[];
  /** RMS of the append, 0..1 of full scale. */
  readonly rms: number;
  /**
   * Camera frames riding the append (`video_frames`: JPEG or PNG bytes), kept only where the model consumes video
   * (`capabilities.supports_video`); elsewhere they are ignored, as the reference says, and absent here.
   */
  readonly videoFrames?: readonly Uint8Array[];
  /**
   * The client's own VAD decisions (`vad`), which take the place of the server's for this chunk; absent when it sent
   * none (and in every log recorded before they were read), so the server's VAD decides.
   */
  readonly clientVad?: ClientVad;
  /** `force_listen: true`: the model listens through this chunk; no barge-in or model turn starts on it. Absent: false. */
  readonly forceListen?: true;
}

export interface AudioCommit extends Base<"input_audio_buffer.commit"> {
  /** `response_create` / `create_response` of the commit, or null to follow the session. */
  readonly createResponse: boolean | null;
  /**
   * `is_speech: false` (the duplex extension, "silence/noise declaration"): the client says the buffered audio is
   * not speech. Its audio is dropped unheard and the session answers `response.listen` (absent: a commit).
   */
  readonly declaredSilence?: true;
}

export type AudioClear = Base<"input_audio_buffer.clear">;

/**
 * `response.create`. Every per-response field is null (or absent, in logs recorded before it existed) to follow the
 * session (OpenAI Realtime, "response.create").
 */
export interface ResponseCreate extends Base<"response.create"> {
  /** `response.metadata`, echoed in `response.created` and `response.done`. */
  readonly metadata: Readonly<Record<string, unknown>> | null;
  readonly instructions: string | null;
  /** Per-response `modalities` / `output_modalities`, or null for the session's. */
  readonly modalities: readonly ("audio" | "text")[] | null;
  /**
   * `response.conversation`: `none` makes an out-of-band response, generated outside the conversation: no
   * `conversation.item.*` events, not in history, never a `previous_item_id`.
   */
  readonly conversation?: "auto" | "none";
  /** `response.input`: the items the response answers instead of the conversation, or null for the conversation. */
  readonly input?: readonly ResponseInputItem[] | null;
  readonly tools?: readonly ToolDefinition[] | null;
  readonly toolChoice?: ToolChoice | null;
  readonly temperature?: number | null;
  /** `max_output_tokens` / `max_response_output_tokens` of this response. */
  readonly maxOutputTokens?: number | "inf" | null;
  /**
   * `response.voice` / `response.audio.output.voice`, when the client gave one (absent otherwise, and in logs recorded
   * before it was read): it must be the session's voice (`responseCreateRefusal`).
   */
  readonly voice?: string | null;
  /** `response.output_audio_format` / `response.audio.output.format`, parsed, when given: it must be the session's. */
  readonly outputAudio?: AudioFormat;
}

/** One entry of `response.input`: an item given in full, or a reference to an item of the conversation. */
export type ResponseInputItem = ItemCreate["item"] | { readonly type: "item_reference"; readonly id: ItemId };

export interface ResponseCancel extends Base<"response.cancel"> {
  readonly responseId: ResponseId | null;
}

/** `playback.ack`: cumulative positions in ms of the response's audio. */
export interface PlaybackAck extends Base<"playback.ack"> {
  readonly responseId: ResponseId | null;
  readonly itemId: ItemId | null;
  readonly playedMs: number;
  readonly committedMs: number | null;
  readonly truncate: boolean;
}

/** `conversation.item.truncate` at `audioEndMs` (ms of the item's audio). */
export interface ItemTruncate extends Base<"conversation.item.truncate"> {
  readonly itemId: ItemId;
  readonly contentIndex: number;
  readonly audioEndMs: number;
}

export type SessionHeartbeat = Base<"session.heartbeat">;
export type SessionClose = Base<"session.close">;

/** `session.event_ack`: the client holds every server event up to `seq`. */
export interface SessionEventAck extends Base<"session.event_ack"> {
  readonly seq: number;
  /** The last `server_event_seq` sent when the ack arrived, stamped by the engine before it is recorded. */
  readonly headSeq: number;
}

/** `input.cancel`: drops pending input and advances the epoch. */
export type InputCancel = Base<"input.cancel">;

/** `input.text.append`: text for the open input item. */
export interface InputTextAppend extends Base<"input.text.append"> {
  readonly text: string;
}

/** One content part of an item the client creates. */
export type ItemContent =
  | { readonly type: "input_text" | "text" | "output_text"; readonly text: string }
  | {
      readonly type: "input_audio" | "output_audio" | "audio";
      readonly transcript: string | null;
      readonly audioMs: number;
    };

/** `conversation.item.create`: a message, or the output of a function call. */
export interface ItemCreate extends Base<"conversation.item.create"> {
  readonly previousItemId: ItemId | null;
  /** The client's id for the item, or null to let the server derive one. */
  readonly itemId: ItemId | null;
  readonly item:
    | {
        readonly type: "message";
        readonly role: "user" | "assistant" | "system";
        readonly content: readonly ItemContent[];
      }
    | { readonly type: "function_call_output"; readonly callId: string; readonly output: string }
    /** A call the model made earlier (a client restoring a conversation, or a model server being given one). */
    | { readonly type: "function_call"; readonly callId: string; readonly name: string; readonly arguments: string };
}

export interface ItemRetrieve extends Base<"conversation.item.retrieve"> {
  readonly itemId: ItemId;
}

export interface ItemDelete extends Base<"conversation.item.delete"> {
  readonly itemId: ItemId;
}

/** `output_audio_buffer.clear`: discard queued output audio, cancelling the active response. */
export type OutputAudioClear = Base<"output_audio_buffer.clear">;

/** `barge_in`: an explicit hard interrupt; needs `supports_barge_in`. */
export type BargeIn = Base<"barge_in">;

/** `turn.signal`: an external turn-taking signal; `event: "barge_in"` is a barge-in. */
export interface TurnSignal extends Base<"turn.signal"> {
  readonly event: string;
  readonly payload: Readonly<Record<string, unknown>> | null;
}

/** A frame the codec could not decode: it is recorded so the log shows it, and rejected with its code. */
export interface InvalidFrame extends Base<"invalid"> {
  readonly code: ErrorCode;
  readonly message: string;
  readonly param: string | null;
  /** The client event's `type`, when the frame had one. */
  readonly eventType: string | null;
}
