import { type Effect, splitEffects, type TimerFiring } from "./effects.ts";

/**
 * A session's timers (BEHAVIOUR.md, "Defaults and limits"): the response timer (`response_timeout_ms`), the idle
 * timer (`idle_timeout_s`) and the disconnect grace, armed and cancelled by name over an injected `Scheduler`.
 * Decisions arm and cancel the response and idle timers as effects (`TimerEffect`, run by `SessionTimers.run`); the
 * engine arms the grace on a drop and re-arms the idle timer on socket activity. A timer that fires calls back; the
 * engine turns that into a `TimerFired` input, decided and logged like any other (arming and cancelling are not
 * logged: they are derived from the log). The scheduler is the real clock by default; tests pass a virtual one
 * (test/support/virtual-clock.ts).
 */

/** What a timer runs on: a clock (ms since the Unix epoch) and one-shot timers (ms from now). */
export interface Scheduler {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The real clock: `Date.now` and Node's timers, unref'd so that an armed timer never holds the process open. */
export const realScheduler: Scheduler = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const handle = setTimeout(fn, ms);
    handle.unref();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** The longest delay `setTimeout` honours, ms (about 24.8 days). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A session's timer names: one of each is armed at a time. */
export type TimerName = "idle_ttl" | "disconnect_grace" | "response_timeout" | "max_lifetime";

/** The armed timers of every session on this engine, keyed by session id and timer name. */
export class SessionTimers {
  readonly #armed = new Map<string, Map<TimerName, unknown>>();

  constructor(readonly scheduler: Scheduler = realScheduler) {}

  /**
   * Arms `name` for `sessionId` to call `fire` in `ms`, cancelling the one armed before. A wait longer than
   * `MAX_TIMER_MS` is waited in parts of at most that long; `fire` is called once, after the whole wait.
   */
  arm(sessionId: string, name: TimerName, ms: number, fire: () => void): void {
    this.cancel(sessionId, name);
    const timers = this.#armed.get(sessionId) ?? new Map<TimerName, unknown>();
    this.#armed.set(sessionId, timers);
    const wait = (left: number): void => {
      const handle = this.scheduler.setTimeout(
        () => {
          if (timers.get(name) !== handle) return;
          if (left > MAX_TIMER_MS) return wait(left - MAX_TIMER_MS);
          timers.delete(name);
          fire();
        },
        Math.min(left, MAX_TIMER_MS),
      );
      timers.set(name, handle);
    };
    wait(ms);
  }

  /**
   * Runs the timer effects among `effects` for `sessionId` (src/engine/effects.ts, `TimerEffect`), in order, and
   * skips the runner's: an `arm_timer` calls `enqueue` with its `TimerFired` data when it fires.
   */
  run(sessionId: string, effects: readonly Effect[], enqueue: (fired: TimerFiring) => void): void {
    for (const effect of splitEffects(effects).timers) {
      if (effect.kind === "cancel_timer") this.cancel(sessionId, effect.timer);
      else this.arm(sessionId, effect.fire.timer, effect.ms, () => enqueue(effect.fire));
    }
  }

  /** Cancels `name` for `sessionId`; nothing if none is armed. */
  cancel(sessionId: string, name: TimerName): void {
    const timers = this.#armed.get(sessionId);
    const handle = timers?.get(name);
    if (handle === undefined) return;
    this.scheduler.clearTimeout(handle);
    timers?.delete(name);
  }

  /** The sessions with a timer armed (or armed before and not cleared with `cancelAll`). */
  sessionIds(): string[] {
    return [...this.#armed.keys()];
  }

  /** Cancels each of `names` for `sessionId`. */
  cancelAll(sessionId: string, names: readonly TimerName[]): void {
    for (const name of names) this.cancel(sessionId, name);
    if (this.#armed.get(sessionId)?.size === 0) this.#armed.delete(sessionId);
  }
}
