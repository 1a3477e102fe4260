/**
 * The response flow's server events (reference/realtime-duplex-api.md, "Response lifecycle"): `response.created`,
 * the message item's `output_item.added`, `response.speak`, the audio, transcript and text deltas, function calls,
 * the end of a response with its `*.done` events, `overlap.decision` during barge-in, and the errors of a failed
 * runner or a refused deferred response.
 */
import type { ItemId, ResponseId } from "../domain/index.ts";
import { errorBody } from "./error-events.ts";
import { functionCallItem, messageItem, roundLedger } from "./items.ts";
import type { DomainEventOf, FlowRenderers, RenderContext } from "./render-context.ts";
import type { ServerEvent } from "./server-event.ts";

type Ended = DomainEventOf<"ResponseEnded">["data"];

/**
 * The end of a response (reference/realtime-duplex-api.md, "Response lifecycle"; BEHAVIOUR.md, "Barge-in and cancel
 * are atomic"): `output_audio_buffer.cleared` when cancelled audio was sent, the `*.done` events of its audio and
 * text parts, `output_item.done`, `conversation.item.done`, `response.done` (with the client's metadata echoed, or
 * the duplex event) and `rate_limits.updated`.
 */
export const renderResponseEnded = (ctx: RenderContext, d: Ended): ServerEvent[] => {
  const sessionId = ctx.sessionId;
  // Older logs lack the index: their message item was always the first output.
  const messageIndex = d.messageOutputIndex === undefined ? 0 : d.messageOutputIndex;
  const ids = { response_id: d.responseId, item_id: d.itemId, output_index: messageIndex ?? 0 };
  const itemStatus = d.status === "completed" ? "completed" : "incomplete";
  // A text-only response shows its text part even when it produced none (as history holds it).
  const textOnly = d.modalities !== undefined ? !d.modalities.includes("audio") : d.text !== null && !d.spoke;
  const item = messageItem(d.itemId, itemStatus, d.spoke ? d.transcript : null, textOnly ? (d.text ?? "") : d.text);
  const out: ServerEvent[] = [];
  if (d.status === "cancelled" && d.audioSent)
    out.push({ type: "output_audio_buffer.cleared", response_id: d.responseId });
  if (d.spoke) {
    const audioIds = { ...ids, content_index: 0 };
    out.push(
      { type: "response.output_audio.done", ...audioIds },
      { type: "response.output_audio_transcript.done", ...audioIds, transcript: d.transcript },
      { type: "response.content_part.done", ...audioIds, part: { type: "audio", transcript: d.transcript } },
    );
  }
  if (d.text !== null) {
    const textIds = { ...ids, content_index: d.spoke ? 1 : 0 };
    out.push(
      { type: "response.output_text.done", ...textIds, text: d.text },
      { type: "response.content_part.done", ...textIds, part: { type: "text", text: d.text } },
    );
  }
  const statusDetails =
    d.status === "completed"
      ? null
      : d.status === "cancelled" || d.status === "incomplete"
        ? { type: d.status, reason: d.reason }
        : {
            type: "failed",
            reason: d.reason,
            error: d.error === null ? null : { type: "server_error", code: d.error.code, message: d.error.message },
          };
  const calls = d.functionCalls.map((c) => functionCallItem(c.itemId, c.callId, c.name, c.arguments));
  // A response that only called tools has no message item: its output is the calls alone.
  const output = messageIndex === null ? calls : [...calls.slice(0, messageIndex), item, ...calls.slice(messageIndex)];
  if (messageIndex !== null) {
    out.push({ type: "response.output_item.done", response_id: d.responseId, output_index: messageIndex, item });
    // An out-of-band response's item is in no conversation: no conversation.item.* event names it.
    if (d.outOfBand !== true) out.push({ type: "conversation.item.done", previous_item_id: d.previousItemId, item });
  }
  out.push(
    {
      type: "response.done",
      response_id: d.responseId,
      response: {
        id: d.responseId,
        object: "realtime.response",
        status: d.status,
        status_details: statusDetails,
        output,
        modalities: textOnly ? ["text"] : ["audio", "text"],
        output_modalities: textOnly ? ["text"] : ["audio"],
        conversation_id: d.outOfBand === true ? null : sessionId,
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
};

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
): ServerEvent[] => {
  const item = messageItem(itemId, "in_progress", null, null);
  const inConversation: ServerEvent[] = outOfBand
    ? []
    : [
        { type: "conversation.item.added", previous_item_id: previousItemId, item },
        { type: "conversation.item.created", previous_item_id: previousItemId, item },
      ];
  return [
    ...inConversation,
    { type: "response.output_item.added", response_id: responseId, output_index: outputIndex, item },
  ];
};

/** `response.created`, and the message item with it for logs recorded before `MessageStarted` existed. */
const renderResponseStarted = (ctx: RenderContext, event: DomainEventOf<"ResponseStarted">): ServerEvent[] => {
  const sessionId = ctx.sessionId;
  const { responseId, itemId, previousItemId } = event.data;
  const outOfBand = event.data.conversation === "none";
  const created: ServerEvent[] = [
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
  if (event.data.messageLater !== true) created.push(...messageAdded(responseId, itemId, previousItemId, 0, outOfBand));
  return created;
};

/** A function call, whole: its item added, its arguments' delta and done, the item done. */
const renderFunctionCall = (event: DomainEventOf<"FunctionCallDelivered">): ServerEvent[] => {
  const { call, responseId, outputIndex, previousItemId } = event.data;
  const item = functionCallItem(call.itemId, call.callId, call.name, call.arguments);
  const ids = { response_id: responseId, item_id: call.itemId, output_index: outputIndex, call_id: call.callId };
  const inConversation = event.data.outOfBand !== true;
  const added: ServerEvent[] = inConversation
    ? [
        { type: "conversation.item.added", previous_item_id: previousItemId, item },
        { type: "conversation.item.created", previous_item_id: previousItemId, item },
      ]
    : [];
  const done: ServerEvent[] = inConversation
    ? [{ type: "conversation.item.done", previous_item_id: previousItemId, item }]
    : [];
  return [
    {
      type: "response.output_item.added",
      response_id: responseId,
      output_index: outputIndex,
      item: { ...item, status: "in_progress", arguments: "" },
    },
    ...added,
    { type: "response.function_call_arguments.delta", ...ids, delta: call.arguments },
    { type: "response.function_call_arguments.done", ...ids, name: call.name, arguments: call.arguments },
    { type: "response.output_item.done", response_id: responseId, output_index: outputIndex, item },
    ...done,
  ];
};

/** The ids of the active response's message content part at `content_index` 0. */
const contentIds = (ctx: RenderContext, responseId: ResponseId, itemId: ItemId) => ({
  response_id: responseId,
  item_id: itemId,
  output_index: ctx.messageOutputIndex ?? 0,
  content_index: 0,
});

export const RESPONSE_RENDERERS = {
  ResponseStarted: renderResponseStarted,
  MessageStarted: (_ctx, event) => {
    const d = event.data;
    return messageAdded(d.responseId, d.itemId, d.previousItemId, d.outputIndex, d.outOfBand === true);
  },
  ResponseSpoke: (ctx, event) => {
    const ids = contentIds(ctx, event.data.responseId, event.data.itemId);
    return [
      { type: "response.speak", ...ids, metadata: { session_id: ctx.sessionId, epoch: ctx.epoch, model_speak: true } },
      { type: "response.content_part.added", ...ids, part: { type: "audio", transcript: "" } },
    ];
  },
  AudioDelivered: (ctx, event) => {
    const d = event.data;
    const ids = contentIds(ctx, d.responseId, d.itemId);
    return [
      {
        type: "response.output_audio.delta",
        ...ids,
        delta: Buffer.from(d.audio.buffer, d.audio.byteOffset, d.audio.byteLength).toString("base64"),
        format: "pcm16",
        sample_rate_hz: d.sampleRateHz,
        metadata: {
          session_id: ctx.sessionId,
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
  },
  ResponseEnded: (ctx, event) => renderResponseEnded(ctx, event.data),
  TextStarted: (ctx, event) => [
    {
      type: "response.content_part.added",
      ...contentIds(ctx, event.data.responseId, event.data.itemId),
      part: { type: "text", text: "" },
    },
  ],
  TextDelivered: (ctx, event) => [
    {
      type: "response.output_text.delta",
      ...contentIds(ctx, event.data.responseId, event.data.itemId),
      delta: event.data.delta,
    },
  ],
  FunctionCallDelivered: (_ctx, event) => renderFunctionCall(event),
  MalformedFunctionCall: (ctx, event) => [
    {
      type: "duplex.function_call.done",
      event: {
        type: "function_call.done",
        session_id: ctx.sessionId,
        epoch: ctx.epoch,
        call_id: event.data.callId,
        name: event.data.name,
        arguments: event.data.arguments,
      },
    },
  ],
  OverlapDecided: (ctx, event) =>
    event.data.reported === false
      ? []
      : [
          {
            type: "overlap.decision",
            session_id: ctx.sessionId,
            policy: event.data.policy,
            action: event.data.action,
            reason: event.data.reason,
            overlap_ms: Math.round(event.data.overlapMs),
            buffer_audio: true,
            ...(event.data.forceListen === true ? { force_listen: true } : {}),
            // The newest reference revision carries the details under metadata as well (issue 35, part 1).
            metadata: {
              policy: event.data.policy,
              action: event.data.action,
              reason: event.data.reason,
              overlap_ms: Math.round(event.data.overlapMs),
              buffer_audio: true,
            },
          },
        ],
  RunnerFailed: (_ctx, event) => [errorBody(event.data.code, event.data.message, null, null)],
  DeferredResponseRefused: (_ctx, event) => [errorBody(event.data.code, event.data.message, null, null)],
} satisfies FlowRenderers;
