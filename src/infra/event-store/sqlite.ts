import { type EventStore, WrongExpectedRevisionError } from "../../engine/ports/event-store.ts";
import { encodeEntries } from "./codec.ts";
import { errorOf, type GroupWriter, mainThreadWriter, readOnlyWriter, workerWriter } from "./sqlite-group-writers.ts";
import { ALL, LiveFeed } from "./sqlite-live.ts";
import { openReadOnlyStoreFile } from "./sqlite-read-only.ts";
import { type EntryRow, prepareReads, toRecorded } from "./sqlite-rows.ts";
import { createSummaryReader } from "./sqlite-summaries.ts";
import { createStoreWriter, openStoreFile } from "./sqlite-writer.ts";
import { EventStoreClosedError } from "./store-errors.ts";
import { streamInfoOf } from "./stream-info.ts";

export { openReadOnlyStoreFile, type ReadOnlyOpening } from "./sqlite-read-only.ts";
export { EventStoreClosedError, ReadOnlyStoreError } from "./store-errors.ts";

/** Options of `createSqliteEventStore`. */
export interface SqliteEventStoreOptions {
  /**
   * The database file, created with its parent directory when missing, or `":memory:"` for a store that lives and
   * dies with this instance.
   */
  readonly path: string;
  /**
   * Where appends are packed and committed: `"worker"` (the default for a file), a thread of its own, with the
   * appends of every session that arrive meanwhile committed together; `"main"` (the only choice for `":memory:"`),
   * the calling thread, one transaction per event-loop turn. Reads run on the calling thread either way.
   */
  readonly writer?: "worker" | "main";
  /**
   * Whether opening may migrate a file of an earlier layout (default true: the server, which holds the store's
   * lock). Commands that only read pass false: they get an error naming the file's layout instead, and opening
   * them writes nothing.
   */
  readonly migrate?: boolean;
  /**
   * Opens an existing file read-only (default false), for the commands that only read (`duplex sessions`, `show`,
   * `replay`, ...), on read-only media too (a backup, a snapshot, an archive): {@link openReadOnlyStoreFile}. Nothing
   * is written or created beside the file and no writer thread starts; `append`, `deleteStream` and
   * `rebuildSummaries` reject with {@link ReadOnlyStoreError}. A file of an earlier layout is an error, as with
   * `migrate: false`.
   */
  readonly readOnly?: boolean;
}

/**
 * The embedded EventStore adapter (DESIGN.md, "Ports": sqlite via better-sqlite3, WAL, one file).
 *
 * Layout 3 (sqlite-writer.ts; files of layouts 1 and 2 are migrated on open): table `entries` holds one row per entry
 * (`position` is the global 1-based position, `stream_id` its stream's row in `streams`, `revision` the 0-based
 * revision in its stream, `data` the JSON of `encodeData` and `bin` its blob, packed by
 * blob-packing.ts, `metadata` plain JSON; or `data` the packed bytes of both texts, per `text_codec`, text-packing.ts); table `streams` holds one row per stream (last revision, first position,
 * `metadata.at` of the first and last entries, in ms) for `listStreams` and the revision check; table `summaries`
 * one row per stream (sqlite-summaries.ts), moved on in the transaction of each append, for `listSummaries`. Pragmas:
 * `journal_mode = WAL`, `synchronous = NORMAL` (a power loss may drop the last commits, never corrupt the file).
 *
 * Group commit (issue 11): `append` encodes its entries on the calling thread and hands them to the writer, which
 * packs the blobs and stores every append that reached it meanwhile, from any stream, in one `BEGIN IMMEDIATE`
 * transaction; each append still checks its own expected revision and succeeds or fails alone. The revision check
 * and the inserts hold the write lock together even against another process on the same file; a UNIQUE violation,
 * should one still happen, becomes a `WrongExpectedRevisionError`. Appending zero entries checks
 * `expectedRevision` the same way and returns the current revision (`-1` for a stream that does not exist). The
 * promise of an append settles once its transaction has committed (or failed), in the order appends were called.
 *
 * `subscribe` delivers the stored entries, then those appended later through this instance (appends by another
 * process on the same file are not seen live), once their transaction has committed and before their `append`
 * settles.
 *
 * @throws SqliteError (from better-sqlite3) when the file cannot be opened. A writer thread that cannot open the
 *   file, or dies, fails every append from then on with its error.
 */
