import {
  type Capabilities,
  type DomainEvent,
  ERROR_CODES,
  type ItemId,
  type ResponseId,
  type SessionId,
} from "../domain/index.ts";
import { functionCallItem, historyItemJson, messageItem, roundLedger, userItem } from "./items.ts";
import { renderResponseEnded } from "./response-events.ts";
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
  /** The active response's message item index in `response.output` (absent: 0), set by `MessageStarted`. */
  readonly messageOutputIndex?: number;
}

/**
 * A message item entering a response: `conversation.item.added` and `.created` (in-band only), then
 * `response.output_item.added` at `outputIndex`.
 */
const messageAdded = (
  responseId: ResponseId,
  itemId: ItemId,
  previousItemId: ItemId | null,
  outputIndex: number,
  outOfBand: boolean,
): ServerEventBody[] => {
  const item = messageItem(itemId, "in_progress", null, null);
  return [
    ...(outOfBand
      ? []
      : [
          { type: "conversation.item.added", previous_item_id: previousItemId, item },
          { type: "conversation.item.created", previous_item_id: previousItemId, item },
        ]),
    { type: "response.output_item.added", response_id: responseId, output_index: outputIndex, item },
  ];
};

/**
 * Placeholder of the resume token in recorded wire events; the socket writer puts the real token there
 * (DESIGN.md rule 4). A replayed event whose token is no longer current carries null instead.
 */
