/**
 * The shape of the fold's tables (DESIGN.md, "The session stream"): an evolver folds one domain event of a given
 * `type` into the session state, and each flow (input, response, playback, items, session) holds a table of them
 * keyed by event type. `evolve.ts` joins the tables into one that names every `DomainEvent["type"]`, so a new event
 * type that no flow places is a compile error.
 */
import type { DomainEvent, DomainEventType } from "./events.ts";
import type { ItemId } from "./ids.ts";
import type { AssistantAudio, SessionState } from "./state.ts";

/** The domain event of type `K`. */
export type EventOf<K extends DomainEventType> = Extract<DomainEvent, { type: K }>;

/** Folds one event of type `K` into the state. Pure. */
export type Evolver<K extends DomainEventType> = (state: SessionState, event: EventOf<K>) => SessionState;

/** A flow's evolvers, keyed by the event types it owns (a part of the whole table). */
export type EvolverTable<K extends DomainEventType = DomainEventType> = { readonly [T in K]: Evolver<T> };

/** A flow's table before it is joined: any event types, each with its own evolver. */
export type FlowEvolvers = { readonly [T in DomainEventType]?: Evolver<T> };

/** The evolver of an event that changes no state (it is recorded for the wire, the report or the runner). */
export const unchanged = (state: SessionState): SessionState => state;

/** Changes the assistant audio of `itemId`; the state as it is when no response made that item. */
export const updateAudio = (
  state: SessionState,
  itemId: ItemId,
  change: (audio: AssistantAudio) => AssistantAudio,
): SessionState => {
  const current = state.audio[itemId];
  return current === undefined ? state : { ...state, audio: { ...state.audio, [itemId]: change(current) } };
};
