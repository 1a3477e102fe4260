/**
 * Renders server events (reference/realtime-duplex-api.md, "Server to client") from domain events. Pure: the
 * same domain events render the same JSON, which is what replay checks byte for byte. GA names for output;
 * `conversation.item.added` and `.created` both emitted. `event_id`, `server_event_seq` and `epoch` are stamped
 * by the wire projection. Each flow (session, input, response, playback, items) holds the renderers of its
 * domain events; the table here joins them and names every domain event type, so a new one is a compile error
 * until a flow places it.
 */
import type { DomainEvent } from "../domain/index.ts";
import { INPUT_RENDERERS } from "./input-events.ts";
import { ITEM_RENDERERS } from "./item-events.ts";
import { PLAYBACK_RENDERERS } from "./playback-events.ts";
import type { RenderContext, Renderer, RendererTable } from "./render-context.ts";
import { RESPONSE_RENDERERS } from "./response-events.ts";
import type { ServerEvent } from "./server-event.ts";
import { SESSION_RENDERERS } from "./session-events.ts";

export { errorBody } from "./error-events.ts";
export type { RenderContext, ServerEventBody } from "./render-context.ts";
export type { ServerEvent, ServerEventType } from "./server-event.ts";
export { REDACTED_RESUME_TOKEN } from "./session-events.ts";

/** Every domain event type's renderer, from the flow that owns it. */
const RENDERERS: RendererTable = {
  ...SESSION_RENDERERS,
  ...INPUT_RENDERERS,
  ...RESPONSE_RENDERERS,
  ...PLAYBACK_RENDERERS,
  ...ITEM_RENDERERS,
};

/** The server events one domain event renders to, in order. */
export const renderServerEvents = (ctx: RenderContext, event: DomainEvent): ServerEvent[] => {
  const render = RENDERERS[event.type] as Renderer<DomainEvent["type"]> | undefined;
  if (render === undefined) throw new Error(`renderServerEvents: unhandled event ${JSON.stringify(event)}`);
  return render(ctx, event);
};
