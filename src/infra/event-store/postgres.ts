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
import { NodeIdInUseError, type NodeLeases } from "../../engine/ports/node-leases.ts";
import { foldSessionSummary, type SessionSummaryState } from "../../projections/session-summary.ts";
import { createCatchUpThenLive } from "./catch-up-then-live.ts";
import { decodeData, type EncodedEntry, encodeEntries } from "./codec.ts";
import { redactUrl } from "./open.ts";
import {
  foldStored,
  parseFold,
  refreshSummaries,
  SUMMARY_SCHEMA,
  summaryColumns,
  summaryEntryOf,
  summaryPageOf,
  summaryQuerySql,
  upsertSummaries,
} from "./postgres-summaries.ts";
import { EventStoreClosedError, ReadOnlyStoreError } from "./sqlite.ts";

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

/** The name `subscribe` takes for every stream; no entry can be appended to it. */
const ALL = "$all";
/** Rows read per query while a subscription catches up. */
const CATCH_UP_PAGE = 256;
/** The advisory lock every append transaction takes (any 64-bit key no other code uses): one writer at a time. */
const APPEND_LOCK = 0x6475706c6578n; // "duplex"
/** The NOTIFY channel of committed appends (a wake-up hint for other nodes' live subscriptions). */
const CHANNEL = "duplex_entries";
/**
 * Rows per INSERT statement: 7 parameters each, under PostgreSQL's 65 535 parameters with the streams' five arrays
 * and the summaries' seven.
 */
const ROWS_PER_INSERT = 4096;

/** The tables a read-only store reads (`duplex_summaries` for `listSummaries` only: older stores lack it). */
const READ_TABLES = ["duplex_entries", "duplex_streams", "duplex_summaries"] as const;

/**
 * Checks that the database a read-only store opens holds the tables it reads, and that its role may read them.
 * Returns whether `duplex_summaries` is there. @throws Error saying that a database without `duplex_entries` or
 * `duplex_streams` holds no sessions, or which GRANT the role lacks; Error from `pg` when it cannot be reached.
 */
const checkReadable = async (reads: pg.Pool, where: string): Promise<{ readonly summaries: boolean }> => {
  const { rows } = await reads.query<{ name: string; found: boolean; readable: boolean | null; role: string }>(
    `SELECT t.name, to_regclass(t.name) IS NOT NULL AS found,
       CASE WHEN to_regclass(t.name) IS NOT NULL THEN has_table_privilege(to_regclass(t.name), 'SELECT') END AS readable,
       current_user AS role
     FROM unnest($1::text[]) WITH ORDINALITY AS t(name, i) ORDER BY t.i`,
    [[...READ_TABLES]],
  );
  const missing = rows.find((r) => !r.found && r.name !== "duplex_summaries");
  if (missing !== undefined)
    throw new Error(
      `no event store in ${where}: the database has no table ${missing.name}, so it holds no sessions (a duplex server creates the tables when it first starts on a database: is this the one its config names?)`,
    );
  const unreadable = rows.filter((r) => r.found && r.readable !== true).map((r) => r.name);
  if (unreadable.length > 0)
    throw new Error(
      `the role ${rows[0]?.role} may not read ${unreadable.join(", ")} in ${where}: GRANT SELECT ON ${unreadable.join(", ")} TO ${rows[0]?.role} (as their owner)`,
    );
  return { summaries: rows.some((r) => r.name === "duplex_summaries" && r.found) };
};

const SCHEMA = `
CREATE TABLE IF NOT EXISTS duplex_entries (
  position bigint PRIMARY KEY,
  stream text NOT NULL,
  revision integer NOT NULL,
  type text NOT NULL,
  data text NOT NULL,
  bin bytea,
  bin_codec text,
  metadata text NOT NULL,
  UNIQUE (stream, revision)
);
CREATE TABLE IF NOT EXISTS duplex_streams (
  stream text PRIMARY KEY,
  revision integer NOT NULL,
  first_position bigint NOT NULL,
  first_at double precision NOT NULL,
  last_at double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS duplex_streams_by_first_position ON duplex_streams (first_position);
CREATE TABLE IF NOT EXISTS duplex_fences (
  stream text PRIMARY KEY,
  holder text NOT NULL,
  expires_at timestamptz NOT NULL
);
${SUMMARY_SCHEMA}`;

