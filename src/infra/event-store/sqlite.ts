import { Observable } from "rxjs";
import {
  type EventStore,
  type ExpectedRevision,
  type NewEntry,
  type RecordedEntry,
  type StreamInfo,
  type SummaryPage,
  type SummaryQuery,
  WrongExpectedRevisionError,
} from "../../engine/ports/event-store.ts";
import { unpackBlob } from "./blob-packing.ts";
import { createCatchUpThenLive } from "./catch-up-then-live.ts";
import { decodeData, encodeEntries } from "./codec.ts";
import { errorOf, type GroupWriter, mainThreadWriter, readOnlyWriter, workerWriter } from "./sqlite-group-writers.ts";
import { openReadOnlyStoreFile } from "./sqlite-read-only.ts";
import { createSummaryReader } from "./sqlite-summaries.ts";
import { binCodecs, createStoreWriter, openStoreFile, textCodecs } from "./sqlite-writer.ts";
import { EventStoreClosedError } from "./store-errors.ts";
import { unpackText } from "./text-packing.ts";

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

/** The name `subscribe` takes for every stream; no entry can be appended to it. */
const ALL = "$all";

/** Rows read per query while a subscription catches up, so a long stream never sits whole in memory. */
const CATCH_UP_PAGE = 256;

interface EntryRow {
  readonly position: number;
  readonly stream: string;
  readonly revision: number;
  readonly type: string;
  /** JSON text, or the packed bytes of it and the metadata (`text_codec`). */
  readonly data: string | Uint8Array;
  readonly bin: Uint8Array | null;
  readonly metadata: string;
  /** How `bin` is packed (blob-packing.ts; the id of its name, sqlite-writer.ts `binCodecs`); null: raw. */
  readonly bin_codec: number | null;
  /** How `data` and `metadata` are packed (text-packing.ts; `textCodecs`); null: plain. */
  readonly text_codec: number | null;
}

interface StreamRow {
  readonly stream: string;
  readonly revision: number;
  readonly first_at: number;
  readonly last_at: number;
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

  // CROSS JOIN keeps the join order as written: the stream's row, then its entries by (stream_id, revision); or
  // the entries by position, each with its stream's name by id.
  const COLUMNS = "e.position, s.stream, e.revision, e.type, e.data, e.bin, e.metadata, e.bin_codec, e.text_codec";
  const selectFromStream = db.prepare<[string, number, number], EntryRow>(
    `SELECT ${COLUMNS} FROM streams s CROSS JOIN entries e ON e.stream_id = s.id
     WHERE s.stream = ? AND e.revision >= ? ORDER BY e.revision LIMIT ?`,
  );
  const selectFromAll = db.prepare<[number, number], EntryRow>(
    `SELECT ${COLUMNS} FROM entries e CROSS JOIN streams s ON s.id = e.stream_id
     WHERE e.position >= ? ORDER BY e.position LIMIT ?`,
  );
  const selectAllOfStream = db.prepare<[string, number], EntryRow>(
    `SELECT ${COLUMNS} FROM streams s CROSS JOIN entries e ON e.stream_id = s.id
     WHERE s.stream = ? AND e.revision >= ? ORDER BY e.revision`,
  );
  const selectPageOfStream = db.prepare<[string, number, number], EntryRow>(
    `SELECT ${COLUMNS} FROM streams s CROSS JOIN entries e ON e.stream_id = s.id
     WHERE s.stream = ? AND e.revision >= ? ORDER BY e.revision LIMIT ?`,
  );
  // substr rather than LIKE, where `_` and `%` in a prefix would be wildcards.
  const selectStreams = db.prepare<{ prefix: string }, StreamRow>(
    `SELECT stream, revision, first_at, last_at FROM streams
     WHERE substr(stream, 1, length(@prefix)) = @prefix ORDER BY first_position`,
  );

  /** Called with every committed batch, in commit order. */
  const listeners = new Set<(entries: readonly RecordedEntry[]) => void>();
  /** Completes every open subscription. */
  const completers = new Set<() => void>();
  /** Committed batches not yet handed to every listener. */
  const dispatchQueue: (readonly RecordedEntry[])[] = [];
  let dispatching = false;
  let closed = false;

