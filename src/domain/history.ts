import type { DomainEvent, HistoryItem, ResponseStatus } from "./events.ts";
import { estimatePlayedMs, textPrefixFor } from "./playback.ts";
import type { ActiveResponse, AssistantAudio, SessionState } from "./state.ts";

/**
 * The position (ms) history keeps of an assistant item (BEHAVIOUR.md, "Playback truth"):
 * `commit_all_on_done` and completed -> everything generated; a client that acknowledges playback -> its
 * `committed_ms`; otherwise (ours) the estimate `min(sent_ms, time since the first delta)`. Always capped by the
 * smallest truncation.
 */
export const committedPositionMs = (
  state: SessionState,
  audio: AssistantAudio,
  at: number,
  completed: boolean,
): number => {
  const cap = (ms: number): number => Math.min(ms, audio.truncatedAtMs ?? Number.POSITIVE_INFINITY);
  if (completed && state.config.playbackCommitPolicy === "commit_all_on_done") return cap(audio.ledger.generatedMs);
  if (state.playbackMode === "acknowledged") return cap(audio.ledger.committedMs);
  return estimatePlayedMs(audio.ledger.sentMs, audio.firstDeltaAt, at, audio.truncatedAtMs);
};

/**
 * The `HistoryCommitted` event that brings the item's history entry to what was heard by `at`, or nothing when it
 * is already there. An empty prefix keeps the slot with empty text (the history view drops it). Only an item that
 * spoke is settled by playback; one that did not is settled by `settleUnspoken` when its response ends, and an
 * out-of-band item is never in history.
 */
export const settleItem = (
  state: SessionState,
  audio: AssistantAudio,
  at: number,
  completed: boolean,
): DomainEvent[] => {
  if (!audio.spoke || audio.outOfBand) return [];
  const committedMs = committedPositionMs(state, audio, at, completed);
  const text = textPrefixFor(audio.transcript, audio.marks, audio.ledger.generatedMs, committedMs);
  const item: HistoryItem = {
    id: audio.itemId,
    type: "message",
    audio: true,
    role: "assistant",
    text,
    audioMs: Math.min(committedMs, audio.ledger.generatedMs),
    status:
      completed && audio.incomplete !== true && committedMs >= audio.ledger.generatedMs ? "completed" : "incomplete",
  };
  const current = state.history.find((h) => h.id === audio.itemId);
  if (
    current !== undefined &&
    current.text === item.text &&
    current.status === item.status &&
    current.audioMs === item.audioMs
  ) {
    return [];
  }
  return [{ type: "HistoryCommitted", data: { item, committedMs } }];
};

/**
 * Re-settles every completed, unsealed assistant item of a session that estimates playback: what the listener has
 * heard grows with time, so history catches up at each turn boundary (commit, response start, close). A cancelled
 * or failed item was settled for good when it ended: playback stopped there.
 */
export const settleEstimatedItems = (state: SessionState, at: number): DomainEvent[] =>
  state.playbackMode !== "estimated"
    ? []
    : Object.values(state.audio)
        .filter((a) => a.ended && a.completed && !a.sealed && a.spoke && !a.outOfBand)
        .flatMap((a) => settleItem(state, a, at, a.completed));

/**
 * History of a response that ended without speaking: a text response keeps its text (all of it when completed,
 * what was delivered when cancelled); a response with neither audio nor text keeps an empty slot of its modality
 * (the history view drops it). Nothing for a response that spoke (see `settleItem`), an out-of-band one, or one
 * without a message item (it only called tools).
 */
export const settleUnspoken = (response: ActiveResponse, status: ResponseStatus): DomainEvent[] => {
  // A response that only called tools has no message item: its calls are in history already.
  if (response.spoke || response.outOfBand || response.messageOutputIndex === null) return [];
  const item: HistoryItem = {
    id: response.itemId,
    type: "message",
    role: "assistant",
    text: response.text ?? "",
    audioMs: 0,
    status: status === "completed" ? "completed" : "incomplete",
    audio: response.text === null && response.modalities.includes("audio"),
  };
  return [{ type: "HistoryCommitted", data: { item, committedMs: null } }];
};