export const REDACTED_RESUME_TOKEN = "<resume_token>";

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
      return [
        {
          type: "session.updated",
          session: sessionObject({
            ...ctx,
            config: event.data.config,
            ...(event.data.view ? { view: event.data.view } : {}),
          }),
        },
      ];
    case "RequestRejected":
      return [errorBody(event.data.code, event.data.message, event.data.clientEventId, event.data.param)];
    case "SpeechStarted":
    case "SpeechAnnounced":
      return event.type === "SpeechStarted" && !event.data.announced
        ? []
        : [
            {
              type: "input_audio_buffer.speech_started",
              audio_start_ms: Math.round(event.data.audioStartMs),
              item_id: event.data.itemId,
            },
          ];
    case "SpeechStopped":
      return event.data.announced
        ? [
            {
              type: "input_audio_buffer.speech_stopped",
              audio_end_ms: Math.round(event.data.audioEndMs),
              item_id: event.data.itemId,
            },
          ]
        : [];
    case "InputCleared":
      return [{ type: "input_audio_buffer.cleared" }];
    case "InputCommitted": {
      const { itemId, previousItemId } = event.data;
      const item = userItem(itemId, event.data.audioMs > 0, event.data.text);
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
            response_create_deferred: event.data.responseDeferred ?? false,
            audio_ms: Math.round(event.data.audioMs),
            realtime_item_id: itemId,
          },
        },
        { type: "conversation.item.done", previous_item_id: previousItemId, item },
      ];
    }
    case "ResponseStarted": {
      const { responseId, itemId, previousItemId } = event.data;
      const outOfBand = event.data.conversation === "none";
      const created: ServerEventBody[] = [
        {
          type: "response.created",
          response_id: responseId,
          response: {
            id: responseId,
            object: "realtime.response",
            status: "in_progress",
            status_details: null,
            output: [],
            // GA output_modalities is audio (with its transcript) or text alone; beta modalities list both.
            modalities: (event.data.modalities ?? ["audio"]).includes("audio") ? ["audio", "text"] : ["text"],
            output_modalities: (event.data.modalities ?? ["audio"]).includes("audio") ? ["audio"] : ["text"],
            conversation_id: outOfBand ? null : sessionId,
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
      ];
      // Logs recorded before MessageStarted existed open the message item with the response.
      if (event.data.messageLater !== true)
        created.push(...messageAdded(responseId, itemId, previousItemId, 0, outOfBand));
      return created;
    }
    case "MessageStarted": {
      const d = event.data;
      return messageAdded(d.responseId, d.itemId, d.previousItemId, d.outputIndex, d.outOfBand === true);
    }
    case "ResponseSpoke": {
      const ids = {
        response_id: event.data.responseId,
        item_id: event.data.itemId,
        output_index: ctx.messageOutputIndex ?? 0,
        content_index: 0,
      };
      return [
        { type: "response.speak", ...ids, metadata: { session_id: sessionId, epoch: ctx.epoch, model_speak: true } },
        { type: "response.content_part.added", ...ids, part: { type: "audio", transcript: "" } },
      ];
    }
    case "AudioDelivered": {
      const d = event.data;
      const ids = {
        response_id: d.responseId,
        item_id: d.itemId,
        output_index: ctx.messageOutputIndex ?? 0,
        content_index: 0,
      };
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
    case "ResponseEnded":
      return renderResponseEnded(ctx, event.data);
    case "TextStarted":
      return [
        {
          type: "response.content_part.added",
          response_id: event.data.responseId,
          item_id: event.data.itemId,
          output_index: ctx.messageOutputIndex ?? 0,
          content_index: 0,
          part: { type: "text", text: "" },
        },
      ];
    case "TextDelivered":
      return [
        {
          type: "response.output_text.delta",
          response_id: event.data.responseId,
          item_id: event.data.itemId,
          output_index: ctx.messageOutputIndex ?? 0,
          content_index: 0,
          delta: event.data.delta,
        },
      ];
    case "FunctionCallDelivered": {
      const { call, responseId, outputIndex, previousItemId } = event.data;
      const item = functionCallItem(call.itemId, call.callId, call.name, call.arguments);
      const ids = { response_id: responseId, item_id: call.itemId, output_index: outputIndex, call_id: call.callId };
      const inConversation = event.data.outOfBand !== true;
      return [
        {
          type: "response.output_item.added",
          response_id: responseId,
          output_index: outputIndex,
          item: { ...item, status: "in_progress", arguments: "" },
        },
        ...(inConversation
          ? [
              { type: "conversation.item.added", previous_item_id: previousItemId, item },
              { type: "conversation.item.created", previous_item_id: previousItemId, item },
            ]
          : []),
        { type: "response.function_call_arguments.delta", ...ids, delta: call.arguments },
        { type: "response.function_call_arguments.done", ...ids, name: call.name, arguments: call.arguments },
        { type: "response.output_item.done", response_id: responseId, output_index: outputIndex, item },
        ...(inConversation ? [{ type: "conversation.item.done", previous_item_id: previousItemId, item }] : []),
      ];
    }
    case "MalformedFunctionCall":
      return [
        {
          type: "duplex.function_call.done",
          event: {
            type: "function_call.done",
            session_id: sessionId,
            epoch: ctx.epoch,
            call_id: event.data.callId,
            name: event.data.name,
            arguments: event.data.arguments,
          },
        },
      ];
    case "InputTranscribed":
      return [
        {
          type: "conversation.item.input_audio_transcription.completed",
          item_id: event.data.itemId,
          content_index: 0,
          transcript: event.data.transcript,
        },
      ];
    case "InputTranscriptionFailed":
      // OpenAI's event for a user item that got no transcript; `error` has the envelope of BEHAVIOUR.md, "Errors".
      return [
        {
          type: "conversation.item.input_audio_transcription.failed",
          item_id: event.data.itemId,
          content_index: 0,
          error: {
            type: ERROR_CODES[event.data.code].type,
            code: event.data.code,
            message: event.data.message,
            param: null,
          },
        },
      ];
    case "ItemCreated": {
      const item = historyItemJson(event.data.item);
      const previous = event.data.previousItemId;
      return [
        { type: "conversation.item.added", previous_item_id: previous, item },
        { type: "conversation.item.created", previous_item_id: previous, item },
        { type: "conversation.item.done", previous_item_id: previous, item },
      ];
    }
    case "ItemRetrieved":
      return [{ type: "conversation.item.retrieved", item: historyItemJson(event.data.item) }];
    case "ItemDeleted":
      return [
        {
          type: "conversation.item.deleted",
          item_id: event.data.itemId,
          event: { type: "conversation.item.deleted", session_id: sessionId, item_id: event.data.itemId },
        },
      ];
    case "OutputAudioCleared":
      return [{ type: "output_audio_buffer.cleared", response_id: event.data.responseId }];
    case "OverlapDecided":
      if (event.data.reported === false) return [];
      return [
        {
          type: "overlap.decision",
          session_id: sessionId,
          policy: event.data.policy,
          action: event.data.action,
          reason: event.data.reason,
          overlap_ms: Math.round(event.data.overlapMs),
          buffer_audio: true,
        },
      ];
    case "RuntimeControlReported":
      return [
        {
          type: "runtime.control",
          session_id: sessionId,
          result: { signal: event.data.signal, supported: event.data.supported, detail: event.data.detail },
        },
      ];
    case "SessionResumed":
      return [
        {
          type: "session.resumed",
          session_id: sessionId,
          incarnation: 0,
          attachment_generation: event.data.attachmentGeneration,
          resume_token: event.data.resumeTokenSha256 === null ? null : REDACTED_RESUME_TOKEN,
          // Why the last socket was let go of (ours, issue 33, part 3): a slow reader learns it was cut for that.
          ...(event.data.detachReason === undefined ? {} : { detach_reason: event.data.detachReason }),
        },
      ];
    case "InputTextAppended":
    case "EventsAcknowledged":
    case "SessionDetached":
    case "UtteranceResubmitted":
      return [];
    case "ModelListened": {
      // The response the decision ends, when it ends a precreated one (reference, "Server events": response_id at
      // the top level, a response.done with the same id follows); logs of earlier releases name none.
      const responseId = event.data.responseId ?? null;
      const metadata = { type: "response.listen", session_id: sessionId, epoch: ctx.epoch, reason: event.data.reason };
      return [
        {
          type: "response.listen",
          session_id: sessionId,
          ...(responseId === null ? {} : { response_id: responseId }),
          response: {
            object: "realtime.response",
            ...(responseId === null ? {} : { id: responseId }),
            status: "listening",
            metadata,
          },
        },
      ];
    }
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
          event: {
            type: "conversation.item.truncated",
            session_id: sessionId,
            item_id: event.data.itemId,
            content_index: event.data.contentIndex,
            audio_end_ms: Math.floor(event.data.audioEndMs),
          },
        },
      ];
    case "HeartbeatAcknowledged":
      return [{ type: "session.heartbeat_ack", session_id: sessionId }];
    case "RunnerFailed":
    case "DeferredResponseRefused":
      return [errorBody(event.data.code, event.data.message, null, null)];
    case "SessionClosed":
      return event.data.reason === "idle_ttl_expired" || event.data.reason === "disconnect_grace_expired"
        ? [{ type: "session.expired", session_id: sessionId, incarnation: 0, reason: event.data.reason }]
        : [{ type: "session.closed", session_id: sessionId, reason: event.data.reason }];
    case "AudioBuffered":
    case "EpochAdvanced":
    case "HistoryCommitted":
    // The response after the barge-in answers the dropped turns: their items are in history, nothing else shows.
    case "DeferredResponsesDropped":
      return [];
    default: {
      const unhandled: never = event;
      throw new Error(`renderServerEvents: unhandled event ${JSON.stringify(unhandled)}`);
    }
  }
};
