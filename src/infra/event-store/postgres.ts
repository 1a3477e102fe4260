import { randomUUID } from "node:crypto";
import pg from "pg";
import { Observable } from "rxjs";
import {
  type EventStore,
  type ExpectedRevision,
  type NewEntry,
  type RecordedEntry,
  type StreamInfo,
  type SubscribeOptions,
  type SummaryPage,
  type SummaryQuery,
  WrongExpectedRevisionError,
} from "../../engine/ports/event-store.ts";
import { createCatchUpThenLive } from "./catch-up-then-live.ts";
import { encodeEntries } from "./codec.ts";
import { redactUrl } from "./open.ts";
import { commitGroupOn, type Outcome, type Pending } from "./postgres-appends.ts";
import { deleteStreamRows, takeFence } from "./postgres-fences.ts";
import { ALL, CATCH_UP_PAGE, catchUpQuery, pollQuery, streamQuery } from "./postgres-reads.ts";
import { APPEND_LOCK, CHANNEL, checkReadable, type EntryRow, SCHEMA, toRecorded } from "./postgres-schema.ts";
import { refreshSummaries, summaryPageOf, summaryQuerySql } from "./postgres-summaries.ts";
import { EventStoreClosedError, ReadOnlyStoreError } from "./sqlite.ts";

export { createPostgresNodeLeases, type PostgresNodeLeasesOptions } from "./postgres-leases.ts";

/** Options of `createPostgresEventStore`. */
export interface PostgresEventStoreOptions {
  /** `postgres://user:password@host:port/database` (libpq's URL, as `pg` reads it). */
  readonly url: string;
  /**
   * How often live subscriptions look for entries other nodes appended, ms (default 100). A NOTIFY from a writer
   * wakes them sooner; it is only a hint, never trusted for what it says.
   */
  readonly pollMs?: number;
  /** Connections for reads and polls (default 4); appends have one of their own. */
  readonly readConnections?: number;
  /**
   * PostgreSQL ends an append transaction whose node stops sending for this long, ms (default 2000:
   * `idle_in_transaction_session_timeout`), so a node paused or cut off inside a transaction releases the append
   * lock to the others; its append then fails, and that node's sessions are fenced.
   */
  readonly transactionTimeoutMs?: number;
  /** Observes each group commit: how many appends and entries it held, and how long its transaction took (ms). */
  readonly onGroupCommit?: (appends: number, entries: number, ms: number) => void;
  /**
   * Opens the store read-only (default false), for the commands that only read (`duplex sessions`, `show`, `replay`,
   * `gc --dry-run`, ...): a role with CONNECT and SELECT alone, or a hot standby, is enough. No DDL, no write, no
   * summary refreshed, no append connection; LISTEN only once something subscribes (and polling alone where it is
   * refused). The tables must be there: a database without them holds no sessions (an error saying so). `append`,
   * `deleteStream`, `rebuildSummaries` and `fence` reject with ReadOnlyStoreError (sqlite.ts).
   */
  readonly readOnly?: boolean;
}

/**
 * The PostgreSQL EventStore adapter (issue 22, part 2), through `pg` (node-postgres): it sends a `Buffer` parameter
 * in binary format, so audio goes to `bytea` as bytes, never as hex text (postgres.js sends every parameter as
 * text: docs/benchmarks.md measures both). Reads get `bytea` as hex text, which `pg` decodes (its binary results
 * parse text columns wrongly in queries with parameters).
 *
 * Layout: `duplex_entries` (one row per entry: global `position`, `revision` in its stream, unique (stream,
 * revision), `data` the JSON of `encodeData` and `bin` its binary values raw, `metadata` JSON) and `duplex_streams`
 * (last revision, first position and `metadata.at` of the first and last entries, for `listStreams` and the
 * revision check), `duplex_summaries` (postgres-summaries.ts: each stream's summary, for `listSummaries`, written in
 * the same transaction as its entries). Created when missing, under the append lock (two nodes may start at once);
 * streams without a summary, or with one behind them (appended by a node of an earlier version), are then summarised
 * from their logs, a short transaction each.
 *
 * Group commit: the appends that arrive while a transaction runs are stored together in the next one, on a
 * connection of their own. Each transaction takes one advisory lock (`pg_advisory_xact_lock`), so appends from every
 * node commit one group at a time, positions are given in commit order (a tail by position never skips an entry
 * committed later), and each append's expected revision is checked against the stream's row under that lock; an
 * append that does not match stores nothing and the others of the group go on. A transaction that fails whole (a
 * lost connection) is retried append by append, so each outcome names its own cause. Nothing is written without the
 * lock, so a node that lost a session (another appended to its stream) can never append after it: its expected
 * revision no longer matches (the fence of issue 22, part 4).
 *
 * Fences (issue 33, part 2): `duplex_fences` holds, per stream, the store instance that fences it for a takeover and
 * until when (the database's clock). An append transaction reads its streams' fences with their heads, under the
 * same lock: an append through another instance to a stream fenced and unexpired stores nothing and is refused as a
 * conflict; the fencing instance's own append lifts its fence in the same transaction.
 *
 * `subscribe` delivers the stored entries, then live ones: those appended through this instance at once, and those
 * other nodes appended by polling the subscribed streams by position every `pollMs` (sooner on a NOTIFY).
 *
 * `readOnly` (the commands that only read): see {@link PostgresEventStoreOptions.readOnly}.
 *
 * @throws Error from `pg` when the server cannot be reached or the schema cannot be created (from the factory); with
 *   `readOnly`, Error saying that the database holds no sessions when it lacks the tables, or which GRANT its role
 *   lacks.
 */
