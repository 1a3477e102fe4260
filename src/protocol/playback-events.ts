/**
 * The playback flow's server events: `playback.acknowledged`, `conversation.item.truncated` and
 * `output_audio_buffer.cleared` (BEHAVIOUR.md, "Playback truth"); the epoch and settled history show nothing.
 */
import { roundLedger } from "./items.ts";
import { type FlowRenderers, renderNothing } from "./render-context.ts";

export const PLAYBACK_RENDERERS = {
  PlaybackAcknowledged: (ctx, event) => {
    const d = event.data;
    return [
      {
        type: "playback.acknowledged",
        event: {
          type: "playback.acknowledged",
          session_id: ctx.sessionId,
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
  },
  ItemTruncated: (ctx, event) => [
    {
      type: "conversation.item.truncated",
      item_id: event.data.itemId,
      content_index: event.data.contentIndex,
      audio_end_ms: Math.floor(event.data.audioEndMs),
      event: {
        type: "conversation.item.truncated",
        session_id: ctx.sessionId,
        item_id: event.data.itemId,
        content_index: event.data.contentIndex,
        audio_end_ms: Math.floor(event.data.audioEndMs),
      },
    },
  ],
  OutputAudioCleared: (_ctx, event) => [{ type: "output_audio_buffer.cleared", response_id: event.data.responseId }],
  EpochAdvanced: renderNothing,
  HistoryCommitted: renderNothing,
} satisfies FlowRenderers;
