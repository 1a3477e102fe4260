import { randomUUID } from "node:crypto";
import pg from "pg";
import {
  type EventStore,
  type ExpectedRevision,
  type StreamInfo,
  WrongExpectedRevisionError,
} from "../../engine/ports/event-store.ts";
import { encodeEntries } from "./codec.ts";
import { redactUrl } from "./open.ts";
import { deleteStreamRows, takeFence } from "./postgres-fences.ts";
import { PostgresLive, selectRows } from "./postgres-live.ts";
import { ALL, streamQuery } from "./postgres-reads.ts";
import { checkReadable, toRecorded } from "./postgres-schema.ts";
import { refreshSummaries, summaryPageOf, summaryQuerySql } from "./postgres-summaries.ts";
import { lockAppends, PostgresAppender } from "./postgres-writer.ts";
import { EventStoreClosedError, ReadOnlyStoreError } from "./sqlite.ts";
import { type StreamRow, streamInfoOf } from "./stream-info.ts";

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
  const readOnly = options.readOnly === true;
  /** The store in errors: the URL without its password. */
  const where = redactUrl(options.url);
  const reads = new pg.Pool({ connectionString: options.url, max: options.readConnections ?? 4 });
  reads.on("error", () => undefined);
  /** This instance in `duplex_fences.holder`: a node's store, told apart from the other nodes'. */
  const appender = new PostgresAppender(options, randomUUID());
  const instance = appender.instance;
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
    await appender.createSchema();
    await refreshSummaries(reads, lockAppends, false);
  }
  let closed = false;
  const live = new PostgresLive(reads, options.url, options.pollMs ?? 100, () => closed);
  if (!readOnly) await live.listen();
  /** Throws EventStoreClosedError naming `what` once closed, and with `write` ReadOnlyStoreError on a read-only store. */
  const open = (what: string, write = false): void => {
    if (closed) throw new EventStoreClosedError(what);
    if (write && readOnly) throw new ReadOnlyStoreError(where, what);
  };
  return {
    append: async (stream, entries, expected) => {
      open(`append to stream ${stream}`, true);
      if (stream === ALL) throw new Error(`cannot append to stream ${ALL}: it names every stream in subscribe`);
      const outcome = await appender.append(stream, expected, encodeEntries(stream, entries));
      if (!outcome.ok) throw wrongRevisionOf(stream, expected, outcome);
      if (!outcome.retry) live.dispatch(outcome.rows);
      return outcome.revision;
    },
    read: async (stream, from = 0, limit) => {
      open(`read stream ${stream}`);
      const query = streamQuery(stream, from, limit);
      return (await selectRows(reads, query.text, query.values)).map(toRecorded);
    },
    subscribe: (stream, from, wanted) => live.subscribe(stream, from, wanted),
    listStreams: async (prefix) => {
      open(`list streams with prefix ${prefix}`);
      return listStreamsOf(reads, prefix);
    },
    listSummaries: async (query) => {
      open(`list summaries with prefix ${query.prefix}`);
      if (!(query.limit >= 1)) throw new RangeError(`listSummaries: limit must be at least 1, got ${query.limit}`);
      if (!summariesThere)
        throw new Error(
          `${where} has no table duplex_summaries (a store of an earlier release): a server creates it when it next starts on the database`,
        );
      const { text, values } = summaryQuerySql(query);
      const { rows } = await reads.query<{ stream: string; first_at: number; fold: string }>(text, values);
      return summaryPageOf(rows, query.limit);
    },
    rebuildSummaries: async () => {
      open("rebuild the summaries", true);
      await appender.idle();
      return refreshSummaries(reads, lockAppends, true);
    },
    deleteStream: async (stream) => {
      open(`delete stream ${stream}`, true);
      await appender.idle();
      return deleteStreamRows(reads, stream);
    },
    fence: async (stream, ms) => {
      open(`fence stream ${stream}`, true);
      return takeFence(reads, stream, instance, ms);
    },
    close: async () => {
      if (closed) return;
      closed = true;
      await live.stop();
      // Appends already made still commit.
      await appender.idle();
      await Promise.allSettled([appender.end(), live.end(), reads.end()]);
    },
  };
}

/** A refused append's error: the stream's revision, and the fence of another node's takeover when that was why. */
const wrongRevisionOf = (
  stream: string,
  expected: ExpectedRevision,
  outcome: { readonly actual: number | "no_stream"; readonly fenced?: true },
): WrongExpectedRevisionError =>
  new WrongExpectedRevisionError(
    stream,
    expected,
    outcome.actual,
    outcome.fenced ? { cause: new Error(`stream ${stream} is fenced for another node's takeover`) } : undefined,
  );

/** The streams whose name starts with `prefix`, in the order they were created. */
const listStreamsOf = async (reads: pg.Pool, prefix: string): Promise<StreamInfo[]> => {
  const { rows } = await reads.query<StreamRow>(
    "SELECT stream, revision, first_at, last_at FROM duplex_streams WHERE left(stream, length($1)) = $1 ORDER BY first_position",
    [prefix],
  );
  return rows.map(streamInfoOf);
};
