/**
 * The fold of the session stream: `evolve` folds one domain event into the state through the table of every flow's
 * evolvers (input, response, playback, items, session; see evolver.ts). The table names every event type, so a new
 * one is a compile error until a flow places it.
 */
import type { DomainEvent, DomainEventType } from "./events.ts";
import type { Evolver, EvolverTable } from "./evolver.ts";
import { INPUT_EVOLVERS } from "./input-evolvers.ts";
import { ITEM_EVOLVERS } from "./item-evolvers.ts";
import { PLAYBACK_EVOLVERS } from "./playback-evolvers.ts";
import { RESPONSE_EVOLVERS } from "./response-evolvers.ts";
import { SESSION_EVOLVERS } from "./session-evolvers.ts";
import type { SessionState } from "./state.ts";

/** Every event type's evolver, from the flow that owns it. */
const EVOLVERS: EvolverTable = {
  ...SESSION_EVOLVERS,
  ...INPUT_EVOLVERS,
  ...RESPONSE_EVOLVERS,
  ...PLAYBACK_EVOLVERS,
  ...ITEM_EVOLVERS,
};

/** Folds one domain event into the state. Pure; every type of the union has its evolver. */
export const evolve = (state: SessionState, event: DomainEvent): SessionState => {
  const evolver = EVOLVERS[event.type] as Evolver<DomainEventType> | undefined;
  if (evolver === undefined) throw new Error(`evolve: unhandled event ${JSON.stringify(event)}`);
  return evolver(state, event);
};
