import type { DomainEvent } from "../domain/index.ts";

/**
 * A domain event as the log holds it: the event and its metadata (engine clock `at` in ms since the Unix epoch,
 * and the session's `epoch` and `turnId` after the event). DESIGN.md, "The session stream".
 */
export interface EventEnvelope {
  readonly event: DomainEvent;
  readonly metadata: { readonly at: number; readonly epoch: number; readonly turnId: number };
}
