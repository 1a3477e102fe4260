import type { DecisionBuilder } from "./builder.ts";
import type { ItemCreate } from "./commands.ts";
import { type Rejection, reject } from "./errors.ts";
import type { HistoryItem } from "./events.ts";
import { type ItemId, userItemIdFor } from "./ids.ts";
import { itemLedgerRefusal } from "./tool-ledger.ts";

/**
 * Conversation items the client manages (reference/realtime-duplex-api.md, "conversation.item.create / retrieve /
 * delete"): items enter history after `previous_item_id` (which must exist), ids are derived when the client gives
 * none, and an id already in history is refused. A `function_call` or `function_call_output` is checked against the
 * session tool ledger (tool-ledger.ts): a client replaying its chat context creates each call before its output.
 */
export const createItem = (b: DecisionBuilder, command: ItemCreate): Rejection | null => {
  const s = b.state;
  if (command.previousItemId !== null && !s.history.some((h) => h.id === command.previousItemId)) {
    return reject(
      "item_not_found",
      `previous_item_id ${command.previousItemId} is not in the conversation`,
      "previous_item_id",
    );
  }
  const id = command.itemId ?? (userItemIdFor(s.sessionId, s.userItemCount + 1) as ItemId);
  if (s.history.some((h) => h.id === id) || s.audio[id] !== undefined) {
    return reject("bad_event", `item id ${id} is already in the conversation`, "item.id");
  }
  const { item } = command;
  // Sessions recorded before issue 35, part 1 had no ledger (EarlierRules).
  const refusal = s.rules?.noToolLedger === true ? null : itemLedgerRefusal(s, item);
  if (refusal !== null) return refusal;
  b.push({
    type: "ItemCreated",
    data: { item: historyItemOf(id, item), previousItemId: command.previousItemId ?? s.lastItemId },
  });
  return null;
};

/** A client item as history holds it, under `id`. */
export const historyItemOf = (id: ItemId, item: ItemCreate["item"]): HistoryItem =>
  item.type === "function_call"
    ? {
        id,
        type: "function_call",
        role: "assistant",
        text: "",
        audioMs: 0,
        status: "completed",
        audio: false,
        callId: item.callId,
        name: item.name,
        arguments: item.arguments,
      }
    : item.type === "function_call_output"
      ? {
          id,
          type: "function_call_output",
          role: "user",
          text: "",
          audioMs: 0,
          status: "completed",
          audio: false,
          callId: item.callId,
          output: item.output,
        }
      : {
          id,
          type: "message",
          role: item.role,
          text: item.content.map((c) => ("text" in c ? c.text : (c.transcript ?? ""))).join(""),
          audioMs: item.content.reduce((ms, c) => ms + ("audioMs" in c ? c.audioMs : 0), 0),
          status: "completed",
          audio: item.content.some((c) => "audioMs" in c),
        };

/** The history item with `itemId`, or `item_not_found`. */
export const findItem = (b: DecisionBuilder, itemId: ItemId): HistoryItem | Rejection =>
  b.state.history.find((h) => h.id === itemId) ??
  reject("item_not_found", `no item ${itemId} in the conversation`, "item_id");
