import type { SessionPatch } from "./config.ts";
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
  | InvalidFrame;

interface Base<T extends string> {
  readonly type: T;
  readonly eventId: string | null;
}

export interface SessionUpdate extends Base<"session.update"> {
  readonly patch: SessionPatch;
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
}

export interface AudioCommit extends Base<"input_audio_buffer.commit"> {
  /** `response_create` / `create_response` of the commit, or null to follow the session. */
  readonly createResponse: boolean | null;
}

export type AudioClear = Base<"input_audio_buffer.clear">;

export interface ResponseCreate extends Base<"response.create"> {
  /** `response.metadata`, echoed in `response.created` and `response.done`. */
  readonly metadata: Readonly<Record<string, unknown>> | null;
  readonly instructions: string | null;
}

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

/** A frame the codec could not decode: it is recorded so the log shows it, and rejected with its code. */
export interface InvalidFrame extends Base<"invalid"> {
  readonly code: ErrorCode;
  readonly message: string;
  readonly param: string | null;
  /** The client event's `type`, when the frame had one. */
  readonly eventType: string | null;
}
