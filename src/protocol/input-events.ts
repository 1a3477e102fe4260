/**
 * The input flow's server events: `input_audio_buffer.speech_started`, `.speech_stopped`, `.cleared`, `.committed`
 * (with the user item's `conversation.item.*`), the user item's transcript, and `response.listen` of the
 * model-native lane (reference/realtime-duplex-api.md, "Server to client").
 */
import { ERROR_CODES } from "../domain/index.ts";
import { userItem } from "./items.ts";
import { type DomainEventOf, type FlowRenderers, type RenderContext, renderNothing } from "./render-context.ts";
import type { ServerEvent } from "./server-event.ts";

/** `input_audio_buffer.speech_started`: when the endpointer announces the speech (at its start or later). */
const speechStarted = (
  _ctx: RenderContext,
  event: DomainEventOf<"SpeechStarted"> | DomainEventOf<"SpeechAnnounced">,
): ServerEvent[] =>
  event.type === "SpeechStarted" && !event.data.announced
    ? []
    : [
        {
          type: "input_audio_buffer.speech_started",
          audio_start_ms: Math.round(event.data.audioStartMs),
          item_id: event.data.itemId,
        },
      ];

export const INPUT_RENDERERS = {
  SpeechStarted: speechStarted,
  SpeechAnnounced: speechStarted,
  SpeechStopped: (_ctx, event) =>
    event.data.announced
      ? [
          {
            type: "input_audio_buffer.speech_stopped",
            audio_end_ms: Math.round(event.data.audioEndMs),
            item_id: event.data.itemId,
          },
        ]
      : [],
  InputCleared: () => [{ type: "input_audio_buffer.cleared" }],
  InputCommitted: (ctx, event) => {
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
          session_id: ctx.sessionId,
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
  },
  InputTranscribed: (_ctx, event) => [
    {
      type: "conversation.item.input_audio_transcription.completed",
      item_id: event.data.itemId,
      content_index: 0,
      transcript: event.data.transcript,
    },
  ],
  // OpenAI's event for a user item that got no transcript; `error` has the envelope of BEHAVIOUR.md, "Errors".
  InputTranscriptionFailed: (_ctx, event) => [
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
  ],
  ModelListened: (ctx, event) => {
    // The response the decision ends, when it ends a precreated one (reference, "Server events": response_id at
    // the top level, a response.done with the same id follows); logs of earlier releases name none.
    const responseId = event.data.responseId ?? null;
    const metadata = {
      type: "response.listen",
      session_id: ctx.sessionId,
      epoch: ctx.epoch,
      reason: event.data.reason,
    };
    return [
      {
        type: "response.listen",
        session_id: ctx.sessionId,
        ...(responseId === null ? {} : { response_id: responseId }),
        response: {
          object: "realtime.response",
          ...(responseId === null ? {} : { id: responseId }),
          status: "listening",
          metadata,
        },
      },
    ];
  },
  InputTextAppended: renderNothing,
  UtteranceResubmitted: renderNothing,
  AudioBuffered: renderNothing,
  // The response after the barge-in answers the dropped turns: their items are in history, nothing else shows.
  DeferredResponsesDropped: renderNothing,
} satisfies FlowRenderers;
