import type { DomainEvent } from "../domain/index.ts";
import { functionCallItem, messageItem, roundLedger } from "./items.ts";
import type { RenderContext, ServerEventBody } from "./server-events.ts";

type Ended = Extract<DomainEvent, { type: "ResponseEnded" }>["data"];

/**
 * The end of a response (reference/realtime-duplex-api.md, "Response lifecycle"; BEHAVIOUR.md, "Barge-in and cancel
 * are atomic"): `output_audio_buffer.cleared` when cancelled audio was sent, the `*.done` events of its audio and
 * text parts, `output_item.done`, `conversation.item.done`, `response.done` (with the client's metadata echoed, or
 * the duplex event) and `rate_limits.updated`.
 */
export const renderResponseEnded = (ctx: RenderContext, d: Ended): ServerEventBody[] => {
  const sessionId = ctx.sessionId;
  // Older logs lack the index: their message item was always the first output.
  const messageIndex = d.messageOutputIndex === undefined ? 0 : d.messageOutputIndex;
  const ids = { response_id: d.responseId, item_id: d.itemId, output_index: messageIndex ?? 0 };
  const itemStatus = d.status === "completed" ? "completed" : "incomplete";
  // A text-only response shows its text part even when it produced none (as history holds it).
  const textOnly = d.modalities !== undefined ? !d.modalities.includes("audio") : d.text !== null && !d.spoke;
  const item = messageItem(d.itemId, itemStatus, d.spoke ? d.transcript : null, textOnly ? (d.text ?? "") : d.text);
  const out: ServerEventBody[] = [];
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
