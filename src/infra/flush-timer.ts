/**
 * When to send what waits for a worker thread (the store's writer, the Silero VAD thread). A message to a worker
 * and its answer cost the event loop about 65 us here whatever they carry (issue 11, measured with a ping-pong at
 * 1 ms intervals), so under load the messages are spaced: a flush runs at the end of this turn of the event loop,
 * unless the last one ran under `minIntervalMs` ago; then it runs that long after the last one, carrying everything
 * that arrived meanwhile. An idle server's flushes are never delayed.
 */
export interface FlushTimer {
  /** Arms the timer if it is not armed. */
  schedule(): void;
  /** Runs the flush now (disarming the timer), for a caller that must not wait. */
  now(): void;
}

/**
 * @param flush sends what waits; called at most once per `schedule` that armed the timer.
 * @param minIntervalMs the least time between two flushes under load, ms.
 */
export function createFlushTimer(flush: () => void, minIntervalMs: number): FlushTimer {
  // Each handle is cleared by its own function: clearImmediate on a Timeout decrements Node's count of pending
  // immediates (it checks only `_destroyed`), and once that count reads 0 the event loop skips every immediate
  // queued after, process-wide, until another setImmediate (seen: a new socket's session.created 20 s late).
  let armed: { readonly immediate: NodeJS.Immediate } | { readonly timeout: NodeJS.Timeout } | null = null;
  let last = Number.NEGATIVE_INFINITY;
  const run = (): void => {
    armed = null;
    last = performance.now();
    flush();
  };
  // A timeout may fire several ms early by performance.now() (libuv times it from the loop's cached clock, stale on
  // a busy loop): it waits again when more than 1 ms of the interval is left, so flushes are never closer than
  // `minIntervalMs` less 1 ms (libuv's own granularity, which the interval was always subject to).
  const due = (): void => {
    const left = last + minIntervalMs - performance.now();
    if (left > 1) armed = { timeout: setTimeout(due, left) };
    else run();
  };
  const arm = (): void => {
    const wait = last + minIntervalMs - performance.now();
    armed = wait <= 0 ? { immediate: setImmediate(run) } : { timeout: setTimeout(due, wait) };
  };
  return {
    schedule() {
      if (armed !== null) return;
      arm();
    },
    now() {
      if (armed !== null) {
        if ("immediate" in armed) clearImmediate(armed.immediate);
        else clearTimeout(armed.timeout);
      }
      run();
    },
  };
}
