import { accessSync, constants, copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
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
import { createFlushTimer } from "../flush-timer.ts";
import { closeWorker, createPendingCalls } from "../worker-calls.ts";
import { unpackBlob } from "./blob-packing.ts";
import { createCatchUpThenLive } from "./catch-up-then-live.ts";
import { decodeData, encodeEntries } from "./codec.ts";
import { createSummaryReader } from "./sqlite-summaries.ts";
import {
  type AppendOutcome,
  type AppendRequest,
  binCodecs,
  createStoreWriter,
  LAYOUT,
  openStoreFile,
  type StoreWriter,
  textCodecs,
} from "./sqlite-writer.ts";
import { unpackText } from "./text-packing.ts";

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

/** Thrown (as a rejection) by a write to a store opened with `readOnly`. `code` is `"event_store_read_only"`. */
export class ReadOnlyStoreError extends Error {
  readonly code = "event_store_read_only";
  constructor(
    readonly path: string,
    operation: string,
  ) {
    super(`event store ${path} was opened read-only: cannot ${operation}`);
    this.name = "ReadOnlyStoreError";
  }
}

/** The largest file an image in memory can hold: Node's readFile limit (2 GiB - 1). */
const IMAGE_MAX_BYTES = 2 ** 31 - 1;

/**
 * How {@link openReadOnlyStoreFile} opened a file: `in-place`, a read-only connection to the file (beside its `-wal`
 * and `-shm`); `image`, a copy in memory of the file, with the commits of its `-wal` when it had one (`withWal`).
 */
export type ReadOnlyOpening = { readonly how: "in-place" } | { readonly how: "image"; readonly withWal: boolean };

/**
 * Opens the store file at `path` read-only and writes nothing: no `-wal`, `-shm` or lock file is created beside it
 * and none is removed, so that it opens on read-only media. better-sqlite3 12 is built without URI filenames
 * (`SQLITE_USE_URI=0`), so SQLite's `immutable=1` is out of reach, and a `readonly` connection to a file in WAL mode
 * creates the `-wal` and `-shm` when they are missing (and leaves them). Hence:
 * - `-wal` and `-shm` both there (a server has the file open, or a copy taken while one had): a `readonly`
 *   connection to the file in place, which reads the WAL's commits (from a read-only `-shm` too: SQLite then reads
 *   the WAL itself) and sees what a server commits meanwhile.
 * - otherwise (the file of a stopped server, which removed both; a copy with its `-wal` and no `-shm`): an image of
 *   the file in memory, as many bytes as the file, with the commits of the `-wal` up to its last whole one applied
 *   by SQLite's own recovery on a private temporary copy; what is committed afterwards is not seen. A file over
 *   2 GiB is then opened in place when its folder is writable (SQLite leaves a `-wal` and a `-shm` there).
 * @throws Error naming the file when it is missing, when it is over 2 GiB on read-only media without its `-shm`,
 *   when it holds no store, when its layout is newer than this code's or earlier (the server migrates it when it
 *   next starts on it); SqliteError (better-sqlite3) when it is not a database. The database is closed first.
 */
export function openReadOnlyStoreFile(path: string): {
  readonly db: Database.Database;
  readonly opening: ReadOnlyOpening;
} {
  if (!existsSync(path)) throw new Error(`no event store file ${path}`);
  const wal = `${path}-wal`;
  const inPlace = (): Database.Database => new Database(path, { readonly: true, fileMustExist: true });
  let db: Database.Database;
  let opening: ReadOnlyOpening;
  if (existsSync(wal) && existsSync(`${path}-shm`)) {
    db = inPlace();
    opening = { how: "in-place" };
  } else if (statSync(path).size > IMAGE_MAX_BYTES) {
    if (!writable(dirname(path)))
      throw new Error(
        `store file ${path} is ${(statSync(path).size / 2 ** 30).toFixed(1)} GiB on read-only media without its -shm file: it can be read only as an image in memory, of at most 2 GiB; copy the store to writable media (the -wal with it, if there is one)`,
      );
    db = inPlace();
    opening = { how: "in-place" };
  } else {
    const withWal = existsSync(wal) && statSync(wal).size > 0;
    const image = withWal ? imageWithWal(path, wal) : readFileSync(path);
    // Bytes 18 and 19 (the write and read versions) say WAL mode (2), which an image in memory cannot have.
    if (image.length >= 100) image.fill(1, 18, 20);
    db = new Database(image, { readonly: true });
    opening = { how: "image", withWal };
  }
  try {
    checkReadableLayout(db, path);
  } catch (error) {
    db.close();
    throw error;
  }
  return { db, opening };
}

const writable = (dir: string): boolean => {
  try {
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
};

/** @throws Error when `db` (the file at `path`) holds no store, or one of another layout than {@link LAYOUT}. */
const checkReadableLayout = (db: Database.Database, path: string): void => {
  const layout = db.pragma("user_version", { simple: true }) as number;
  const columns = db.prepare<[], { name: string }>("SELECT name FROM pragma_table_info('entries')").all();
  if (layout > LAYOUT) throw new Error(`store file ${path} has layout ${layout}, newer than this server's (${LAYOUT})`);
  if (columns.length === 0) throw new Error(`${path} holds no event store (no table entries)`);
  if (layout < LAYOUT)
    throw new Error(
      `store file ${path} has layout ${Math.max(1, layout)} (user_version ${layout}): the server migrates it to layout ${LAYOUT} when it next starts on it (duplex serve --data ...)`,
    );
};

/**
 * The database at `path` as one image in memory, its `-wal`'s commits included: the file and its `-wal` are copied
 * into a private temporary folder, where SQLite's own recovery reads the WAL (up to its last whole commit; a
 * transaction under way or a torn frame is left out), and the connection's content is serialised; the folder is
 * removed before returning. Costs the file's size in memory and, for a moment, on the temporary disk.
 */
const imageWithWal = (path: string, wal: string): Buffer => {
  const dir = mkdtempSync(join(tmpdir(), "duplex-read-"));
  try {
    const copy = join(dir, "store.sqlite");
    copyFileSync(path, copy);
    copyFileSync(wal, `${copy}-wal`);
    const db = new Database(copy, { fileMustExist: true });
    try {
      return db.serialize();
    } finally {
      db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

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

/** The least time between two groups sent to the writer thread under load, ms (flush-timer.ts). */
const WRITER_FLUSH_MS = 2;

/** Where appends go: a writer on this thread or on a worker, both committing groups. */
interface GroupWriter {
  append(request: AppendRequest): Promise<AppendOutcome>;
  deleteStream(stream: string): Promise<boolean>;
  /** Waits for the appends made so far, then folds every summary again (StoreWriter's `rebuildSummaries`). */
  rebuildSummaries(): Promise<number>;
  /** Waits for every append made so far, then releases the writer. */
  close(): Promise<void>;
}

/** An error as the writer reports it, back to an `Error` with the same name, message and code. */
type Failure = { readonly name: string; readonly message: string; readonly code?: string };
const errorOf = (failure: Failure): Error => Object.assign(new Error(failure.message), failure);

/** The writer of a store opened read-only: every write rejects with {@link ReadOnlyStoreError}. */
function readOnlyWriter(path: string): GroupWriter {
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
function mainThreadWriter(writer: StoreWriter): GroupWriter {
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
function workerWriter(path: string): GroupWriter {
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
