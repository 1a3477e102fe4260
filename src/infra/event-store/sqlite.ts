import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { Observable } from "rxjs";
import {
  type EventStore,
  type ExpectedRevision,
  type NewEntry,
  type RecordedEntry,
  type StreamInfo,
  WrongExpectedRevisionError,
} from "../../engine/ports/event-store.ts";
import { type BlobCodec, packBlob, unpackBlob } from "./blob-packing.ts";
import { decodeData, type EncodedData, encodeData } from "./codec.ts";

/** Options of `createSqliteEventStore`. */
export interface SqliteEventStoreOptions {
  /**
   * The database file, created with its parent directory when missing, or `":memory:"` for a store that lives and
   * dies with this instance.
   */
  readonly path: string;
}

/**
 * Thrown (as a rejection, or as the error of a subscription) when a closed store is used.
 * `code` is `"event_store_closed"`.
 */
export class EventStoreClosedError extends Error {
  readonly code = "event_store_closed";
  constructor(operation: string) {
    super(`event store is closed: cannot ${operation}`);
    this.name = "EventStoreClosedError";
  }
}

/** The name `subscribe` takes for every stream; no entry can be appended to it. */
const ALL = "$all";

/** Rows read per query while a subscription catches up, so a long stream never sits whole in memory. */
const CATCH_UP_PAGE = 256;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS entries (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  stream TEXT NOT NULL,
  revision INTEGER NOT NULL,
  type TEXT NOT NULL,
  data TEXT NOT NULL,
  bin BLOB,
  metadata TEXT NOT NULL,
  bin_codec TEXT,
  UNIQUE (stream, revision)
);
CREATE TABLE IF NOT EXISTS streams (
  stream TEXT PRIMARY KEY,
  revision INTEGER NOT NULL,
  first_position INTEGER NOT NULL,
  first_at REAL NOT NULL,
  last_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS streams_by_first_position ON streams (first_position);
`;

interface EntryRow {
  readonly position: number;
  readonly stream: string;
  readonly revision: number;
  readonly type: string;
  readonly data: string;
  readonly bin: Uint8Array | null;
  readonly metadata: string;
  /** How `bin` is packed (blob-packing.ts); null: raw. Absent in files written before it existed. */
  readonly bin_codec: string | null;
}

/** An entry's data encoded for its row, with its blob packed (null when it has none). */
interface Encoded extends EncodedData {
  readonly packed: { readonly bytes: Uint8Array; readonly codec: BlobCodec } | null;
}

interface Written {
  readonly revision: number;
  readonly rows: readonly EntryRow[];
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
 * Layout: table `entries` holds one row per entry (`position` is the global 1-based position, `revision` the
 * 0-based revision in its stream, `data` the JSON of `encodeData` and `bin` its blob, `metadata` plain JSON);
 * table `streams` holds one row per stream (last revision, first position, `metadata.at` of the first and last
 * entries, in ms) for `listStreams` and the revision check. Pragmas: `journal_mode = WAL`, `synchronous = NORMAL`
 * (a power loss may drop the last commits, never corrupt the file).
 *
 * `append` runs as one `BEGIN IMMEDIATE` transaction, so the revision check and the inserts hold the write lock
 * together even against another process on the same file; a UNIQUE violation, should one still happen, becomes a
 * `WrongExpectedRevisionError` with the driver's error as `cause`. Appending zero entries checks `expectedRevision`
 * the same way and returns the current revision (`-1` for a stream that does not exist).
 *
 * `subscribe` delivers the stored entries, then those appended later through this instance (appends by another
 * process on the same file are not seen live), synchronously within `append` once the transaction has committed.
 *
 * @throws SqliteError (from better-sqlite3) when the file cannot be opened.
 */
export function createSqliteEventStore(options: SqliteEventStoreOptions): EventStore {
  if (options.path !== ":memory:" && options.path !== "") {
    mkdirSync(dirname(options.path), { recursive: true });
  }
  const db = new Database(options.path);
  // Rows of 100 ms of packed audio (1-3 KB) leave half of a 4 KiB page empty; 16 KiB pages hold several. Only a
  // new file takes the size (an existing one keeps its own).
  db.pragma("page_size = 16384");
  db.pragma("journal_mode = WAL");
  // The WAL is checkpointed every 4 MiB (the default, 1000 pages, would be 16 MiB at this page size) and cut back to
  // that size afterwards, so it does not stay at its largest on disk.
  db.pragma("wal_autocheckpoint = 256");
  db.pragma(`journal_size_limit = ${4 * 1024 * 1024}`);
  db.pragma("synchronous = NORMAL");
  db.exec(SCHEMA);
  // Files from before blob packing lack the column: their blobs are raw (NULL codec).
  const columns = db.prepare<[], { name: string }>("SELECT name FROM pragma_table_info('entries')").all();
  if (!columns.some((c) => c.name === "bin_codec")) db.exec("ALTER TABLE entries ADD COLUMN bin_codec TEXT");

  const selectStream = db.prepare<[string], { revision: number }>("SELECT revision FROM streams WHERE stream = ?");
  const insertEntry = db.prepare<[string, number, string, string, Uint8Array | null, string, BlobCodec]>(
    "INSERT INTO entries (stream, revision, type, data, bin, metadata, bin_codec) VALUES (?, ?, ?, ?, ?, ?, ?)",
  );
  const insertStream = db.prepare<[string, number, number, number, number]>(
    "INSERT INTO streams (stream, revision, first_position, first_at, last_at) VALUES (?, ?, ?, ?, ?)",
  );
  const updateStream = db.prepare<[number, number, string]>(
    "UPDATE streams SET revision = ?, last_at = ? WHERE stream = ?",
  );
  const selectFromStream = db.prepare<[string, number, number], EntryRow>(
    "SELECT * FROM entries WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?",
  );
  const selectFromAll = db.prepare<[number, number], EntryRow>(
    "SELECT * FROM entries WHERE position >= ? ORDER BY position LIMIT ?",
  );
  const selectAllOfStream = db.prepare<[string, number], EntryRow>(
    "SELECT * FROM entries WHERE stream = ? AND revision >= ? ORDER BY revision",
  );
  // substr rather than LIKE, where `_` and `%` in a prefix would be wildcards.
  const selectStreams = db.prepare<{ prefix: string }, StreamRow>(
    `SELECT stream, revision, first_at, last_at FROM streams
     WHERE substr(stream, 1, length(@prefix)) = @prefix ORDER BY first_position`,
  );

  const currentRevision = (stream: string): number | "no_stream" => selectStream.get(stream)?.revision ?? "no_stream";

  /** Checks the revision and inserts the batch; returns the new last revision (-1: no stream) and the new rows. */
  const writeBatch = db.transaction(
    (
      stream: string,
      entries: readonly NewEntry[],
      encoded: readonly Encoded[],
      expected: ExpectedRevision,
    ): Written => {
      const actual = currentRevision(stream);
      if (!matches(expected, actual)) throw new WrongExpectedRevisionError(stream, expected, actual);
      let revision = actual === "no_stream" ? -1 : actual;
      const rows: EntryRow[] = [];
      for (const [i, entry] of entries.entries()) {
        revision += 1;
        const { json, blob, packed } = encoded[i] as Encoded;
        const metadata = JSON.stringify(entry.metadata);
        const { lastInsertRowid } = insertEntry.run(
          stream,
          revision,
          entry.type,
          json,
          packed?.bytes ?? null,
          metadata,
          packed?.codec ?? null,
        );
        const position = Number(lastInsertRowid);
        if (revision === 0) insertStream.run(stream, revision, position, entry.metadata.at, entry.metadata.at);
        // Subscribers get the blob as it was given: nothing to unpack.
        rows.push({ position, stream, revision, type: entry.type, data: json, bin: blob, metadata, bin_codec: null });
      }
      const last = entries.at(-1);
      if (last !== undefined && revision > 0) updateStream.run(revision, last.metadata.at, stream);
      return { revision, rows };
    },
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
    // Blobs are packed before the transaction, on the thread pool; the revision check stays inside it.
    const encoded = await Promise.all(
      entries.map(async (entry): Promise<Encoded> => {
        const { json, blob } = encodeData(entry.data);
        return { json, blob, packed: blob === null ? null : await packBlob(blob) };
      }),
    );
    if (closed) throw new EventStoreClosedError(`append to stream ${stream}`);
    let written: Written;
    try {
      written = writeBatch.immediate(stream, entries, encoded, expectedRevision);
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw new WrongExpectedRevisionError(stream, expectedRevision, currentRevision(stream), { cause: error });
      }
      throw error;
    }
    dispatch(written.rows);
    return written.revision;
  };

  const read = async (stream: string, from = 0): Promise<RecordedEntry[]> => {
    if (closed) throw new EventStoreClosedError(`read stream ${stream}`);
    return selectAllOfStream.all(stream, from).map(toRecorded);
  };

  const subscribe = (stream: string, from?: number): Observable<RecordedEntry> =>
    new Observable<RecordedEntry>((subscriber) => {
      if (closed) {
        subscriber.error(new EventStoreClosedError(`subscribe to ${stream}`));
        return;
      }
      const all = stream === ALL;
      const keyOf = (entry: RecordedEntry): number => (all ? entry.position : entry.revision);
      /** The revision (or position for `$all`) of the next entry to deliver; anything below is a duplicate. */
      let next = from ?? (all ? 1 : 0);
      /** Live entries not delivered yet: appends made while catching up, or by a subscriber's own `next`. */
      const pending: RecordedEntry[] = [];
      let catchingUp = true;
      let draining = false;

      const deliver = (entry: RecordedEntry): void => {
        if (keyOf(entry) < next) return;
        next = keyOf(entry) + 1;
        subscriber.next(entry);
      };
      // A queue drained by one loop keeps the order when a subscriber appends from inside `next`.
      const drain = (): void => {
        if (draining || catchingUp) return;
        draining = true;
        try {
          for (let entry = pending.shift(); entry !== undefined; entry = pending.shift()) {
            if (subscriber.closed) break;
            deliver(entry);
          }
        } finally {
          draining = false;
        }
      };
      const listener = (entries: readonly RecordedEntry[]): void => {
        for (const entry of entries) if (all || entry.stream === stream) pending.push(entry);
        drain();
      };
      const complete = (): void => subscriber.complete();
      // Listen before reading, so nothing appended from here on can fall between the catch-up and the live part.
      listeners.add(listener);
      completers.add(complete);

      try {
        while (!subscriber.closed && !closed) {
          const rows = all ? selectFromAll.all(next, CATCH_UP_PAGE) : selectFromStream.all(stream, next, CATCH_UP_PAGE);
          if (rows.length === 0) break;
          for (const row of rows) {
            if (subscriber.closed) break;
            deliver(toRecorded(row));
          }
        }
        catchingUp = false;
        drain();
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

  const deleteEntries = db.prepare<[string]>("DELETE FROM entries WHERE stream = ?");
  const deleteStreamRow = db.prepare<[string]>("DELETE FROM streams WHERE stream = ?");
  const deleteStream = async (stream: string): Promise<boolean> => {
    if (closed) throw new EventStoreClosedError(`delete stream ${stream}`);
    return db.transaction(() => {
      deleteEntries.run(stream);
      return deleteStreamRow.run(stream).changes > 0;
    })();
  };

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    for (const complete of [...completers]) complete();
    listeners.clear();
    completers.clear();
    db.close();
  };

  return { append, read, subscribe, listStreams, deleteStream, close };
}

function matches(expected: ExpectedRevision, actual: number | "no_stream"): boolean {
  return expected === "any" || expected === actual;
}

function toRecorded(row: EntryRow): RecordedEntry {
  return {
    stream: row.stream,
    revision: row.revision,
    position: row.position,
    type: row.type,
    data: decodeData({ json: row.data, blob: row.bin === null ? null : unpackBlob(row.bin, row.bin_codec ?? null) }),
    metadata: JSON.parse(row.metadata),
  };
}

function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}
