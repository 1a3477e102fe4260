import { describe, expect, it } from "vitest";
import { createFlushTimer } from "../../src/infra/flush-timer.ts";

/** Resolves true when a setImmediate callback runs within `ms`, false when it does not. */
const immediateRuns = (ms: number): Promise<boolean> =>
  new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    setImmediate(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });

describe("flush timer", () => {
  it("flushes at the end of the turn when idle, and spaces flushes under load", async () => {
    const flushes: number[] = [];
    const timer = createFlushTimer(() => flushes.push(performance.now()), 30);
    timer.schedule();
    timer.schedule();
    await new Promise((resolve) => setImmediate(resolve));
    expect(flushes).toHaveLength(1);
    timer.schedule();
    // The second flush waits for the interval: however late a loaded machine runs it, never sooner.
    await expect.poll(() => flushes.length, { timeout: 5_000, interval: 10 }).toBe(2);
    // Never closer than the interval less libuv's 1 ms (src/infra/flush-timer.ts); the flush's own timestamps,
    // taken inside the callbacks, may be a fraction of a ms closer than the timer's on a loaded machine.
    expect((flushes[1] ?? 0) - (flushes[0] ?? 0)).toBeGreaterThanOrEqual(28);
  });

  it("runs a flush now in place of one waiting for its interval, and every later setImmediate of the process still runs", async () => {
    let flushes = 0;
    const timer = createFlushTimer(() => {
      flushes += 1;
    }, 1000);
    timer.now();
    // Under load: the next flush waits on a timeout, which now() clears (a clearImmediate of it broke Node's count
    // of pending immediates, and immediates queued after it waited for another setImmediate to come).
    timer.schedule();
    timer.now();
    expect(flushes).toBe(2);
    expect(await immediateRuns(500)).toBe(true);
    expect(await immediateRuns(500)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(flushes).toBe(2);
  });
});
