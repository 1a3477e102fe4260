import { Observable } from "rxjs";
import type { RecordedEntry } from "../../engine/ports/event-store.ts";
import { createCatchUpThenLive } from "./catch-up-then-live.ts";
import { type EntryRow, type StoreReads, toRecorded } from "./sqlite-rows.ts";
import { EventStoreClosedError } from "./store-errors.ts";

/** The name `subscribe` takes for every stream; no entry can be appended to it. */
export const ALL = "$all";

/** Rows read per query while a subscription catches up, so a long stream never sits whole in memory. */
const CATCH_UP_PAGE = 256;

/**
 * The sqlite store's subscriptions (sqlite.ts `subscribe`): each catches up from the file by pages, then follows the
 * batches this instance committed (`dispatch`, in commit order), through the shared catch-up-then-live seam. Appends
 * by another process on the same file are not seen live.
 */
export class LiveFeed {
  /** Called with every committed batch, in commit order. */
  private readonly listeners = new Set<(entries: readonly RecordedEntry[]) => void>();
  /** Completes every open subscription. */
  private readonly completers = new Set<() => void>();
  /** Committed batches not yet handed to every listener. */
  private readonly dispatchQueue: (readonly RecordedEntry[])[] = [];
  private dispatching = false;

  /** `isClosed`: whether the store was closed (a subscription then errs, and a catch-up stops). */
  constructor(
    private readonly reads: StoreReads,
    private readonly isClosed: () => boolean,
  ) {}

  /**
   * Hands `rows` to every listener. A batch appended by a listener (a subscriber appending from `next`) waits in the
   * queue until the current batch has reached every listener, so all of them see batches in commit order.
   */
  dispatch(rows: readonly EntryRow[]): void {
    if (this.listeners.size === 0 || rows.length === 0) return;
    // Decoded from what was stored, so live subscribers get the same copies and shapes as readers.
    this.dispatchQueue.push(rows.map(toRecorded));
    if (this.dispatching) return;
    this.dispatching = true;
    try {
      for (let batch = this.dispatchQueue.shift(); batch !== undefined; batch = this.dispatchQueue.shift()) {
        for (const listener of this.listeners) listener(batch);
      }
    } finally {
      this.dispatching = false;
    }
  }

  /** The stored entries of `stream` (or of every stream: {@link ALL}) from `from`, then those committed later. */
  subscribe(stream: string, from?: number): Observable<RecordedEntry> {
    return new Observable<RecordedEntry>((subscriber) => {
      if (this.isClosed()) {
        subscriber.error(new EventStoreClosedError(`subscribe to ${stream}`));
        return;
      }
      const all = stream === ALL;
      const seam = createCatchUpThenLive<RecordedEntry>({
        from: from ?? (all ? 1 : 0),
        keyOf: (entry) => (all ? entry.position : entry.revision),
        emit: (entry) => subscriber.next(entry),
        isClosed: () => subscriber.closed,
      });
      const listener = (entries: readonly RecordedEntry[]): void =>
        seam.live(all ? entries : entries.filter((entry) => entry.stream === stream));
      const complete = (): void => subscriber.complete();
      // Listen before reading, so nothing appended from here on can fall between the catch-up and the live part.
      this.listeners.add(listener);
      this.completers.add(complete);
      try {
        seam.catchUpSync(
          (next) =>
            all ? this.reads.fromAll.all(next, CATCH_UP_PAGE) : this.reads.fromStream.all(stream, next, CATCH_UP_PAGE),
          toRecorded,
          () => subscriber.closed || this.isClosed(),
        );
      } catch (error) {
        subscriber.error(error);
      }
      return () => {
        this.listeners.delete(listener);
        this.completers.delete(complete);
      };
    });
  }

  /** Completes every open subscription (the store closes). */
  completeAll(): void {
    for (const complete of [...this.completers]) complete();
    this.listeners.clear();
    this.completers.clear();
  }
}
