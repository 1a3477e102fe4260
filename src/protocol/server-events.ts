import { type Capabilities, type DomainEvent, ERROR_CODES, type ItemId, type SessionId } from "../domain/index.ts";
import { sessionObject } from "./session-object.ts";

/**
 * Renders server events (reference/realtime-duplex-api.md, "Server to client") from domain events. Pure: the
 * same domain events render the same JSON, which is what replay checks byte for byte. GA names for output;
 * `conversation.item.added` and `.created` both emitted. `event_id`, `server_event_seq` and `epoch` are stamped
 * by the wire projection.
 */
export type ServerEventBody = { readonly type: string } & Readonly<Record<string, unknown>>;

/** What rendering needs besides the event: the session's identity, learnt from `SessionCreated`. */
export interface RenderContext {
  readonly sessionId: SessionId;
  readonly capabilities: Capabilities;
  readonly epoch: number;
  readonly turnId: number;
}

/** Placeholder of the resume token in recorded wire events; the socket writer puts the real token there. */
export const REDACTED_RESUME_TOKEN = "<resume_token>";

const userItem = (id: ItemId): Record<string, unknown> => ({
  id,
  object: "realtime.item",
  type: "message",
  role: "user",
  status: "completed",
  content: [{ type: "input_audio", transcript: null }],
});

const assistantItem = (id: ItemId, status: string, transcript: string | null): Record<string, unknown> => ({
  id,
  object: "realtime.item",
  type: "message",
  role: "assistant",
  status,
  content: transcript === null ? [] : [{ type: "output_audio", transcript }],
});

/** An error event body with the envelope of BEHAVIOUR.md, "Errors". */
export const errorBody = (
  code: keyof typeof ERROR_CODES,
  message: string,
  clientEventId: string | null,
  param: string | null,
): ServerEventBody => ({
  type: "error",
  error: { type: ERROR_CODES[code].type, code, message, event_id: clientEventId, param },
});