export function createSqliteEventStore(options: SqliteEventStoreOptions): EventStore {
  const memory = options.path === ":memory:" || options.path === "";
  const db =
    options.readOnly === true
      ? openReadOnlyStoreFile(options.path).db
      : openStoreFile(options.path, options.migrate === false ? { migrate: false } : {});
  const writer: GroupWriter =
    options.readOnly === true
      ? readOnlyWriter(options.path)
      : options.writer === "main" || memory
        ? mainThreadWriter(createStoreWriter(db))
        : workerWriter(options.path);
  const reads = prepareReads(db);
  let closed = false;
  const live = new LiveFeed(reads, () => closed);
  /** Throws EventStoreClosedError naming `what` once the store is closed. */
  const open = (what: string): void => {
    if (closed) throw new EventStoreClosedError(what);
  };
  const readSummaries = createSummaryReader(db);
  return {
    append: async (stream, entries, expectedRevision) => {
      open(`append to stream ${stream}`);
      if (stream === ALL) throw new Error(`cannot append to stream ${ALL}: it names every stream in subscribe`);
      const encoded = encodeEntries(stream, entries);
      const outcome = await writer.append({ stream, expected: expectedRevision, entries: encoded });
      if (!outcome.ok) {
        if ("wrongRevision" in outcome)
          throw new WrongExpectedRevisionError(stream, expectedRevision, outcome.wrongRevision.actual);
        throw errorOf(outcome.failure);
      }
      // A retry stored nothing: nothing to tell the subscribers.
      if (outcome.retry !== true) live.dispatch(committedRows(stream, encoded, outcome));
      return outcome.revision;
    },
    read: async (stream, from = 0, limit) => {
      open(`read stream ${stream}`);
      const rows =
        limit === undefined ? reads.allOfStream.all(stream, from) : reads.pageOfStream.all(stream, from, limit);
      return rows.map(toRecorded);
    },
    subscribe: (stream, from) => live.subscribe(stream, from),
    listStreams: async (prefix) => {
      open(`list streams with prefix ${prefix}`);
      return reads.streams.all({ prefix }).map(streamInfoOf);
    },
    listSummaries: async (query) => {
      open(`list summaries with prefix ${query.prefix}`);
      // Appends handed to the writer and not committed yet are not in the page; those that settled are.
      return readSummaries(query);
    },
    rebuildSummaries: async () => {
      open("rebuild the summaries");
      return writer.rebuildSummaries();
    },
    deleteStream: async (stream) => {
      open(`delete stream ${stream}`);
      return writer.deleteStream(stream);
    },
    close: async () => {
      if (closed) return;
      closed = true;
      live.completeAll();
      // Appends already made still commit: a shutdown keeps what the sessions were told is durable.
      await writer.close();
      db.close();
    },
  };
}

/**
 * The rows an append committed, as subscribers get them: at the positions and revisions the writer gave them, the
 * blob as it was given (nothing to unpack).
 */
const committedRows = (
  stream: string,
  encoded: ReturnType<typeof encodeEntries>,
  outcome: { readonly positions: readonly number[]; readonly revision: number },
): EntryRow[] =>
  encoded.map((entry, i) => ({
    position: outcome.positions[i] as number,
    stream,
    revision: outcome.revision - encoded.length + 1 + i,
    type: entry.type,
    data: entry.json,
    bin: entry.blob,
    metadata: entry.metadata,
    bin_codec: null,
    text_codec: null,
  }));