  /**
   * Hands `rows` to every listener. A batch appended by a listener (a subscriber appending from `next`) waits in
   * the queue until the current batch has reached every listener, so all of them see batches in commit order.
   */
  const dispatch = (rows: readonly EntryRow[]): void => {
    if (listeners.size === 0 || rows.length === 0) return;
    // Decoded from what was stored, so live subscribers get the same copies and shapes as readers.
    dispatchQueue.push(rows.map(toRecorded));
    if (dispatching) return;
    dispatching = true;
    try {
      for (let batch = dispatchQueue.shift(); batch !== undefined; batch = dispatchQueue.shift()) {
        for (const listener of listeners) listener(batch);
      }
    } finally {
      dispatching = false;
    }
  };

  const append = async (
    stream: string,
    entries: readonly NewEntry[],
    expectedRevision: ExpectedRevision,
  ): Promise<number> => {
    if (closed) throw new EventStoreClosedError(`append to stream ${stream}`);
    if (stream === ALL) throw new Error(`cannot append to stream ${ALL}: it names every stream in subscribe`);
    const encoded = encodeEntries(stream, entries);
    const outcome = await writer.append({ stream, expected: expectedRevision, entries: encoded });
    if (!outcome.ok) {
      if ("wrongRevision" in outcome) {
        throw new WrongExpectedRevisionError(stream, expectedRevision, outcome.wrongRevision.actual);
      }
      throw errorOf(outcome.failure);
    }
    if (outcome.retry !== true)
      dispatch(
        encoded.map((entry, i) => ({
          position: outcome.positions[i] as number,
          stream,
          revision: outcome.revision - encoded.length + 1 + i,
          type: entry.type,
          data: entry.json,
          // Subscribers get the blob as it was given: nothing to unpack. A retry stored nothing: nothing to tell them.
          bin: entry.blob,
          metadata: entry.metadata,
          bin_codec: null,
          text_codec: null,
        })),
      );
    return outcome.revision;
  };

  const read = async (stream: string, from = 0, limit?: number): Promise<RecordedEntry[]> => {
    if (closed) throw new EventStoreClosedError(`read stream ${stream}`);
    const rows =
      limit === undefined ? selectAllOfStream.all(stream, from) : selectPageOfStream.all(stream, from, limit);
    return rows.map(toRecorded);
  };

  const subscribe = (stream: string, from?: number): Observable<RecordedEntry> =>
    new Observable<RecordedEntry>((subscriber) => {
      if (closed) {
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
      listeners.add(listener);
      completers.add(complete);

      try {
        seam.catchUpSync(
          (next) => (all ? selectFromAll.all(next, CATCH_UP_PAGE) : selectFromStream.all(stream, next, CATCH_UP_PAGE)),
          toRecorded,
          () => subscriber.closed || closed,
        );
      } catch (error) {
        subscriber.error(error);
      }
      return () => {
        listeners.delete(listener);
        completers.delete(complete);
      };
    });

  const listStreams = async (prefix: string): Promise<StreamInfo[]> => {
    if (closed) throw new EventStoreClosedError(`list streams with prefix ${prefix}`);
    return selectStreams.all({ prefix }).map((row) => ({
      stream: row.stream,
      revision: row.revision,
      // Revisions are contiguous from 0, so the count follows from the last one.
      count: row.revision + 1,
      firstAt: row.first_at,
      lastAt: row.last_at,
    }));
  };

  const readSummaries = createSummaryReader(db);
  const listSummaries = async (query: SummaryQuery): Promise<SummaryPage> => {
    if (closed) throw new EventStoreClosedError(`list summaries with prefix ${query.prefix}`);
    // Appends handed to the writer and not committed yet are not in the page; those that settled are.
    return readSummaries(query);
  };

  const rebuildSummaries = async (): Promise<number> => {
    if (closed) throw new EventStoreClosedError("rebuild the summaries");
    return writer.rebuildSummaries();
  };

  const deleteStream = async (stream: string): Promise<boolean> => {
    if (closed) throw new EventStoreClosedError(`delete stream ${stream}`);
    return writer.deleteStream(stream);
  };

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    for (const complete of [...completers]) complete();
    listeners.clear();
    completers.clear();
    // Appends already made still commit: a shutdown keeps what the sessions were told is durable.
    await writer.close();
    db.close();
  };

  return { append, read, subscribe, listStreams, listSummaries, rebuildSummaries, deleteStream, close };
}

function toRecorded(row: EntryRow): RecordedEntry {
  const text = unpackText(row.data, row.metadata, textCodecs.name(row.text_codec ?? null));
  return {
    stream: row.stream,
    revision: row.revision,
    position: row.position,
    type: row.type,
    data: decodeData({
      json: text.json,
      blob: row.bin === null ? null : unpackBlob(row.bin, binCodecs.name(row.bin_codec ?? null)),
    }),
    metadata: JSON.parse(text.metadata),
  };
}
