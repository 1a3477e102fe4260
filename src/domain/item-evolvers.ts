/** The items flow's evolvers: conversation items the client creates, deletes or retrieves (`conversation.item.*`). */
import type { HistoryItem } from "./events.ts";
import { type FlowEvolvers, unchanged } from "./evolver.ts";
import type { ItemId } from "./ids.ts";
import { type ToolCallRow, withCallAnswered, withCallOpened, withCallWithdrawn } from "./tool-ledger.ts";

/** Inserts `item` after `previousId` (at the end when null or unknown). */
const insertAfter = (
  history: readonly HistoryItem[],
  item: HistoryItem,
  previousId: ItemId | null,
): readonly HistoryItem[] => {
  const index = previousId === null ? -1 : history.findIndex((h) => h.id === previousId);
  return index < 0 ? [...history, item] : [...history.slice(0, index + 1), item, ...history.slice(index + 1)];
};

/** The tool ledger after the client's `item` entered history at `epoch`: a call opens, an output answers its call. */
const ledgerWith = (rows: readonly ToolCallRow[], item: HistoryItem, epoch: number): readonly ToolCallRow[] | null =>
  item.type === "function_call" && item.callId !== undefined
    ? withCallOpened(rows, { callId: item.callId, name: item.name ?? "", itemId: item.id }, epoch)
    : item.type === "function_call_output" && item.callId !== undefined
      ? withCallAnswered(rows, item.callId)
      : null;

export const ITEM_EVOLVERS = {
  ItemCreated: (state, event) => {
    const toolCalls = ledgerWith(state.toolCalls ?? [], event.data.item, state.epoch);
    return {
      ...state,
      userItemCount: state.userItemCount + 1,
      lastItemId: event.data.item.id,
      history: insertAfter(state.history, event.data.item, event.data.previousItemId),
      ...(toolCalls === null ? {} : { toolCalls }),
    };
  },
  ItemDeleted: (state, event) => ({
    ...state,
    // A deleted function_call item withdraws its call: a later output is late (tool-ledger.ts).
    ...(state.toolCalls === undefined ? {} : { toolCalls: withCallWithdrawn(state.toolCalls, event.data.itemId) }),
    history: state.history.filter((h) => h.id !== event.data.itemId),
    // A deleted user item is not answered later.
    deferredTurns: state.deferredTurns.filter((t) => t.itemId !== event.data.itemId),
  }),
  ItemRetrieved: unchanged,
} satisfies FlowEvolvers;
