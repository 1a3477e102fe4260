import type { Worker } from "node:worker_threads";

/**
 * The calls waiting for a worker thread's answers (the store's writer, the Silero VAD thread), by call id. The
 * thread holds the process open only while a call waits: `Worker.ref()` when the first is added, `unref()` when the
 * last is settled, so a process with nothing else to do exits as it would without the thread.
 */
export interface PendingCalls<T> {
  /** A new call: its id for the message to the thread, and the promise its answer settles. */
  add(): { readonly id: number; readonly answer: Promise<T> };
  /** Settles call `id` with the thread's answer (an id no longer waiting is ignored). */
  resolve(id: number, value: T): void;
  reject(id: number, error: Error): void;
  /** Rejects every call waiting with `error` (the thread failed or exited). */
  rejectAll(error: Error): void;
  readonly size: number;
}

/** The pending calls of `worker`, which this unrefs at once (only waiting calls hold the process open). */
export function createPendingCalls<T>(worker: Worker): PendingCalls<T> {
  const waiting = new Map<number, { resolve: (value: T) => void; reject: (error: Error) => void }>();
  let next = 0;
  worker.unref();
  const settle = (id: number): { resolve: (value: T) => void; reject: (error: Error) => void } | undefined => {
    const call = waiting.get(id);
    waiting.delete(id);
    if (waiting.size === 0) worker.unref();
    return call;
  };
  return {
    add() {
      const id = next++;
      if (waiting.size === 0) worker.ref();
      const answer = new Promise<T>((resolve, reject) => {
        waiting.set(id, { resolve, reject });
      });
      return { id, answer };
    },
    resolve: (id, value) => settle(id)?.resolve(value),
    reject: (id, error) => settle(id)?.reject(error),
    rejectAll(error) {
      const calls = [...waiting.values()];
      waiting.clear();
      worker.unref();
      for (const call of calls) call.reject(error);
    },
    get size() {
      return waiting.size;
    },
  };
}

/**
 * Asks `worker` to close (the message `"close"`, which both threads take as their last) and resolves once it has
 * exited. The thread is held until then, or a process with nothing else to do would end before it finished.
 */
export function closeWorker(worker: Worker): Promise<void> {
  const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  worker.ref();
  worker.postMessage("close");
  return exited;
}
