/**
 * The seam of a store subscription (issue 34, part 5): catch up from a revision by reading pages of what is stored,
 * then follow live appends, with no gap and no duplicate where the two meet. The sqlite and PostgreSQL adapters
 * build `subscribe` on it with their own read (a page of rows from a key on) and notify (the rows their appends
 * committed, and for PostgreSQL those its poller finds) primitives; KurrentDB's client does its own catch-up.
 *
 * The key of a row is its revision in its stream, or its global position for `$all`. The seam keeps `next`, the key
 * of the next row owed: a row below it is a duplicate and is dropped. The adapter registers its live listener before
 * the catch-up starts, so a row committed while catching up waits in `pending` and is delivered once the catch-up
 * has read to the end: a row met twice (read and notified) is delivered once.
 */

/** What the seam needs of one adapter. `T` is the adapter's row (its own shape; sqlite gives decoded entries). */
export interface CatchUpThenLiveOptions<T> {
  /** The key of the first row to deliver (a revision, or a position for `$all`). */
  readonly from: number;
  /** The row's revision, or its position for `$all`. */
  readonly keyOf: (row: T) => number;
  /** Hands one row to the subscriber (decoding it, or passing over a type it does not read, as the adapter likes). */
  readonly emit: (row: T) => void;
  /** Whether the subscriber has unsubscribed (or errored, or completed): nothing more is delivered then. */
  readonly isClosed: () => boolean;
  /**
   * For live rows that may come out of order or past a gap (PostgreSQL: its own appends and the poller's rows of
   * other nodes): pending rows are then kept sorted by key, and one past `next` waits while `read(next)` fills the
   * gap; an error of that read goes to `fail`. Without it, live rows are delivered in the order they arrive (sqlite:
   * one process commits and notifies in commit order).
   */
  readonly gapFill?: {
    readonly read: (next: number) => Promise<readonly T[]>;
    readonly fail: (error: unknown) => void;
  };
}

/** One subscription's seam: feed it live rows, and run its catch-up once. */
export interface CatchUpThenLive<T> {
  /** Live rows of the subscribed stream (the adapter filters by stream first), in commit order. */
  readonly live: (rows: readonly T[]) => void;
  /**
   * Reads pages of stored rows `R` from `next` until one is empty (or `stopped()`), delivering each row as `decode`
   * makes it (one at a time, so a row that cannot be decoded fails after those before it were delivered), then goes
   * live: the rows that arrived meanwhile are delivered after. @throws what `read` or `decode` throws (the seam then
   * stays catching up: nothing live is delivered).
   */
  readonly catchUpSync: <R>(
    read: (next: number) => readonly R[],
    decode: (row: R) => T,
    stopped: () => boolean,
  ) => void;
  /** {@link CatchUpThenLive.catchUpSync} with an asynchronous read. @throws (rejects with) what `read` rejects with. */
  readonly catchUp: <R>(
    read: (next: number) => Promise<readonly R[]>,
    decode: (row: R) => T,
    stopped: () => boolean,
  ) => Promise<void>;
}

/** Makes the seam of one subscription (see the module docstring). */
export function createCatchUpThenLive<T>(options: CatchUpThenLiveOptions<T>): CatchUpThenLive<T> {
  const { keyOf, emit, isClosed, gapFill } = options;
  /** The key of the next row to deliver; anything below is a duplicate. */
  let next = options.from;
  /** Live rows not delivered yet: appends made while catching up, or by a subscriber's own `next`. */
  const pending: T[] = [];
  let catchingUp = true;
  let draining = false;
  let filling = false;

  const deliver = (row: T): void => {
    if (keyOf(row) < next) return;
    next = keyOf(row) + 1;
    emit(row);
  };
  // A queue drained by one loop keeps the order when a subscriber appends from inside `next`.
  const drain = (): void => {
    if (draining || catchingUp) return;
    draining = true;
    try {
      for (let row = pending.shift(); row !== undefined; row = pending.shift()) {
        if (isClosed()) break;
        // A row past a gap waits until the read below fills it.
        if (gapFill !== undefined && keyOf(row) > next) {
          pending.unshift(row);
          void fill();
          break;
        }
        deliver(row);
      }
    } finally {
      draining = false;
    }
  };
  /** Reads what lies between `next` and a row that arrived ahead of it. */
  const fill = async (): Promise<void> => {
    if (filling || gapFill === undefined) return;
    filling = true;
    try {
      const rows = await gapFill.read(next);
      for (const row of rows) if (!isClosed()) deliver(row);
    } catch (error) {
      gapFill.fail(error);
    } finally {
      filling = false;
    }
    drain();
  };
  const live = (rows: readonly T[]): void => {
    for (const row of rows) pending.push(row);
    if (gapFill !== undefined) pending.sort((a, b) => keyOf(a) - keyOf(b));
    drain();
  };
  const deliverPage = <R>(rows: readonly R[], decode: (row: R) => T): void => {
    for (const row of rows) {
      if (isClosed()) break;
      deliver(decode(row));
    }
  };
  const goLive = (): void => {
    catchingUp = false;
    drain();
  };
  const catchUpSync = <R>(
    read: (next: number) => readonly R[],
    decode: (row: R) => T,
    stopped: () => boolean,
  ): void => {
    while (!stopped()) {
      const rows = read(next);
      if (rows.length === 0) break;
      deliverPage(rows, decode);
    }
    goLive();
  };
  const catchUp = async <R>(
    read: (next: number) => Promise<readonly R[]>,
    decode: (row: R) => T,
    stopped: () => boolean,
  ): Promise<void> => {
    while (!stopped()) {
      const rows = await read(next);
      if (rows.length === 0) break;
      deliverPage(rows, decode);
    }
    goLive();
  };
  return { live, catchUpSync, catchUp };
}
