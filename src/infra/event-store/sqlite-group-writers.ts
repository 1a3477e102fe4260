/**
 * Where a sqlite store's appends go (sqlite.ts): a writer that commits groups of appends on this thread (one
 * transaction per event-loop turn), one on a worker thread (sqlite-writer-worker.mjs, at most one group per 2 ms under
 * load), or the writer of a read-only store, which refuses every write.
 */
import { Worker } from "node:worker_threads";
import { createFlushTimer } from "../flush-timer.ts";
import { closeWorker, createPendingCalls } from "../worker-calls.ts";
import type { AppendOutcome, AppendRequest, StoreWriter } from "./sqlite-writer.ts";
import { ReadOnlyStoreError } from "./store-errors.ts";

/** The least time between two groups sent to the writer thread under load, ms (flush-timer.ts). */
const WRITER_FLUSH_MS = 2;

/** Where appends go: a writer on this thread or on a worker, both committing groups. */
export interface GroupWriter {
  append(request: AppendRequest): Promise<AppendOutcome>;
  deleteStream(stream: string): Promise<boolean>;
  /** Waits for the appends made so far, then folds every summary again (StoreWriter's `rebuildSummaries`). */
  rebuildSummaries(): Promise<number>;
  /** Waits for every append made so far, then releases the writer. */
  close(): Promise<void>;
}

/** An error as the writer reports it, back to an `Error` with the same name, message and code. */
type Failure = { readonly name: string; readonly message: string; readonly code?: string };
export const errorOf = (failure: Failure): Error => Object.assign(new Error(failure.message), failure);

/** The writer of a store opened read-only: every write rejects with {@link ReadOnlyStoreError}. */
export function readOnlyWriter(path: string): GroupWriter {
  return {
    append: async (request) => {
      throw new ReadOnlyStoreError(path, `append to stream ${request.stream}`);
    },
    deleteStream: async (stream) => {
      throw new ReadOnlyStoreError(path, `delete stream ${stream}`);
    },
    rebuildSummaries: async () => {
      throw new ReadOnlyStoreError(path, "rebuild the summaries");
    },
    close: async () => undefined,
  };
}

/** Commits the appends of one event-loop turn together, on this thread (for `:memory:`, or by choice). */
export function mainThreadWriter(writer: StoreWriter): GroupWriter {
  let group: { request: AppendRequest; resolve: (outcome: AppendOutcome) => void }[] = [];
  let flushed = Promise.resolve();
  const flush = (): void => {
    const now = group;
    group = [];
    if (now.length === 0) return;
    const outcomes = writer.writeGroup(now.map((one) => one.request));
    for (const [i, one] of now.entries()) one.resolve(outcomes[i] as AppendOutcome);
  };
  return {
    append: (request) =>
      new Promise((resolve) => {
        if (group.length === 0) flushed = new Promise((done) => setImmediate(() => done(flush())));
        group.push({ request, resolve });
      }),
    deleteStream: async (stream) => {
      if (group.length > 0) flush();
      return writer.deleteStream(stream);
    },
    rebuildSummaries: async () => {
      if (group.length > 0) flush();
      return writer.rebuildSummaries();
    },
    close: () => flushed,
  };
}

/**
 * Commits on a worker thread (sqlite-writer-worker.mjs): the appends waiting go over as one message, at most one per
 * {@link WRITER_FLUSH_MS} under load (flush-timer.ts).
 */
export function workerWriter(path: string): GroupWriter {
  const worker = new Worker(new URL("./sqlite-writer-worker.mjs", import.meta.url), { workerData: { path } });
  const pending = createPendingCalls<WorkerReply>(worker);
  let failed: Error | null = null;
  let group: { request: AppendRequest; resolve: (outcome: AppendOutcome) => void; reject: (e: Error) => void }[] = [];
  const fail = (error: Error): void => {
    failed ??= error;
    pending.rejectAll(error);
  };
  worker.on("message", (message: WorkerReply | { ready: true } | { openError: string }) => {
    if ("ready" in message) return;
    if ("openError" in message) {
      fail(new Error(`the store's writer thread could not open ${path}: ${message.openError}`));
      return;
    }
    pending.resolve(message.id, message);
  });
  worker.on("error", (error) => fail(error));
  worker.on("exit", (code) => fail(new Error(`the store's writer thread exited (code ${code})`)));

  const call = (message: Record<string, unknown>): Promise<WorkerReply> => {
    if (failed !== null) return Promise.reject(failed);
    const { id, answer } = pending.add();
    worker.postMessage({ id, ...message });
    return answer;
  };
  const timer = createFlushTimer(() => {
    const now = group;
    group = [];
    if (now.length === 0) return;
    call({ append: now.map((one) => one.request) }).then(
      (reply) => {
        if ("outcomes" in reply) for (const [i, one] of now.entries()) one.resolve(reply.outcomes[i] as AppendOutcome);
        else for (const one of now) one.reject(errorOf("failure" in reply ? reply.failure : unexpected(reply)));
      },
      (error: Error) => {
        for (const one of now) one.reject(error);
      },
    );
  }, WRITER_FLUSH_MS);
  return {
    append: (request) =>
      new Promise((resolve, reject) => {
        group.push({ request, resolve, reject });
        timer.schedule();
      }),
    deleteStream: async (stream) => {
      timer.now();
      const reply = await call({ deleteStream: stream });
      if ("deleted" in reply) return reply.deleted;
      throw errorOf("failure" in reply ? reply.failure : unexpected(reply));
    },
    rebuildSummaries: async () => {
      timer.now();
      const reply = await call({ rebuildSummaries: true });
      if ("rebuilt" in reply) return reply.rebuilt;
      throw errorOf("failure" in reply ? reply.failure : unexpected(reply));
    },
    close: async () => {
      timer.now();
      // The worker answers in order, so once this round trip is answered, every append before it is.
      if (failed === null) await call({ sync: true }).catch(() => undefined);
      await closeWorker(worker);
    },
  };
}

type WorkerReply =
  | { readonly id: number; readonly outcomes: readonly AppendOutcome[] }
  | { readonly id: number; readonly deleted: boolean }
  | { readonly id: number; readonly rebuilt: number }
  | { readonly id: number; readonly synced: true }
  | { readonly id: number; readonly failure: Failure };

const unexpected = (reply: unknown): Failure => ({
  name: "Error",
  message: `unexpected reply from the store's writer thread: ${JSON.stringify(reply)}`,
});
