/**
 * A virtual clock for the engine's `Scheduler` (src/engine/timers.ts): time moves only when a test calls
 * `advance(ms)`, which runs every timer due by then in the order of its due time (ties in arming order).
 */
import type { Scheduler } from "../../src/engine/timers.ts";

/** A `Scheduler` whose clock (ms since the Unix epoch, from `start`) moves only with `advance`. */
export interface VirtualClock extends Scheduler {
  /** Moves the clock `ms` forward, running each timer that falls due on the way, at its due time. */
  advance(ms: number): void;
  /** Timers armed and not yet run or cleared. */
  pending(): number;
}

export function virtualClock(start = 0): VirtualClock {
  let now = start;
  let next = 0;
  const due = new Map<number, { at: number; fn: () => void }>();
  const earliest = (until: number): number | null => {
    let best: number | null = null;
    for (const [id, t] of due) {
      if (t.at > until) continue;
      const b = best === null ? null : due.get(best);
      if (b === undefined || b === null || t.at < b.at) best = id;
    }
    return best;
  };
  return {
    now: () => now,
    setTimeout(fn, ms) {
      next += 1;
      due.set(next, { at: now + Math.max(0, ms), fn });
      return next;
    },
    clearTimeout: (handle) => void due.delete(handle as number),
    advance(ms) {
      const until = now + ms;
      for (let id = earliest(until); id !== null; id = earliest(until)) {
        const t = due.get(id);
        due.delete(id);
        if (t === undefined) continue;
        now = t.at;
        t.fn();
      }
      now = until;
    },
    pending: () => due.size,
  };
}