/** The server events one domain event renders to, in order. */
export const renderServerEvents = (ctx: RenderContext, event: DomainEvent): ServerEventBody[] => {
  const sessionId = ctx.sessionId;
  switch (event.type) {
    case "SessionCreated":
      return [
        {
          type: "session.created",
          incarnation: 0,
          attachment_generation: event.data.attachmentGeneration,
          resume_token: event.data.resumeTokenSha256 === null ? null : REDACTED_RESUME_TOKEN,
          session: sessionObject({
            ...ctx,
            sessionId: event.data.sessionId,
            config: event.data.config,
            capabilities: event.data.capabilities,
          }),
        },
      ];
    case "SessionConfigured":
      return [{ type: "session.updated", session: sessionObject({ ...ctx, config: event.data.config }) }];
    case "RequestRejected":
      return [errorBody(event.data.code, event.data.message, event.data.clientEventId, event.data.param)];
    case "SpeechStarted":
      return [
        {
          type: "input_audio_buffer.speech_started",
          audio_start_ms: Math.round(event.data.audioStartMs),
          item_id: event.data.itemId,
        },
      ];
    case "SpeechStopped":
      return [
        {
          type: "input_audio_buffer.speech_stopped",
          audio_end_ms: Math.round(event.data.audioEndMs),
          item_id: event.data.itemId,
        },
      ];
    case "InputCleared":
      return [{ type: "input_audio_buffer.cleared" }];
    case "InputCommitted": {
      const { itemId, previousItemId } = event.data;
      const item = userItem(itemId);
      return [
        { type: "conversation.item.added", previous_item_id: previousItemId, item },
        { type: "conversation.item.created", previous_item_id: previousItemId, item },
        {
          type: "input_audio_buffer.committed",
          previous_item_id: previousItemId,
          item_id: itemId,
          event: {
            type: "input.committed",
            session_id: sessionId,
            turn_id: ctx.turnId,
            epoch: ctx.epoch,
            history_len: event.data.historyLength,
            audio_ms: Math.round(event.data.audioMs),
            realtime_item_id: itemId,
          },
        },
        { type: "conversation.item.done", previous_item_id: previousItemId, item },
      ];
    }
    case "ResponseStarted": {
      const { responseId, itemId, previousItemId } = event.data;
      const item = assistantItem(itemId, "in_progress", null);
      return [
        {
          type: "response.created",
          response_id: responseId,
          response: {
            id: responseId,
            object: "realtime.response",
            status: "in_progress",
            status_details: null,
            output: [],
            modalities: ["audio", "text"],
            output_modalities: ["audio"],
            conversation_id: sessionId,
            metadata: event.data.metadata ?? {
              duplex_event: {
                type: "response.created",
                session_id: sessionId,
                response_id: responseId,
                epoch: ctx.epoch,
                turn_id: event.data.turnId,
              },
            },
          },
        },
        { type: "conversation.item.added", previous_item_id: previousItemId, item },
        { type: "conversation.item.created", previous_item_id: previousItemId, item },
        { type: "response.output_item.added", response_id: responseId, output_index: 0, item },
      ];
    }
    case "ResponseSpoke": {
      const ids = { response_id: event.data.responseId, item_id: event.data.itemId, output_index: 0, content_index: 0 };
      return [
        { type: "response.speak", ...ids, metadata: { session_id: sessionId, epoch: ctx.epoch, model_speak: true } },
        { type: "response.content_part.added", ...ids, part: { type: "audio", transcript: "" } },
      ];
    }
    case "AudioDelivered": {
      const d = event.data;
      const ids = { response_id: d.responseId, item_id: d.itemId, output_index: 0, content_index: 0 };
      return [
        {
          type: "response.output_audio.delta",
          ...ids,
          delta: Buffer.from(d.audio.buffer, d.audio.byteOffset, d.audio.byteLength).toString("base64"),
          format: "pcm16",
          sample_rate_hz: d.sampleRateHz,
          metadata: {
            session_id: sessionId,
            epoch: ctx.epoch,
            model_speak: true,
            end_of_turn: false,
            audio_duration_ms: Math.floor(d.playback.generatedMs),
            audio_text_marks: [{ text_chars: d.mark.textChars, audio_end_ms: Math.floor(d.mark.audioEndMs) }],
            playback: roundLedger(d.playback),
          },
        },
        { type: "response.output_audio_transcript.delta", ...ids, delta: d.transcript },
      ];
    }
    case "ResponseEnded": {
      const d = event.data;
      const ids = { response_id: d.responseId, item_id: d.itemId, output_index: 0, content_index: 0 };
      const itemStatus = d.status === "completed" ? "completed" : "incomplete";
      const item = assistantItem(d.itemId, itemStatus, d.spoke ? d.transcript : null);
      const out: ServerEventBody[] = [];
      if (d.status === "cancelled" && d.audioSent)
        out.push({ type: "output_audio_buffer.cleared", response_id: d.responseId });
      if (d.spoke) {
        out.push(
          { type: "response.output_audio.done", ...ids },
          { type: "response.output_audio_transcript.done", ...ids, transcript: d.transcript },
          { type: "response.content_part.done", ...ids, part: { type: "audio", transcript: d.transcript } },
        );
      }
      const statusDetails =
        d.status === "completed"
          ? null
          : d.status === "cancelled"
            ? { type: "cancelled", reason: d.reason }
            : {
                type: "failed",
                reason: d.reason,
                error: d.error === null ? null : { type: "server_error", code: d.error.code, message: d.error.message },
              };
      out.push(
        { type: "response.output_item.done", response_id: d.responseId, output_index: 0, item },
        { type: "conversation.item.done", previous_item_id: null, item },
        {
          type: "response.done",
          response_id: d.responseId,
          response: {
            id: d.responseId,
            object: "realtime.response",
            status: d.status,
            status_details: statusDetails,
            output: [item],
            modalities: ["audio", "text"],
            output_modalities: ["audio"],
            conversation_id: sessionId,
            usage: null,
            metadata: d.metadata ?? {
              duplex_event: {
                type: "response.done",
                session_id: sessionId,
                response_id: d.responseId,
                epoch: ctx.epoch,
                playback: roundLedger(d.playback),
              },
            },
          },
        },
        { type: "rate_limits.updated", rate_limits: [] },
      );
      return out;
    }
    case "ModelListened":
      return [
        {
          type: "response.listen",
          session_id: sessionId,
          response: {
            object: "realtime.response",
            status: "listening",
            metadata: { type: "response.listen", session_id: sessionId, epoch: ctx.epoch, reason: event.data.reason },
          },
        },
      ];
    case "PlaybackAcknowledged": {
      const d = event.data;
      return [
        {
          type: "playback.acknowledged",
          event: {
            type: "playback.acknowledged",
            session_id: sessionId,
            epoch: ctx.epoch,
            response_id: d.responseId,
            item_id: d.itemId,
            played_ms: Math.floor(d.playedMs),
            committed_ms: Math.floor(d.committedMs),
            truncate: d.truncate,
            playback: roundLedger(d.playback),
            history_committed: d.historyCommitted,
          },
        },
      ];
    }
    case "ItemTruncated":
      return [
        {
          type: "conversation.item.truncated",
          item_id: event.data.itemId,
          content_index: event.data.contentIndex,
          audio_end_ms: Math.floor(event.data.audioEndMs),
        },
      ];
    case "HeartbeatAcknowledged":
      return [{ type: "session.heartbeat_ack", session_id: sessionId }];
    case "SessionClosed":
      return event.data.reason === "idle_ttl_expired" || event.data.reason === "disconnect_grace_expired"
        ? [{ type: "session.expired", session_id: sessionId, incarnation: 0, reason: event.data.reason }]
        : [{ type: "session.closed", session_id: sessionId, reason: event.data.reason }];
    case "AudioBuffered":
    case "EpochAdvanced":
    case "HistoryCommitted":
      return [];
    default: {
      const unhandled: never = event;
      throw new Error(`renderServerEvents: unhandled event ${JSON.stringify(unhandled)}`);
    }
  }
};

const roundLedger = (l: { generatedMs: number; sentMs: number; playedMs: number; committedMs: number }) => ({
  generated_ms: Math.floor(l.generatedMs),
  sent_ms: Math.floor(l.sentMs),
  played_ms: Math.floor(l.playedMs),
  committed_ms: Math.floor(l.committedMs),
});