interface EntryRow {
  readonly position: string;
  readonly stream: string;
  readonly revision: number;
  readonly type: string;
  readonly data: string;
  readonly bin: Buffer | null;
  readonly metadata: string;
}

/** One append waiting for the next group commit. */
interface Pending {
  readonly stream: string;
  readonly expected: ExpectedRevision;
  readonly entries: readonly EncodedEntry[];
  readonly resolve: (outcome: Outcome) => void;
  readonly reject: (error: Error) => void;
}

type Outcome =
  | { readonly ok: true; readonly revision: number; readonly rows: readonly EntryRow[]; readonly retry: boolean }
  | { readonly ok: false; readonly actual: number | "no_stream"; readonly fenced?: true };

const toRecorded = (row: EntryRow): RecordedEntry => ({
  stream: row.stream,
  revision: row.revision,
  position: Number(row.position),
  type: row.type,
  data: decodeData({ json: row.data, blob: row.bin === null ? null : new Uint8Array(row.bin) }),
  metadata: JSON.parse(row.metadata),
});

const sameEntry = (row: EntryRow, entry: EncodedEntry): boolean =>
  row.type === entry.type &&
  row.data === entry.json &&
  row.metadata === entry.metadata &&
  (row.bin === null ? entry.blob === null : entry.blob !== null && row.bin.equals(entry.blob));

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
      return await commitOn(db, group);
    } catch (error) {
      // The connection may be broken: the next group opens another.
      if (writer === db) writer = null;
      void db.end().catch(() => undefined);
      throw error;
    }
  };

  /**
   * One group's transaction, in three round trips: BEGIN, the lock, the streams' heads and the last position; the
   * entries and the streams' rows in one statement (per 4096 entries); NOTIFY and COMMIT.
   */
  const commitOn = async (writer: pg.Client, group: readonly Pending[]): Promise<Outcome[]> => {
    // BEGIN, the lock, and the heads in one round trip: the simple query protocol takes several statements, with the
    // stream names as escaped literals (it takes no parameters).
    const streams = [...new Set(group.map((p) => p.stream))];
    const names = streams.map((name) => writer.escapeLiteral(name)).join(", ");
    const opened = (await writer.query(
      `BEGIN; SELECT pg_advisory_xact_lock(${APPEND_LOCK.toString()});
       SELECT s.stream, s.revision FROM duplex_streams s WHERE s.stream IN (${names});
       SELECT coalesce(max(position), 0)::text AS top FROM duplex_entries;
       SELECT m.stream, m.fold FROM duplex_summaries m WHERE m.stream IN (${names});
       SELECT f.stream, f.holder = ${writer.escapeLiteral(instance)} AS mine FROM duplex_fences f
         WHERE f.stream IN (${names}) AND f.expires_at > now()`,
    )) as unknown as pg.QueryResult[];
    try {
      const heads = new Map<string, number>();
      for (const r of opened[2]?.rows ?? []) heads.set(String(r.stream), Number(r.revision));
      /** Streams fenced for a takeover: by this instance (true; its append lifts it) or by another (false). */
      const fences = new Map<string, boolean>();
      for (const r of opened[5]?.rows ?? []) fences.set(String(r.stream), r.mine === true);
      const lifted = new Set<string>();
      /** The summaries as they stand before each append of the group (null: none stored). */
      const folds = new Map<string, SessionSummaryState | null>();
      for (const r of opened[4]?.rows ?? []) folds.set(String(r.stream), parseFold(r.fold as string));
      /** The summaries this group moved on, written with its entries. */
      const moved = new Map<string, SessionSummaryState>();
      let position = Number(opened[3]?.rows[0]?.top ?? 0);
      const outcomes: Outcome[] = [];
      const rows: EntryRow[] = [];
      const firstAt = new Map<string, { position: number; at: number }>();
      const lastAt = new Map<string, number>();
      for (const p of group) {
        const head = heads.get(p.stream);
        const actual = head === undefined ? "no_stream" : head;
        if (p.expected !== "any" && p.expected !== actual) {
          outcomes.push(await retryOutcome(writer, p, actual));
          continue;
        }
        // Another node fences the stream for its takeover: this node's session there is no longer its own.
        const fence = fences.get(p.stream);
        if (fence === false) {
          outcomes.push({ ok: false, actual, fenced: true });
          continue;
        }
        if (fence === true && p.entries.length > 0) lifted.add(p.stream);
        let revision = head ?? -1;
        const mine: EntryRow[] = [];
        for (const entry of p.entries) {
          revision += 1;
          position += 1;
          const row: EntryRow = {
            position: String(position),
            stream: p.stream,
            revision,
            type: entry.type,
            data: entry.json,
            bin:
              entry.blob === null ? null : Buffer.from(entry.blob.buffer, entry.blob.byteOffset, entry.blob.byteLength),
            metadata: entry.metadata,
          };
          mine.push(row);
          if (revision === 0) firstAt.set(p.stream, { position, at: entry.at });
          lastAt.set(p.stream, entry.at);
        }
        if (mine.length > 0) {
          // A summary behind the stream (none yet, or a node of an earlier version appended) is folded on from the
          // stored log first; then the new entries.
          const head = heads.get(p.stream) ?? -1;
          const known = folds.get(p.stream) ?? null;
          const before = known?.revision === head ? known : await foldStored(writer, p.stream, known, head);
          const after = foldSessionSummary(
            p.entries.map((entry, i) => summaryEntryOf(entry, head + 1 + i)),
            before,
          );
          folds.set(p.stream, after);
          moved.set(p.stream, after);
          heads.set(p.stream, revision);
        }
        rows.push(...mine);
        outcomes.push({ ok: true, revision, rows: mine, retry: false });
      }
      for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
        const chunk = rows.slice(i, i + ROWS_PER_INSERT);
        const last = i + ROWS_PER_INSERT >= rows.length;
        const values: unknown[] = [];
        const tuples = chunk.map((r, k) => {
          values.push(r.position, r.stream, r.revision, r.type, r.data, r.bin, r.metadata);
          const b = k * 7;
          return `($${b + 1}::bigint, $${b + 2}, $${b + 3}::integer, $${b + 4}, $${b + 5}, $${b + 6}::bytea, $${b + 7})`;
        });
        const insert = `INSERT INTO duplex_entries (position, stream, revision, type, data, bin, metadata) VALUES ${tuples.join(", ")}`;
        if (!last) {
          await writer.query(insert, values);
          continue;
        }
        // With the last entries, the streams' rows and their summaries: one statement (a data-modifying WITH).
        const touched = [...lastAt.keys()];
        const n = values.length;
        values.push(
          touched,
          touched.map((t) => heads.get(t)),
          touched.map((t) => firstAt.get(t)?.position ?? 0),
          touched.map((t) => firstAt.get(t)?.at ?? lastAt.get(t)),
          touched.map((t) => lastAt.get(t)),
          ...summaryColumns(moved),
        );
        await writer.query(
          `WITH entries AS (${insert}),
           heads AS (INSERT INTO duplex_streams (stream, revision, first_position, first_at, last_at)
             SELECT * FROM unnest($${n + 1}::text[], $${n + 2}::integer[], $${n + 3}::bigint[], $${n + 4}::double precision[], $${n + 5}::double precision[])
             ON CONFLICT (stream) DO UPDATE SET revision = EXCLUDED.revision, last_at = EXCLUDED.last_at)
           ${upsertSummaries(n + 5)}`,
          values,
        );
      }
      if (lifted.size > 0)
        await writer.query("DELETE FROM duplex_fences WHERE holder = $1 AND stream = ANY($2::text[])", [
          instance,
          [...lifted],
        ]);
      await writer.query(rows.length > 0 ? `NOTIFY ${CHANNEL}; COMMIT` : "COMMIT");
      return outcomes;
    } catch (error) {
      await writer.query("ROLLBACK").catch(() => undefined);
      throw error;
    }
  };

  /** A mismatched append: a retry of one already stored (the same entries right after `expected`), or a conflict. */
  const retryOutcome = async (writer: pg.Client, p: Pending, actual: number | "no_stream"): Promise<Outcome> => {
    if (p.expected === "any" || p.entries.length === 0 || actual === "no_stream") return { ok: false, actual };
    const first = p.expected === "no_stream" ? 0 : p.expected + 1;
    const last = first + p.entries.length - 1;
    if (actual < last) return { ok: false, actual };
    const stored = await writer.query<EntryRow>(
      "SELECT position::text AS position, stream, revision, type, data, bin, metadata FROM duplex_entries WHERE stream = $1 AND revision BETWEEN $2 AND $3 ORDER BY revision",
      [p.stream, first, last],
    );
    const same =
      stored.rows.length === p.entries.length &&
      stored.rows.every((row, i) => sameEntry(row, p.entries[i] as EncodedEntry));
    return same ? { ok: true, revision: last, rows: [], retry: true } : { ok: false, actual };
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
  const COLUMNS = "position::text AS position, stream, revision, type, data, bin, metadata";
  /** COLUMNS with the body (data, bin, metadata) only of rows of a stream in $3 or of a type in $4; null elsewhere. */
  const BODIES_WHERE_READ = [
    "position::text AS position, stream, revision, type",
    ...["data", "bin", "metadata"].map(
      (c) => `CASE WHEN stream = ANY($3::text[]) OR type = ANY($4::text[]) THEN ${c} END AS ${c}`,
    ),
  ].join(", ");

  const read = async (stream: string, from = 0, limit?: number): Promise<RecordedEntry[]> => {
    if (closed) throw new EventStoreClosedError(`read stream ${stream}`);
    const rows = await selectRows(
      `SELECT ${COLUMNS} FROM duplex_entries WHERE stream = $1 AND revision >= $2 ORDER BY revision${limit === undefined ? "" : " LIMIT $3"}`,
      limit === undefined ? [stream, from] : [stream, from, limit],
    );
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
      const everything = [...listeners].some((l) => l.stream === ALL);
      const streams = [...new Set([...listeners].map((l) => l.stream))];
      // A stream followed only by readers of a few types (every session's takeover watch on a node of a cluster,
      // src/engine/takeover-watch.ts) has its other rows' bodies left in the database: their revisions still come,
      // so each reader sees its stream whole, and passes them over undecoded.
      const fullStreams = [...new Set([...listeners].filter((l) => l.types === null).map((l) => l.stream))];
      const readTypes = [...new Set([...listeners].flatMap((l) => l.types ?? []))];
      const columns = fullStreams.length === streams.length ? COLUMNS : BODIES_WHERE_READ;
      for (;;) {
        const rows = await selectRows(
          everything
            ? `SELECT ${COLUMNS} FROM duplex_entries WHERE position > $1 ORDER BY position LIMIT ${CATCH_UP_PAGE}`
            : `SELECT ${columns} FROM duplex_entries WHERE position > $1 AND stream = ANY($2::text[]) ORDER BY position LIMIT ${CATCH_UP_PAGE}`,
          everything || columns === COLUMNS
            ? everything
              ? [seen]
              : [seen, streams]
            : [seen, streams, fullStreams, readTypes],
        );
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
      const catchUp = (from: number): Promise<EntryRow[]> =>
        selectRows(
          all
            ? `SELECT ${COLUMNS} FROM duplex_entries WHERE position >= $1 ORDER BY position LIMIT ${CATCH_UP_PAGE}`
            : `SELECT ${COLUMNS} FROM duplex_entries WHERE stream = $1 AND revision >= $2 ORDER BY revision LIMIT ${CATCH_UP_PAGE}`,
          all ? [from] : [stream, from],
        );
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
    const client = await reads.connect();
    try {
      // Under the append lock: every append in flight commits (or is refused) before, none after goes through.
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock($1)", [APPEND_LOCK.toString()]);
      const taken = await client.query(
        `INSERT INTO duplex_fences (stream, holder, expires_at) VALUES ($1, $2, now() + $3::interval)
         ON CONFLICT (stream) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
           WHERE duplex_fences.expires_at <= now() OR duplex_fences.holder = EXCLUDED.holder
         RETURNING holder`,
        [stream, instance, `${Math.max(1, Math.round(ms))} milliseconds`],
      );
      const head = await client.query<{ revision: number }>("SELECT revision FROM duplex_streams WHERE stream = $1", [
        stream,
      ]);
      await client.query("COMMIT");
      if ((taken.rowCount ?? 0) === 0) return null;
      const revision = head.rows[0]?.revision;
      return revision === undefined ? "no_stream" : revision;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  };

  const deleteStream = async (stream: string): Promise<boolean> => {
    if (closed) throw new EventStoreClosedError(`delete stream ${stream}`);
    if (readOnly) throw new ReadOnlyStoreError(where, `delete stream ${stream}`);
    await flushing;
    const client = await reads.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock($1)", [APPEND_LOCK.toString()]);
      await client.query("DELETE FROM duplex_entries WHERE stream = $1", [stream]);
      await client.query("DELETE FROM duplex_summaries WHERE stream = $1", [stream]);
      await client.query("DELETE FROM duplex_fences WHERE stream = $1", [stream]);
      const deleted = await client.query("DELETE FROM duplex_streams WHERE stream = $1", [stream]);
      await client.query("COMMIT");
      return (deleted.rowCount ?? 0) > 0;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
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

/** Options of `createPostgresNodeLeases`. */
export interface PostgresNodeLeasesOptions {
  readonly url: string;
  readonly nodeId: string;
  /** How long a lease lasts once renewed, ms. */
  readonly leaseMs: number;
}

/**
 * Node leases in PostgreSQL (issue 22, part 4): table `duplex_nodes` (node, expires_at, instance), every time
 * PostgreSQL's `now()`, so a lease expires by the database's clock, never a node's. `instance` is this process's
 * (a random UUID): a lease is renewed only by the process that holds it, or taken once it expired, so two processes
 * started with one node id cannot both hold it (issue 33's attack: the second one recovered the first one's live
 * sessions and a client's socket on the first hung).
 * @throws Error from `pg` when the server cannot be reached or the table cannot be created (from the factory).
 */
export async function createPostgresNodeLeases(options: PostgresNodeLeasesOptions): Promise<NodeLeases> {
  const pool = new pg.Pool({ connectionString: options.url, max: 1 });
  pool.on("error", () => undefined);
  await pool.query("CREATE TABLE IF NOT EXISTS duplex_nodes (node text PRIMARY KEY, expires_at timestamptz NOT NULL)");
  await pool.query("ALTER TABLE duplex_nodes ADD COLUMN IF NOT EXISTS instance text");
  const interval = `${Math.max(1, Math.round(options.leaseMs))} milliseconds`;
  const instance = randomUUID();
  /**
   * Renews or takes the lease: whether it was held by this process before (a node never seen: it was not), or
   * null when another process holds it unexpired (the row is left as it is).
   */
  const take = async (): Promise<boolean | null> => {
    const { rows } = await pool.query<{ held: boolean }>(
      `WITH before AS (SELECT expires_at, instance FROM duplex_nodes WHERE node = $1)
       INSERT INTO duplex_nodes (node, expires_at, instance) VALUES ($1, now() + $2::interval, $3)
       ON CONFLICT (node) DO UPDATE SET expires_at = EXCLUDED.expires_at, instance = EXCLUDED.instance
         WHERE duplex_nodes.instance IS NOT DISTINCT FROM EXCLUDED.instance OR duplex_nodes.expires_at <= now()
       RETURNING coalesce((SELECT expires_at > now() AND instance IS NOT DISTINCT FROM $3 FROM before), false) AS held`,
      [options.nodeId, interval, instance],
    );
    return rows.length === 0 ? null : rows[0]?.held === true;
  };
  return {
    nodeId: options.nodeId,
    leaseMs: options.leaseMs,
    // Another process holding it now means this one lost its node id for good (its lease ran out, say while it was
    // paused, and a process started with the same id took it).
    async renew() {
      const held = await take();
      if (held === null) throw new NodeIdInUseError(options.nodeId);
      return held;
    },
    async claim() {
      let seen: number | null = null;
      for (;;) {
        if ((await take()) !== null) return;
        const { rows } = await pool.query<{ expires: string; left_ms: number }>(
          "SELECT (extract(epoch FROM expires_at) * 1000)::text AS expires, greatest(0, extract(epoch FROM expires_at - now()) * 1000)::float8 AS left_ms FROM duplex_nodes WHERE node = $1",
          [options.nodeId],
        );
        const row = rows[0];
        if (row === undefined) continue;
        // Renewed since it was first seen: its process is alive.
        if (seen !== null && Number(row.expires) > seen) throw new NodeIdInUseError(options.nodeId);
        seen = Number(row.expires);
        await new Promise((resolve) => setTimeout(resolve, Math.min(options.leaseMs, row.left_ms) + 50));
      }
    },
    async holds(node) {
      const { rows } = await pool.query<{ held: boolean }>(
        "SELECT expires_at > now() AS held FROM duplex_nodes WHERE node = $1",
        [node],
      );
      return rows[0]?.held === true;
    },
    async release() {
      await pool
        .query("UPDATE duplex_nodes SET expires_at = now() WHERE node = $1", [options.nodeId])
        .catch(() => undefined);
      await pool.end().catch(() => undefined);
    },
  };
}
