import pg from "pg";
import { Observable } from "rxjs";
import type { RecordedEntry, SubscribeOptions } from "../../engine/ports/event-store.ts";
import { createCatchUpThenLive } from "./catch-up-then-live.ts";
import { ALL, CATCH_UP_PAGE, catchUpQuery, pollQuery } from "./postgres-reads.ts";
import { CHANNEL, type EntryRow, toRecorded } from "./postgres-schema.ts";
import { EventStoreClosedError } from "./store-errors.ts";

/** The rows of a query on the store's read pool. */
export const selectRows = async (reads: pg.Pool, text: string, values: readonly unknown[]): Promise<EntryRow[]> =>
  (await reads.query<EntryRow>(text, [...values])).rows;

/** A subscription as the poller sees it. */
interface Listener {
  readonly stream: string;
  /** The types it reads (null: all): the poller fetches the bodies of the others' rows only where someone reads them. */
  readonly types: readonly string[] | null;
  readonly take: (rows: readonly EntryRow[]) => void;
}

/**
 * The PostgreSQL store's subscriptions (postgres.ts `subscribe`). Every subscription is a listener of the rows this
 * instance committed (`dispatch`) and of those the poller finds; each keeps the key of the next entry it owes
 * (catch-up-then-live.ts), so a row met twice is delivered once, and a row past a gap waits until a catch-up read
 * fills it. The poller reads the entries after the highest position seen, of the streams someone follows, every
 * `pollMs` and on NOTIFY (a hint to poll now); `seen` is read afresh when the first subscription starts (before its
 * catch-up read): every entry at or below it is in that read, every one above it comes from a poll.
 */
export class PostgresLive {
  private readonly listeners = new Set<Listener>();
  private readonly completers = new Set<() => void>();
  /** Subscriptions still reading what was stored before them. */
  private readonly catchUps = new Set<Promise<void>>();
  private seen = 0;
  private seenKnown = false;
  private pollTimer: NodeJS.Timeout | null = null;
  private polling = false;
  /** The LISTEN connection (null: none yet). */
  private listener: pg.Client | null = null;

  /** `isClosed`: whether the store was closed (a subscription then errs, the poller stops). */
  constructor(
    private readonly reads: pg.Pool,
    private readonly url: string,
    private readonly pollMs: number,
    private readonly isClosed: () => boolean,
  ) {}

  /** Hands rows this instance committed (or the poller found) to every subscription. */
  dispatch(rows: readonly EntryRow[]): void {
    if (rows.length === 0) return;
    for (const listener of [...this.listeners]) listener.take(rows);
  }

  /**
   * LISTENs for the appends' NOTIFY on a connection of its own. A read-only store listens once something subscribes
   * (the commands that only read never do), and polls alone where LISTEN is refused (a hot standby).
   * @throws the driver's error when the connection or LISTEN fails.
   */
  async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    this.listener = client;
    client.on("error", () => undefined);
    client.on("notification", () => void this.poll());
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
  }

  /** The stored entries of `stream` (or of every stream: `$all`) from `from`, then the later ones. */
  subscribe(stream: string, from?: number, wanted: SubscribeOptions = {}): Observable<RecordedEntry> {
    return new Observable<RecordedEntry>((subscriber) => {
      if (this.isClosed()) {
        subscriber.error(new EventStoreClosedError(`subscribe to ${stream}`));
        return;
      }
      const all = stream === ALL;
      const catchUp = (next: number): Promise<EntryRow[]> => {
        const query = catchUpQuery(stream, next);
        return selectRows(this.reads, query.text, query.values);
      };
      const types = wanted.types === undefined ? null : new Set(wanted.types);
      const seam = createCatchUpThenLive<EntryRow>({
        from: from ?? (all ? 1 : 0),
        keyOf: (row) => (all ? Number(row.position) : row.revision),
        // An entry of a type the subscriber does not read is passed over undecoded.
        emit: (row) => {
          if (types === null || types.has(row.type)) subscriber.next(toRecorded(row));
        },
        isClosed: () => subscriber.closed,
        gapFill: { read: catchUp, fail: (error) => subscriber.error(error) },
      });
      const take = (rows: readonly EntryRow[]): void =>
        seam.live(all ? rows : rows.filter((row) => row.stream === stream));
      const self: Listener = { stream, types: wanted.types === undefined ? null : [...wanted.types], take };
      const complete = (): void => subscriber.complete();
      this.completers.add(complete);
      const caughtUp = (async () => {
        try {
          if (this.listener === null) await this.listen().catch(() => undefined);
          if (!this.seenKnown) await this.readSeen();
          if (subscriber.closed) return;
          // Listen before reading, so nothing appended from here on can fall between the catch-up and the live part.
          this.listeners.add(self);
          this.startPolling();
          await seam.catchUp(
            catchUp,
            (row) => row,
            () => subscriber.closed,
          );
        } catch (error) {
          if (!this.isClosed()) subscriber.error(error);
        }
      })();
      // A store that closes first lets the catch-up end: what was stored before is delivered.
      this.catchUps.add(caughtUp);
      void caughtUp.finally(() => this.catchUps.delete(caughtUp));
      return () => {
        this.listeners.delete(self);
        this.completers.delete(complete);
        if (this.listeners.size === 0) this.seenKnown = false;
      };
    });
  }

  /** The store closes: the catch-ups end, every subscription completes, the poller stops. */
  async stop(): Promise<void> {
    await Promise.allSettled([...this.catchUps]);
    for (const complete of [...this.completers]) complete();
    this.listeners.clear();
    this.completers.clear();
    if (this.pollTimer !== null) clearInterval(this.pollTimer);
  }

  /** Ends the LISTEN connection. */
  async end(): Promise<void> {
    await this.listener?.end();
  }

  private async readSeen(): Promise<void> {
    const top = await this.reads.query<{ position: string }>(
      "SELECT coalesce(max(position), 0)::text AS position FROM duplex_entries",
    );
    this.seen = Math.max(this.seen, Number(top.rows[0]?.position ?? 0));
    this.seenKnown = true;
  }

  private async poll(): Promise<void> {
    if (this.polling || this.isClosed() || this.listeners.size === 0 || !this.seenKnown) return;
    this.polling = true;
    try {
      const page = pollQuery([...this.listeners]);
      for (;;) {
        const query = page(this.seen);
        const rows = await selectRows(this.reads, query.text, query.values);
        if (rows.length === 0) break;
        this.seen = Number(rows.at(-1)?.position ?? this.seen);
        this.dispatch(rows);
        if (rows.length < CATCH_UP_PAGE) break;
      }
    } catch {
      // A failed poll is tried again at the next tick.
    } finally {
      this.polling = false;
    }
  }

  private startPolling(): void {
    this.pollTimer ??= setInterval(() => void this.poll(), this.pollMs);
    this.pollTimer.unref();
  }
}
