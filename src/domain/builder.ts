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
}

export const decisionBuilder = (initial: SessionState): DecisionBuilder => {
  let state = initial;
  const events: DomainEvent[] = [];
  return {
    get state() {
      return state;
    },
    events,
    push(...more) {
      for (const event of more) {
        events.push(event);
        state = evolve(state, event);
      }
    },
  };
};
