import { connect, filter, forkJoin, last, map, type OperatorFunction, reduce } from "rxjs";
import type { HistoryItem, SessionState } from "../domain/index.ts";
import { type CommittedStep, envelopes } from "./committed.ts";
import { type PlaybackEntry, playbackLedger, type SessionView, toHistory, toSessionView } from "./session-view.ts";
import { type Turn, turnLedger } from "./turn-ledger.ts";

/**
 * The views of a session over its committed stream (issue 34, part 2): the state each step carries is read, never
 * folded again (the envelope projections `sessionView` and `history` fold `evolve` a second time; these do not).
 * The live host's `committed$` and a log read offline (`committedStepsOf`) give the same values.
 */

/** The session's state after each committed step. */
export const committedState = (): OperatorFunction<CommittedStep, SessionState> => map((step) => step.state);

/** The session view after each committed step that decided something (a step with no decision changes nothing). */
export const committedView = (): OperatorFunction<CommittedStep, SessionView> => (source) =>
  source.pipe(
    filter((step) => step.decisions.length > 0),
    map((step) => toSessionView(step.state)),
  );

/** The history as a listener would tell it after each committed step (see `toHistory`). */
export const committedHistory = (): OperatorFunction<CommittedStep, HistoryItem[]> =>
  map((step) => toHistory(step.state));

/** A refusal or failure a session's log holds: the revision of the decision, its code and message. */
export interface LoggedError {
  readonly revision: number;
  readonly code: string;
  readonly message: string;
}

/**
 * The refusals and failures of a committed step, in order: `RequestRejected`, `RunnerFailed`, and each
 * `ResponseEnded` with an error. A step's decisions follow its input in the log, so decision `i` is at revision
 * `step.revision + 1 + i` (DESIGN.md, "The session stream").
 */
export const errorsOfStep = (step: CommittedStep): LoggedError[] =>
  step.decisions.flatMap(({ envelope: { event } }, i) => {
    const revision = step.revision + 1 + i;
    if (event.type === "RequestRejected" || event.type === "RunnerFailed")
      return [{ revision, code: event.data.code, message: event.data.message }];
    if (event.type === "ResponseEnded" && event.data.error !== null)
      return [{ revision, code: event.data.error.code, message: event.data.error.message }];
    return [];
  });

/** What a session report holds of its views, at the end of a committed stream. */
export interface SessionReportViews {
  /** The last session view; null when no step decided anything. */
  readonly view: SessionView | null;
  readonly playback: readonly PlaybackEntry[];
  /** The conversation as the listener heard it. */
  readonly history: readonly HistoryItem[];
  readonly turns: readonly Turn[];
  readonly errors: readonly LoggedError[];
  /** The model of the session's configuration (its last `SessionCreated` or `SessionConfigured`). */
  readonly model: string | null;
  /** Whether a socket held the session at the end of the stream. */
  readonly attached: boolean;
}

/**
 * Every view of a session report over one pass of a committed stream (multicast with `connect`): emits once, when
 * the stream completes.
 */
export const sessionReportViews = (): OperatorFunction<CommittedStep, SessionReportViews> =>
  connect((steps) =>
    forkJoin({
      view: steps.pipe(committedView(), last(undefined, null)),
      playback: steps.pipe(envelopes(), playbackLedger(), last(undefined, [] as readonly PlaybackEntry[])),
      history: steps.pipe(committedHistory(), last(undefined, [] as readonly HistoryItem[])),
      turns: steps.pipe(envelopes(), turnLedger(), last(undefined, [] as readonly Turn[])),
      errors: steps.pipe(reduce((all: LoggedError[], step) => all.concat(errorsOfStep(step)), [])),
      model: steps.pipe(
        envelopes(),
        map(({ event }) =>
          event.type === "SessionCreated" || event.type === "SessionConfigured" ? event.data.config.model : undefined,
        ),
        filter((model): model is string => model !== undefined),
        last(undefined, null),
      ),
      attached: steps.pipe(
        map((step) => step.state.attached),
        last(undefined, false),
      ),
    }),
  );
