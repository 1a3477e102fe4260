import type { DecisionBuilder } from "./builder.ts";
import type { ItemTruncate, PlaybackAck } from "./commands.ts";
import { type Rejection, reject } from "./errors.ts";
import { settleItem } from "./history.ts";
import type { AssistantAudio, SessionState } from "./state.ts";

/** The assistant audio a `playback.ack` names, or the rejection (BEHAVIOUR.md, "Playback truth"). */
const targetOf = (state: SessionState, ack: PlaybackAck): AssistantAudio | Rejection => {
  const all = Object.values(state.audio);
  const byResponse = ack.responseId === null ? undefined : all.find((a) => a.responseId === ack.responseId);
  const byItem = ack.itemId === null ? undefined : state.audio[ack.itemId];
  if (ack.responseId !== null && ack.itemId !== null && byResponse !== byItem) {
    return byResponse === undefined || byItem === undefined
      ? reject("playback_item_not_found", `no assistant item ${ack.itemId} of response ${ack.responseId}`, "item_id")
      : reject("playback_item_mismatch", `item ${ack.itemId} is not the item of response ${ack.responseId}`, "item_id");
  }
  const found = byResponse ?? byItem ?? (ack.responseId === null && ack.itemId === null ? all.at(-1) : undefined);
  if (found === undefined) {
    const named = ack.responseId ?? ack.itemId ?? "(none)";
    return reject(
      "playback_item_not_found",
      `no assistant item matches ${named}`,
      ack.responseId ? "response_id" : "item_id",
    );
  }
  return found;
};

/**
 * `playback.ack`: positions are monotonic maxima, clamped to what was generated (never an error); `truncate`
 * caps the item at the smallest truncation and may lower `committed_ms`. An ended item's history follows at once;
 * an item sealed by a later commit without an earlier ack is refused with `playback_ack_too_late`.
 */
export const acknowledgePlayback = (b: DecisionBuilder, at: number, ack: PlaybackAck): Rejection | null => {
  const found = targetOf(b.state, ack);
  if ("code" in found) return found;
  const target = found;
  // A truncating ack on a model without audio truncation is taken as a plain ack: the stored item is not cut
  // (reference, "Capability negotiation by model": supports_audio_truncate gates truncating playback.ack).
  const truncate = ack.truncate && b.state.capabilities.supportsAudioTruncate;
  if (target.sealed) {
    return reject("playback_ack_too_late", `item ${target.itemId} was settled by a later commit before any ack`);
  }
  const generated = target.ledger.generatedMs;
  const played = Math.max(target.ledger.playedMs, Math.min(ack.playedMs, generated));
  const requested = Math.min(ack.committedMs ?? ack.playedMs, generated);
  const cap = Math.min(
    target.truncatedAtMs ?? Number.POSITIVE_INFINITY,
    truncate ? requested : Number.POSITIVE_INFINITY,
  );
  const committed = Math.min(truncate ? requested : Math.max(target.ledger.committedMs, requested), cap);
  b.push({
    type: "PlaybackAcknowledged",
    data: {
      responseId: target.responseId,
      itemId: target.itemId,
      playedMs: played,
      committedMs: committed,
      truncate,
      playback: { ...target.ledger, playedMs: played, committedMs: committed },
      historyCommitted: target.ended && !target.outOfBand,
    },
  });
  const updated = b.state.audio[target.itemId];
  if (updated?.ended) b.push(...settleItem(b.state, updated, at, updated.completed));
  return null;
};

/**
 * `conversation.item.truncate`: caps an assistant item's audio at `audioEndMs` for good. Past the end it is
 * clamped, at 0 it empties the item; neither is an error (BEHAVIOUR.md scenarios 9 and 10).
 */
export const truncateItem = (b: DecisionBuilder, at: number, command: ItemTruncate): Rejection | null => {
  const target = b.state.audio[command.itemId];
  if (target === undefined || target.outOfBand) {
    const known = b.state.history.some((h) => h.id === command.itemId);
    return known
      ? reject(
          "item_not_found",
          `item ${command.itemId} is a user item; only assistant audio can be truncated`,
          "item_id",
        )
      : reject("item_not_found", `no item ${command.itemId}`, "item_id");
  }
  // Sessions recorded before 25f1415 truncated whatever content part was named (EarlierRules).
  if (command.contentIndex !== 0 && b.state.rules?.everyOverlapReported !== true) {
    return reject(
      "bad_event",
      `content_index ${command.contentIndex} does not exist: item ${command.itemId} has one content part (0)`,
      "content_index",
    );
  }
  const audioEndMs = Math.min(command.audioEndMs, target.ledger.generatedMs);
  b.push({
    type: "ItemTruncated",
    data: { itemId: command.itemId, contentIndex: command.contentIndex, audioEndMs },
  });
  const updated = b.state.audio[command.itemId];
  if (updated?.ended) b.push(...settleItem(b.state, updated, at, updated.completed));
  return null;
};
