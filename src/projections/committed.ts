import { Observable, type OperatorFunction } from "rxjs";
import type { Input, SessionState } from "../domain/index.ts";
import type { EventEnvelope } from "./envelope.ts";
import type { WireEvent } from "./wire.ts";

/** One decision of a committed step with the server events it rendered, in order (empty when none). */
export interface CommittedDecision {
  readonly envelope: EventEnvelope;
  readonly wire: readonly WireEvent[];
}

/**
 * One input of a session as its log holds it (DESIGN.md, "The session stream"): the input at `revision`, the
 * decisions after it with their server events, and the session's state after them. The live host emits these on
 * the session's committed stream only after their append, in log order; offline, the same steps are read from the
 * log (src/engine/step.ts, `committedStepsOf`). Every projection of a session reads one of these streams.
 */
export interface CommittedStep {
  readonly revision: number;
  readonly input: Input;
  readonly decisions: readonly CommittedDecision[];
  readonly state: SessionState;
}

/** The domain event envelopes of committed steps, in log order (the stream the envelope projections read). */
export const envelopes = (): OperatorFunction<CommittedStep, EventEnvelope> => (source) =>
  new Observable<EventEnvelope>((subscriber) =>
    source.subscribe({
      next: (step) => {
        for (const decision of step.decisions) subscriber.next(decision.envelope);
      },
      error: (error: unknown) => subscriber.error(error),
      complete: () => subscriber.complete(),
    }),
  );

/** The server events of committed steps, in `server_event_seq` order (what a socket that held the session got). */
export const wire = (): OperatorFunction<CommittedStep, WireEvent> => (source) =>
  new Observable<WireEvent>((subscriber) =>
    source.subscribe({
      next: (step) => {
        for (const decision of step.decisions) for (const event of decision.wire) subscriber.next(event);
      },
      error: (error: unknown) => subscriber.error(error),
      complete: () => subscriber.complete(),
    }),
  );
