/**
 * The playback flow's evolvers: the playback ledger as the client acknowledges and truncates what it played, the
 * epoch a barge-in advances, and history items settled from what was played (BEHAVIOUR.md, "Playback truth").
 */
import type { HistoryItem } from "./events.ts";
import { type FlowEvolvers, unchanged, updateAudio } from "./evolver.ts";

const upsertHistory = (history: readonly HistoryItem[], item: HistoryItem): readonly HistoryItem[] =>
  history.some((h) => h.id === item.id) ? history.map((h) => (h.id === item.id ? item : h)) : [...history, item];

export const PLAYBACK_EVOLVERS = {
  EpochAdvanced: (state, event) => ({ ...state, epoch: event.data.epoch, turnState: "barge_in" }),
  PlaybackAcknowledged: (state, event) => ({
    ...updateAudio(state, event.data.itemId, (a) => ({
      ...a,
      ledger: event.data.playback,
      acked: true,
      truncatedAtMs: event.data.truncate
        ? Math.min(a.truncatedAtMs ?? Number.POSITIVE_INFINITY, event.data.committedMs)
        : a.truncatedAtMs,
    })),
    playbackMode: "acknowledged",
  }),
  // A truncation at or beyond the end of what was generated changes nothing (BEHAVIOUR.md, "Playback truth").
  ItemTruncated: (state, event) =>
    updateAudio(state, event.data.itemId, (a) =>
      event.data.audioEndMs >= a.ledger.generatedMs
        ? a
        : {
            ...a,
            truncatedAtMs: Math.min(a.truncatedAtMs ?? Number.POSITIVE_INFINITY, event.data.audioEndMs),
            ledger: { ...a.ledger, committedMs: Math.min(a.ledger.committedMs, event.data.audioEndMs) },
          },
    ),
  HistoryCommitted: (state, event) => ({ ...state, history: upsertHistory(state.history, event.data.item) }),
  OutputAudioCleared: unchanged,
} satisfies FlowEvolvers;
