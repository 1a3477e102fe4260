/** The items flow's evolvers: conversation items the client creates, deletes or retrieves (`conversation.item.*`). */
import type { HistoryItem } from "./events.ts";
import { type FlowEvolvers, unchanged } from "./evolver.ts";
import type { ItemId } from "./ids.ts";

/** Inserts `item` after `previousId` (at the end when null or unknown). */
const insertAfter = (
  history: readonly HistoryItem[],
  item: HistoryItem,
  previousId: ItemId | null,
): readonly HistoryItem[] => {
  const index = previousId === null ? -1 : history.findIndex((h) => h.id === previousId);
  return index < 0 ? [...history, item] : [...history.slice(0, index + 1), item, ...history.slice(index + 1)];
};

export const ITEM_EVOLVERS = {
  ItemCreated: (state, event) => ({
    ...state,
    userItemCount: state.userItemCount + 1,
    lastItemId: event.data.item.id,
    history: insertAfter(state.history, event.data.item, event.data.previousItemId),
  }),
  ItemDeleted: (state, event) => ({
    ...state,
    history: state.history.filter((h) => h.id !== event.data.itemId),
    // A deleted user item is not answered later.
    deferredTurns: state.deferredTurns.filter((t) => t.itemId !== event.data.itemId),
  }),
  ItemRetrieved: unchanged,
} satisfies FlowEvolvers;
