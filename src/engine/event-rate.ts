/**
 * The event rate of one session (issue 32, part 2; BEHAVIOUR.md, "The edges"; docs/deploy.md, "Limits"): client
 * events other than audio appends pass a token bucket of `burst` tokens, refilled at `perS` tokens a second. An event
 * that finds no token is refused, and the client is told at most once a second: the first refusal of a second is
 * `tell` (the session host records it as an `input_backpressure` rejection, with how many were dropped since the last
 * one told), every other refusal within {@link TELL_INTERVAL_MS} of it is `drop` (dropped before the engine: no log
 * entry, no answer). So a flood costs the store at most one rejection a second, whatever its rate.
 *
 * Pure: time is the caller's (`nowMs`, the engine clock), so tests drive it with a virtual clock.
 */

/** `limits.events_per_s` (tokens a second, > 0) and `limits.event_burst` (the bucket's size, >= 1). */
export interface EventRateLimits {
  readonly perS: number;
  readonly burst: number;
}

/** The bucket of one session. */
export interface EventRateState {
  /** Tokens left (fractional), at most `burst`. */
  readonly tokens: number;
  /** ms (engine clock) the tokens were counted at; null: never (the bucket is full). */
  readonly atMs: number | null;
  /** ms of the last refusal told to the client; null: none yet. */
  readonly toldAtMs: number | null;
  /** Refusals dropped unanswered since the last one told. */
  readonly dropped: number;
}

/**
 * What becomes of one event: `pass` (a token was taken), `tell` (refused, and the client is told; `dropped`: events
 * dropped unanswered since the last refusal told), `drop` (refused unanswered: a refusal was told less than a second
 * ago).
 */
export type EventRateVerdict =
  | { readonly kind: "pass" }
  | { readonly kind: "tell"; readonly dropped: number }
  | { readonly kind: "drop" };

/** At most one refusal is told per this many ms (1 s). */
export const TELL_INTERVAL_MS = 1000;

/** A full bucket that has told nothing. */
export const INITIAL_EVENT_RATE: EventRateState = {
  tokens: Number.POSITIVE_INFINITY,
  atMs: null,
  toldAtMs: null,
  dropped: 0,
};

/**
 * Counts one event at `nowMs` (ms, engine clock): refills the bucket for the time since it was last counted (a
 * clock that went back refills nothing), then takes a token or refuses the event. Returns the bucket after it and
 * the verdict.
 */
export const takeEventToken = (
  state: EventRateState,
  nowMs: number,
  limits: EventRateLimits,
): { readonly state: EventRateState; readonly verdict: EventRateVerdict } => {
  const elapsedMs = state.atMs === null ? 0 : Math.max(0, nowMs - state.atMs);
  const atMs = state.atMs === null ? nowMs : Math.max(state.atMs, nowMs);
  const tokens = Math.min(limits.burst, state.tokens + (elapsedMs * limits.perS) / 1000);
  if (tokens >= 1) return { state: { ...state, tokens: tokens - 1, atMs }, verdict: { kind: "pass" } };
  if (state.toldAtMs !== null && nowMs - state.toldAtMs < TELL_INTERVAL_MS) {
    return { state: { ...state, tokens, atMs, dropped: state.dropped + 1 }, verdict: { kind: "drop" } };
  }
  return {
    state: { tokens, atMs, toldAtMs: nowMs, dropped: 0 },
    verdict: { kind: "tell", dropped: state.dropped },
  };
};

/** The message of an audio append refused by the appends' bucket (`limits.appends_per_s`, `append_burst`). */
export const appendRateMessage = (limits: EventRateLimits, dropped: number): string =>
  `more than ${limits.perS} audio appends a second (a burst of ${limits.burst}): this append is refused and nothing of it is buffered, and the appends after it are dropped unanswered for a second (${dropped} dropped since the last notice); send larger appends, or slow down`;

/** The message of a refusal told: the limits, and how many events were dropped unanswered since the last one. */
export const eventRateMessage = (limits: EventRateLimits, dropped: number): string =>
  `more than ${limits.perS} client events a second other than audio appends (a burst of ${limits.burst}): this event is refused, and those after it are dropped unanswered for a second (${dropped} dropped since the last notice); slow down`;

/**
 * The two token buckets of one session's client frames (issue 13): its events other than audio appends
 * (`eventRate`: `limits.events_per_s`, `limits.event_burst`) and its audio appends (`appendRate`). A bucket without
 * limits passes every frame.
 */
export class InputRates {
  #events: EventRateState = INITIAL_EVENT_RATE;
  #appends: EventRateState = INITIAL_EVENT_RATE;

  constructor(readonly limits: { readonly eventRate?: EventRateLimits; readonly appendRate?: EventRateLimits }) {}

  /** Counts one client frame at `at` (ms) against its bucket (`event` or `append`). */
  count(at: number, kind: "event" | "append"): EventRateVerdict {
    const limits = kind === "event" ? this.limits.eventRate : this.limits.appendRate;
    if (limits === undefined) return { kind: "pass" };
    const { state, verdict } = takeEventToken(kind === "event" ? this.#events : this.#appends, at, limits);
    if (kind === "event") this.#events = state;
    else this.#appends = state;
    return verdict;
  }

  /** The `input_backpressure` message of a refusal by `kind`'s bucket, `dropped` frames dropped since the last. */
  message(dropped: number, kind: "event" | "append"): string {
    return kind === "event"
      ? eventRateMessage(this.limits.eventRate ?? { perS: 0, burst: 0 }, dropped)
      : appendRateMessage(this.limits.appendRate ?? { perS: 0, burst: 0 }, dropped);
  }
}
