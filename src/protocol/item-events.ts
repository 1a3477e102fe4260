/** The items flow's server events: `conversation.item.added`, `.created`, `.done`, `.retrieved`, `.deleted`. */
import { historyItemJson } from "./items.ts";
import type { FlowRenderers } from "./render-context.ts";

export const ITEM_RENDERERS = {
  ItemCreated: (_ctx, event) => {
    const item = historyItemJson(event.data.item);
    const previous = event.data.previousItemId;
    return [
      { type: "conversation.item.added", previous_item_id: previous, item },
      { type: "conversation.item.created", previous_item_id: previous, item },
      { type: "conversation.item.done", previous_item_id: previous, item },
    ];
  },
  ItemRetrieved: (_ctx, event) => [{ type: "conversation.item.retrieved", item: historyItemJson(event.data.item) }],
  ItemDeleted: (ctx, event) => [
    {
      type: "conversation.item.deleted",
      item_id: event.data.itemId,
      event: { type: "conversation.item.deleted", session_id: ctx.sessionId, item_id: event.data.itemId },
    },
  ],
} satisfies FlowRenderers;