export async function createPostgresEventStore(options: PostgresEventStoreOptions): Promise<EventStore> {
  const pollMs = options.pollMs ?? 100;
  const readOnly = options.readOnly === true;
  /** The store in errors: the URL without its password. */
  const where = redactUrl(options.url);
  /** This instance in `duplex_fences.holder`: a node's store, told apart from the other nodes'. */
  const instance = randomUUID();
  const reads = new pg.Pool({ connectionString: options.url, max: options.readConnections ?? 4 });
  reads.on("error", () => undefined);
  /** The appends' connection: opened again after one failed (a cut network, a transaction PostgreSQL ended). */
  let writer: pg.Client | null = null;
  const connectWriter = async (): Promise<pg.Client> => {
    const client = new pg.Client({
      connectionString: options.url,
      idle_in_transaction_session_timeout: options.transactionTimeoutMs ?? 2000,
    });
    client.on("error", () => {
      if (writer === client) writer = null;
    });
    await client.connect();
    writer = client;
    return client;
  };
  const lockAppends = async (client: pg.ClientBase): Promise<void> => {
    await client.query("SELECT pg_advisory_xact_lock($1)", [APPEND_LOCK.toString()]);
  };
  /** Whether `duplex_summaries` is there (a read-only store of an earlier release may lack it; else created). */
  let summariesThere = true;
  if (readOnly) {
    try {
      summariesThere = (await checkReadable(reads, where)).summaries;
    } catch (error) {
      await reads.end().catch(() => undefined);
      throw error;
    }
  } else {
    const setup = await connectWriter();
    await setup.query("BEGIN");
    await setup.query("SELECT pg_advisory_xact_lock($1)", [APPEND_LOCK.toString()]);
    await setup.query(SCHEMA);
    await setup.query("COMMIT");
    await refreshSummaries(reads, lockAppends, false);
  }

  let closed = false;
  let queue: Pending[] = [];
  let flushing: Promise<void> | null = null;

  /** One group in one transaction; the outcomes in the order of `group`. @throws the driver's error. */
  const commitGroup = async (group: readonly Pending[]): Promise<Outcome[]> => {
    const db = writer ?? (await connectWriter());
    try {
      return await commitGroupOn(db, group, instance);
    } catch (error) {
      // The connection may be broken: the next group opens another.
      if (writer === db) writer = null;
      void db.end().catch(() => undefined);
      throw error;
    }
  };

  const flush = async (): Promise<void> => {
    while (queue.length > 0) {
      const group = queue;
      queue = [];
      try {
        const started = performance.now();
        const outcomes = await commitGroup(group);
        options.onGroupCommit?.(
          group.length,
          group.reduce((n, p) => n + p.entries.length, 0),
          performance.now() - started,
        );
        for (const [i, p] of group.entries()) p.resolve(outcomes[i] as Outcome);
      } catch (error) {
        if (group.length === 1) {
          group[0]?.reject(error as Error);
          continue;
        }
        // Each on its own, so each outcome names its own cause.
        for (const p of group) {
          try {
            const [outcome] = await commitGroup([p]);
            p.resolve(outcome as Outcome);
          } catch (one) {
            p.reject(one as Error);
          }
        }
      }
    }
    flushing = null;
  };

  const append = async (stream: string, entries: readonly NewEntry[], expected: ExpectedRevision): Promise<number> => {
    if (closed) throw new EventStoreClosedError(`append to stream ${stream}`);
    if (readOnly) throw new ReadOnlyStoreError(where, `append to stream ${stream}`);
    if (stream === ALL) throw new Error(`cannot append to stream ${ALL}: it names every stream in subscribe`);
    const encoded = encodeEntries(stream, entries);
    const outcome = await new Promise<Outcome>((resolve, reject) => {
      queue.push({ stream, expected, entries: encoded, resolve, reject });
      flushing ??= new Promise<void>((go) => setImmediate(go)).then(flush);
    });
    if (!outcome.ok)
      throw new WrongExpectedRevisionError(
        stream,
        expected,
        outcome.actual,
        outcome.fenced ? { cause: new Error(`stream ${stream} is fenced for another node's takeover`) } : undefined,
      );
    if (!outcome.retry) dispatch(outcome.rows);
    return outcome.revision;
  };

  const selectRows = async (text: string, values: readonly unknown[]): Promise<EntryRow[]> =>
    (await reads.query<EntryRow>(text, [...values])).rows;
  const read = async (stream: string, from = 0, limit?: number): Promise<RecordedEntry[]> => {
    if (closed) throw new EventStoreClosedError(`read stream ${stream}`);
    const query = streamQuery(stream, from, limit);
    const rows = await selectRows(query.text, query.values);
    return rows.map(toRecorded);
  };

  // Live delivery: every subscription is a listener of the rows this instance committed and of those the poller
  // finds; each keeps the key of the next entry it owes, so a row met twice is delivered once.
  const listeners = new Set<{
    readonly stream: string;
    /** The types it reads (null: all): the poller fetches the bodies of the others' rows only where someone reads them. */
    readonly types: readonly string[] | null;
    readonly take: (rows: readonly EntryRow[]) => void;
  }>();
  const completers = new Set<() => void>();
  /** Subscriptions still reading what was stored before them. */
  const catchUps = new Set<Promise<void>>();
  const dispatch = (rows: readonly EntryRow[]): void => {
    if (rows.length === 0) return;
    for (const listener of [...listeners]) listener.take(rows);
  };

  // The poller: entries after the highest position seen, of the streams someone follows. `seen` is read afresh when
  // the first subscription starts (before its catch-up read): every entry at or below it is in that read, every
  // one above it comes from a poll.
  let seen = 0;
  let seenKnown = false;
  let pollTimer: NodeJS.Timeout | null = null;
  let polling = false;
  const readSeen = async (): Promise<void> => {
    const top = await reads.query<{ position: string }>(
      "SELECT coalesce(max(position), 0)::text AS position FROM duplex_entries",
    );
    seen = Math.max(seen, Number(top.rows[0]?.position ?? 0));
    seenKnown = true;
  };
  const poll = async (): Promise<void> => {
    if (polling || closed || listeners.size === 0 || !seenKnown) return;
    polling = true;
    try {
      const page = pollQuery([...listeners]);
      for (;;) {
        const query = page(seen);
        const rows = await selectRows(query.text, query.values);
        if (rows.length === 0) break;
        seen = Number(rows.at(-1)?.position ?? seen);
        dispatch(rows);
        if (rows.length < CATCH_UP_PAGE) break;
      }
    } catch {
      // A failed poll is tried again at the next tick.
    } finally {
      polling = false;
    }
  };
  const startPolling = (): void => {
    pollTimer ??= setInterval(() => void poll(), pollMs);
    pollTimer.unref();
  };
  // NOTIFY: a hint to poll now. A read-only store listens once something subscribes (the commands that only read
  // never do), and polls alone where LISTEN is refused (a hot standby).
  let listener: pg.Client | null = null;
  const listen = async (): Promise<void> => {
    const client = new pg.Client({ connectionString: options.url });
    listener = client;
    client.on("error", () => undefined);
    client.on("notification", () => void poll());
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
  };
  if (!readOnly) await listen();

  const subscribe = (stream: string, from?: number, wanted: SubscribeOptions = {}): Observable<RecordedEntry> =>
    new Observable<RecordedEntry>((subscriber) => {
      if (closed) {
        subscriber.error(new EventStoreClosedError(`subscribe to ${stream}`));
        return;
      }
      const all = stream === ALL;
      const keyOf = (row: { position: string; revision: number }): number =>
        all ? Number(row.position) : row.revision;
      const catchUp = (from: number): Promise<EntryRow[]> => {
        const query = catchUpQuery(stream, from);
        return selectRows(query.text, query.values);
      };
      const types = wanted.types === undefined ? null : new Set(wanted.types);
      // The poller and this instance's appends may both bring a row; the seam keeps it once, and a row past a gap
      // waits (`$all` by position; a stream by revision) until a catch-up read fills it.
      const seam = createCatchUpThenLive<EntryRow>({
        from: from ?? (all ? 1 : 0),
        keyOf,
        // An entry of a type the subscriber does not read is passed over undecoded.
        emit: (row) => {
          if (types === null || types.has(row.type)) subscriber.next(toRecorded(row));
        },
        isClosed: () => subscriber.closed,
        gapFill: { read: catchUp, fail: (error) => subscriber.error(error) },
      });
      const take = (rows: readonly EntryRow[]): void =>
        seam.live(all ? rows : rows.filter((row) => row.stream === stream));
      const self = { stream, types: wanted.types === undefined ? null : [...wanted.types], take };
      const complete = (): void => subscriber.complete();
      completers.add(complete);
      const catchUp_ = (async () => {
        try {
          if (listener === null) await listen().catch(() => undefined);
          if (!seenKnown) await readSeen();
          if (subscriber.closed) return;
          // Listen before reading, so nothing appended from here on can fall between the catch-up and the live part.
          listeners.add(self);
          startPolling();
          await seam.catchUp(
            catchUp,
            (row) => row,
            () => subscriber.closed,
          );
        } catch (error) {
          if (!closed) subscriber.error(error);
        }
      })();
      // A store that closes first lets the catch-up end: what was stored before is delivered.
      catchUps.add(catchUp_);
      void catchUp_.finally(() => catchUps.delete(catchUp_));
      return () => {
        listeners.delete(self);
        completers.delete(complete);
        if (listeners.size === 0) seenKnown = false;
      };
    });

  const listStreams = async (prefix: string): Promise<StreamInfo[]> => {
    if (closed) throw new EventStoreClosedError(`list streams with prefix ${prefix}`);
    const { rows } = await reads.query<{ stream: string; revision: number; first_at: number; last_at: number }>(
      "SELECT stream, revision, first_at, last_at FROM duplex_streams WHERE left(stream, length($1)) = $1 ORDER BY first_position",
      [prefix],
    );
    return rows.map((r) => ({
      stream: r.stream,
      revision: r.revision,
      count: r.revision + 1,
      firstAt: r.first_at,
      lastAt: r.last_at,
    }));
  };

  const listSummaries = async (query: SummaryQuery): Promise<SummaryPage> => {
    if (closed) throw new EventStoreClosedError(`list summaries with prefix ${query.prefix}`);
    if (!(query.limit >= 1)) throw new RangeError(`listSummaries: limit must be at least 1, got ${query.limit}`);
    if (!summariesThere)
      throw new Error(
        `${where} has no table duplex_summaries (a store of an earlier release): a server creates it when it next starts on the database`,
      );
    const { text, values } = summaryQuerySql(query);
    const { rows } = await reads.query<{ stream: string; first_at: number; fold: string }>(text, values);
    return summaryPageOf(rows, query.limit);
  };

  const rebuildSummaries = async (): Promise<number> => {
    if (closed) throw new EventStoreClosedError("rebuild the summaries");
    if (readOnly) throw new ReadOnlyStoreError(where, "rebuild the summaries");
    await flushing;
    return refreshSummaries(reads, lockAppends, true);
  };

  const fence = async (stream: string, ms: number): Promise<number | "no_stream" | null> => {
    if (closed) throw new EventStoreClosedError(`fence stream ${stream}`);
    if (readOnly) throw new ReadOnlyStoreError(where, `fence stream ${stream}`);
    return takeFence(reads, stream, instance, ms);
  };

  const deleteStream = async (stream: string): Promise<boolean> => {
    if (closed) throw new EventStoreClosedError(`delete stream ${stream}`);
    if (readOnly) throw new ReadOnlyStoreError(where, `delete stream ${stream}`);
    await flushing;
    return deleteStreamRows(reads, stream);
  };

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await Promise.allSettled([...catchUps]);
    for (const complete of [...completers]) complete();
    listeners.clear();
    completers.clear();
    if (pollTimer !== null) clearInterval(pollTimer);
    // Appends already made still commit.
    await flushing;
    await Promise.allSettled([writer?.end(), listener?.end(), reads.end()]);
  };

  return { append, read, subscribe, listStreams, listSummaries, rebuildSummaries, deleteStream, fence, close };
}
