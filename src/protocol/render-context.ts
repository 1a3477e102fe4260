/**
 * What the server-event renderer works with (reference/realtime-duplex-api.md, "Server to client"): the context a
 * domain event is rendered in, the body a rendered event has before the wire projection stamps `event_id`,
 * `server_event_seq` and `epoch`, and the shape of a flow's table of renderers keyed by domain event type.
 */
import type { Capabilities, DomainEvent, SessionId } from "../domain/index.ts";
import type { ServerEvent } from "./server-event.ts";

/**
 * A server event's JSON body: its `type` and fields, before the wire projection stamps it. The renderer emits the
 * typed `ServerEvent` (server-event.ts), each member of which is one of these.
 */
export type ServerEventBody = { readonly type: string } & Readonly<Record<string, unknown>>;

/** What rendering needs besides the event: the session's identity, learnt from `SessionCreated`. */
export interface RenderContext {
  readonly sessionId: SessionId;
  readonly capabilities: Capabilities;
  readonly epoch: number;
  readonly turnId: number;
  /** The active response's message item index in `response.output` (absent: 0), set by `MessageStarted`. */
  readonly messageOutputIndex?: number;
}

/** The domain event of type `K`. */
export type DomainEventOf<K extends DomainEvent["type"]> = Extract<DomainEvent, { type: K }>;

/** Renders one domain event of type `K` into its server events, in order (none: nothing shows on the wire). */
export type Renderer<K extends DomainEvent["type"]> = (ctx: RenderContext, event: DomainEventOf<K>) => ServerEvent[];

/** The whole table: a renderer for every domain event type. */
export type RendererTable = { readonly [K in DomainEvent["type"]]: Renderer<K> };

/** A flow's renderers before they are joined into the whole table. */
export type FlowRenderers = { readonly [K in DomainEvent["type"]]?: Renderer<K> };

/** The renderer of a domain event that shows nothing on the wire. */
export const renderNothing = (): ServerEvent[] => [];
