import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import type { ExpectedRevision } from "../../engine/ports/event-store.ts";
import { type BlobCodec, packBlob, unpackBlob } from "./blob-packing.ts";
import type { EncodedEntry } from "./codec.ts";

/**
 * The write side of the sqlite event store: the file's layout, and group commit of appends. The store runs it on a
 * worker thread for a file (sqlite-writer-worker.mjs, issue 11: packing and committing off the event loop) and on
 * the calling thread for `:memory:`.
 */

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

/**
 * Opens (creating it and its parent folder when missing) a store file or `":memory:"`, with its pragmas and
 * tables. Pragmas: `journal_mode = WAL`, `synchronous = NORMAL` (a power loss may drop the last commits, never
 * corrupt the file), 16 KiB pages for a new file, the WAL checkpointed every 4 MiB and cut back to that size.
 *
 * @throws SqliteError (from better-sqlite3) when the file cannot be opened or is not a store.
 */
export function openStoreFile(path: string): Database.Database {
  if (path !== ":memory:" && path !== "") mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
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
  return db;
}

export type { EncodedEntry };

/** One `EventStore.append` call, as the writer takes it. */
export interface AppendRequest {
  readonly stream: string;
  readonly expected: ExpectedRevision;
  readonly entries: readonly EncodedEntry[];
}

/**
 * What became of one request: its last revision (-1: no stream, for an empty batch that created nothing) and the
 * global position of each entry; or why nothing of it was stored.
 */
export type AppendOutcome =
  | {
      readonly ok: true;
      readonly revision: number;
      readonly positions: readonly number[];
      /** A repeated append found already stored: nothing was written. */
      readonly retry?: true;
    }
  | { readonly ok: false; readonly wrongRevision: { readonly actual: number | "no_stream" } }
  | {
      readonly ok: false;
      readonly failure: { readonly name: string; readonly message: string; readonly code?: string };
    };

/** The writer of one open file. */
export interface StoreWriter {
  /**
   * Stores a group of appends in one transaction (`BEGIN IMMEDIATE`, so the revision checks and the inserts hold
   * the write lock together, even against another process). Requests are applied in order, each checking its own
   * expected revision against the state the earlier ones left; one that does not match stores nothing and the
   * others go on. Should the transaction itself fail (a full disk, a UNIQUE violation from another writer), each
   * request is retried in a transaction of its own, so every outcome names its own cause.
   *
   * Blobs are packed (blob-packing.ts) before the transaction, synchronously.
   */
  writeGroup(requests: readonly AppendRequest[]): AppendOutcome[];
  /** Removes a stream and its entries; false when there was none. @throws SqliteError from the driver. */
  deleteStream(stream: string): boolean;
}

/** A request with its blobs packed. */
interface Packed {
  readonly request: AppendRequest;
  readonly packed: readonly ({ readonly bytes: Uint8Array; readonly codec: BlobCodec } | null)[];
}

/** Creates the writer of `db` (opened by {@link openStoreFile}). */
export function createStoreWriter(db: Database.Database): StoreWriter {
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
  const selectRange = db.prepare<
    [string, number, number],
    { position: number; type: string; data: string; bin: Uint8Array | null; metadata: string; bin_codec: string | null }
  >(
    "SELECT position, type, data, bin, metadata, bin_codec FROM entries WHERE stream = ? AND revision BETWEEN ? AND ? ORDER BY revision",
  );
  const deleteEntries = db.prepare<[string]>("DELETE FROM entries WHERE stream = ?");
  const deleteStreamRow = db.prepare<[string]>("DELETE FROM streams WHERE stream = ?");

  const currentRevision = (stream: string): number | "no_stream" => selectStream.get(stream)?.revision ?? "no_stream";

  const writeOne = ({ request, packed }: Packed): AppendOutcome => {
    const { stream, expected, entries } = request;
    const actual = currentRevision(stream);
    if (expected !== "any" && expected !== actual) {
      // A retry of an append that was stored (its reply lost): the same entries right after `expected`.
      const first = expected === "no_stream" ? 0 : expected + 1;
      const stored = entries.length === 0 ? [] : selectRange.all(stream, first, first + entries.length - 1);
      const same =
        stored.length === entries.length &&
        stored.length > 0 &&
        stored.every((row, i) => {
          const entry = entries[i] as EncodedEntry;
          const bin = row.bin === null ? null : unpackBlob(row.bin, row.bin_codec);
          return (
            row.type === entry.type &&
            row.data === entry.json &&
            row.metadata === entry.metadata &&
            (bin === null ? entry.blob === null : entry.blob !== null && Buffer.from(bin).equals(entry.blob))
          );
        });
      if (same)
        return {
          ok: true,
          revision: first + entries.length - 1,
          positions: stored.map((r) => r.position),
          retry: true,
        };
      return { ok: false, wrongRevision: { actual } };
    }
    let revision = actual === "no_stream" ? -1 : actual;
    const positions: number[] = [];
    for (const [i, entry] of entries.entries()) {
      revision += 1;
      const bin = packed[i] ?? null;
      const { lastInsertRowid } = insertEntry.run(
        stream,
        revision,
        entry.type,
        entry.json,
        bin?.bytes ?? null,
        entry.metadata,
        bin?.codec ?? null,
      );
      const position = Number(lastInsertRowid);
      positions.push(position);
      if (revision === 0) insertStream.run(stream, revision, position, entry.at, entry.at);
    }
    const last = entries.at(-1);
    if (last !== undefined && revision > 0) updateStream.run(revision, last.at, stream);
    return { ok: true, revision, positions };
  };

  const writeAll = db.transaction((group: readonly Packed[]): AppendOutcome[] => group.map(writeOne));

  const failureOf = (error: unknown, stream: string): AppendOutcome => {
    if (isUniqueViolation(error)) return { ok: false, wrongRevision: { actual: currentRevision(stream) } };
    const e = error instanceof Error ? error : new Error(String(error));
    const code = (e as { code?: unknown }).code;
    return {
      ok: false,
      failure: { name: e.name, message: e.message, ...(typeof code === "string" ? { code } : {}) },
    };
  };

  const writeGroup = (requests: readonly AppendRequest[]): AppendOutcome[] => {
    let group: Packed[];
    try {
      group = requests.map((request) => ({
        request,
        packed: request.entries.map((entry) => (entry.blob === null ? null : packBlob(entry.blob))),
      }));
    } catch (error) {
      return requests.map((request) => failureOf(error, request.stream));
    }
    try {
      return writeAll.immediate(group);
    } catch (error) {
      if (group.length === 1) return [failureOf(error, requests[0]?.stream ?? "")];
    }
    return group.map((one) => {
      try {
        return writeAll.immediate([one])[0] as AppendOutcome;
      } catch (error) {
        return failureOf(error, one.request.stream);
      }
    });
  };

  const deleteStream = db.transaction((stream: string): boolean => {
    deleteEntries.run(stream);
    return deleteStreamRow.run(stream).changes > 0;
  });

  return { writeGroup, deleteStream: (stream) => deleteStream.immediate(stream) };
}

function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}
