/**
 * The server events the renderer emits (reference/realtime-duplex-api.md, "Server to client"), as one union
 * discriminated by `type`: OpenAI's Realtime events under their GA names (the openai SDK's
 * `resources/realtime` types name the same fields) and ours (`response.speak`, `response.listen`,
 * `playback.acknowledged`, `overlap.decision`, `runtime.control`, `session.resumed`, `session.expired`,
 * `session.closed`, `session.heartbeat_ack`, `duplex.function_call.done`). Bodies only: the wire projection stamps
 * `event_id`, `server_event_seq` and `epoch`. Items, the session object and metadata stay JSON objects here (their
 * shapes are items.ts's and session-object.ts's). Every member is assignable to `ServerEventBody`.
 */
import type { ItemId, ResponseId, SessionId } from "../domain/index.ts";

/** A conversation item as items.ts renders it. */
type ItemJson = Readonly<Record<string, unknown>>;
/** A JSON object (session object, metadata, playback ledger, duplex event). */
type JsonObject = Readonly<Record<string, unknown>>;

/** The ids of a content part in a response's output: `output_index` in `response.output`, ms nowhere. */
type ContentIds = {
  readonly response_id: ResponseId;
  readonly item_id: ItemId;
  readonly output_index: number;
  readonly content_index: number;
};
type CallIds = {
  readonly response_id: ResponseId;
  readonly item_id: ItemId;
  readonly output_index: number;
  readonly call_id: string;
};
type ItemEvent<T extends string> = {
  readonly type: T;
  readonly previous_item_id: ItemId | null;
  readonly item: ItemJson;
};
type ErrorEnvelope = {
  readonly type: string;
  readonly code: string;
  readonly message: string;
  readonly event_id?: string | null;
  readonly param: string | null;
};
/** `response` of `response.created` and `response.done` (OpenAI's RealtimeResponse). */
type ResponseJson = {
  readonly id: ResponseId;
  readonly object: "realtime.response";
  readonly status: string;
  readonly status_details: JsonObject | null;
  readonly output: readonly ItemJson[];
  readonly modalities: readonly string[];
  readonly output_modalities: readonly string[];
  readonly conversation_id: SessionId | null;
  readonly usage?: null;
  readonly metadata: JsonObject;
};

export type ServerEvent =
  | { readonly type: "error"; readonly error: ErrorEnvelope }
  | {
      readonly type: "session.created";
      readonly incarnation: number;
      readonly attachment_generation: number;
      readonly resume_token: string | null;
      readonly session: JsonObject;
    }
  | { readonly type: "session.updated"; readonly session: JsonObject }
  | {
      readonly type: "session.resumed";
      readonly session_id: SessionId;
      readonly incarnation: number;
      readonly attachment_generation: number;
      readonly resume_token: string | null;
      readonly detach_reason?: string;
    }
  | {
      readonly type: "session.expired";
      readonly session_id: SessionId;
      readonly incarnation: number;
      readonly reason: string;
    }
  | {
      readonly type: "session.closed";
      readonly session_id: SessionId;
      readonly reason: string;
      readonly event: {
        readonly type: "session.closed";
        readonly session_id: SessionId;
        readonly epoch: number;
        readonly reason: string;
      };
    }
  | { readonly type: "session.heartbeat_ack"; readonly session_id: SessionId }
  | { readonly type: "runtime.control"; readonly session_id: SessionId; readonly result: JsonObject }
  | { readonly type: "turn.event"; readonly session_id: SessionId; readonly event: string; readonly turn_state: string }
  | { readonly type: "input_audio_buffer.speech_started"; readonly audio_start_ms: number; readonly item_id: ItemId }
  | { readonly type: "input_audio_buffer.speech_stopped"; readonly audio_end_ms: number; readonly item_id: ItemId }
  | { readonly type: "input_audio_buffer.cleared" }
  | {
      readonly type: "input_audio_buffer.committed";
      readonly previous_item_id: ItemId | null;
      readonly item_id: ItemId;
      readonly event: JsonObject;
    }
  | ItemEvent<"conversation.item.added">
  | ItemEvent<"conversation.item.created">
  | ItemEvent<"conversation.item.done">
  | { readonly type: "conversation.item.retrieved"; readonly item: ItemJson }
  | { readonly type: "conversation.item.deleted"; readonly item_id: ItemId; readonly event: JsonObject }
  | {
      readonly type: "conversation.item.truncated";
      readonly item_id: ItemId;
      readonly content_index: number;
      readonly audio_end_ms: number;
      readonly event: JsonObject;
    }
  | {
      readonly type: "conversation.item.input_audio_transcription.completed";
      readonly item_id: ItemId;
      readonly content_index: number;
      readonly transcript: string;
    }
  | {
      readonly type: "conversation.item.input_audio_transcription.failed";
      readonly item_id: ItemId;
      readonly content_index: number;
      readonly error: ErrorEnvelope;
    }
  | { readonly type: "response.created"; readonly response_id: ResponseId; readonly response: ResponseJson }
  | { readonly type: "response.done"; readonly response_id: ResponseId; readonly response: ResponseJson }
  | {
      readonly type: "response.listen";
      readonly session_id: SessionId;
      readonly response_id?: ResponseId;
      readonly response: JsonObject;
    }
  | {
      readonly type: "response.output_item.added" | "response.output_item.done";
      readonly response_id: ResponseId;
      readonly output_index: number;
      readonly item: ItemJson;
    }
  | (ContentIds & { readonly type: "response.speak"; readonly metadata: JsonObject })
  | (ContentIds & {
      readonly type: "response.content_part.added" | "response.content_part.done";
      readonly part: JsonObject;
    })
  | (ContentIds & {
      readonly type: "response.output_audio.delta";
      /** Base64 of the audio bytes in the session's output format. */
      readonly delta: string;
      readonly format: "pcm16";
      readonly sample_rate_hz: number;
      readonly metadata: JsonObject;
    })
  | (ContentIds & { readonly type: "response.output_audio.done" })
  | (ContentIds & { readonly type: "response.output_audio_transcript.delta"; readonly delta: string })
  | (ContentIds & { readonly type: "response.output_audio_transcript.done"; readonly transcript: string })
  | (ContentIds & { readonly type: "response.output_text.delta"; readonly delta: string })
  | (ContentIds & { readonly type: "response.output_text.done"; readonly text: string })
  | (CallIds & { readonly type: "response.function_call_arguments.delta"; readonly delta: string })
  | (CallIds & {
      readonly type: "response.function_call_arguments.done";
      readonly name: string;
      readonly arguments: string;
    })
  | { readonly type: "duplex.function_call.done"; readonly event: JsonObject }
  | { readonly type: "output_audio_buffer.cleared"; readonly response_id: ResponseId | null }
  | { readonly type: "rate_limits.updated"; readonly rate_limits: readonly JsonObject[] }
  | { readonly type: "playback.acknowledged"; readonly event: JsonObject }
  | {
      readonly type: "overlap.decision";
      readonly session_id: SessionId;
      readonly policy: string;
      readonly action: string;
      readonly reason: string;
      readonly overlap_ms: number;
      readonly buffer_audio: boolean;
      /** Present (true) when the chunk was `force_listen`. */
      readonly force_listen?: true;
      /** The same details again (the newest reference revision's place for them). */
      readonly metadata: JsonObject;
    };

/** Every server event type the renderer emits. */
export type ServerEventType = ServerEvent["type"];
