import type { DomainEvent } from "./events.ts";
import { evolve } from "./evolve.ts";
import type { SessionState } from "./state.ts";

/**
 * Accumulates the events of one decision while keeping the state they lead to, so that a later step of the same
 * decision sees the earlier ones. Local to one `decide` call; `decide` stays pure.
 */
export interface DecisionBuilder {
  readonly state: SessionState;
  readonly events: readonly DomainEvent[];
  push(...events: DomainEvent[]): void;
  /** The decision made so far, with the state after each event (`evolve` ran once per event, here). */
  decision(): Decision;
}

/**
 * What `decide` made of an input, with the states it leads to: `states[i]` is the state after `events[i]` (its
 * epoch and turn id go into that event's metadata), `state` the state after the last (the input's state when none).
 */
export interface Decision {
  readonly events: readonly DomainEvent[];
  readonly states: readonly SessionState[];
  readonly state: SessionState;
}

/** The decision of `events` from `state`, evolving each once (for decisions written out as a literal). */
export const decisionOf = (state: SessionState, events: readonly DomainEvent[]): Decision => {
  const b = decisionBuilder(state);
  b.push(...events);
  return b.decision();
};

export const decisionBuilder = (initial: SessionState): DecisionBuilder => {
  let state = initial;
  const events: DomainEvent[] = [];
  const states: SessionState[] = [];
  return {
    get state() {
      return state;
    },
    events,
    push(...more) {
      for (const event of more) {
        events.push(event);
        state = evolve(state, event);
        states.push(state);
      }
    },
    decision: () => ({ events, states, state }),
  };
};
