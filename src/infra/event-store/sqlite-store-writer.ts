import type Database from "better-sqlite3";
import type { ExpectedRevision } from "../../engine/ports/event-store.ts";
import { type BlobCodec, packBlob, unpackBlob } from "./blob-packing.ts";
import type { EncodedEntry } from "./codec.ts";
import { binCodecs, textCodecs } from "./sqlite-codecs.ts";
import { createSummaryWriter } from "./sqlite-summaries.ts";
import { packText, unpackText } from "./text-packing.ts";

/**
 * Group commit of appends into a sqlite store file of layout 3 (sqlite-writer.ts has the layout and opens the file):
 * each request's revision checked, its blobs and texts packed, every request of a group in one transaction.
 */

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
   * Blobs (blob-packing.ts) and texts (text-packing.ts) are packed before the transaction, synchronously.
   */
  writeGroup(requests: readonly AppendRequest[]): AppendOutcome[];
  /** Removes a stream, its entries and its summary; false when there was none. @throws SqliteError from the driver. */
  deleteStream(stream: string): boolean;
  /**
   * Folds every stream's summary again from its entries, in one transaction (sqlite-summaries.ts). Returns how many
   * streams it summarised. @throws SqliteError from the driver; SyntaxError for an entry whose texts are not JSON.
   */
  rebuildSummaries(): number;
}

/** A request with its blobs and texts packed (null: stored as they are). */
interface Packed {
  readonly request: AppendRequest;
  readonly packed: readonly ({ readonly bytes: Uint8Array; readonly codec: BlobCodec } | null)[];
  readonly texts: readonly ({ readonly bytes: Uint8Array; readonly codec: string | null } | null)[];
}

/** The writer's prepared statements over `db`. */
const prepareWrites = (db: Database.Database) => ({
  selectStream: db.prepare<[string], { id: number; revision: number }>(
    "SELECT id, revision FROM streams WHERE stream = ?",
  ),
  insertEntry: db.prepare<
    [number, number, string, string | Uint8Array, Uint8Array | null, string, number | null, number | null]
  >(
    "INSERT INTO entries (stream_id, revision, type, data, bin, metadata, bin_codec, text_codec) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
  ),
  // A new stream's row comes before its entries (they name its id); its first position is set after the first.
  insertStream: db.prepare<[string, number, number]>(
    "INSERT INTO streams (stream, revision, first_position, first_at, last_at) VALUES (?, -1, 0, ?, ?)",
  ),
  updateStream: db.prepare<[number, number, number]>("UPDATE streams SET revision = ?, last_at = ? WHERE id = ?"),
  setFirstPosition: db.prepare<[number, number]>("UPDATE streams SET first_position = ? WHERE id = ?"),
  selectRange: db.prepare<
    [number, number, number],
    {
      position: number;
      type: string;
      data: string | Uint8Array;
      bin: Uint8Array | null;
      metadata: string;
      bin_codec: number | null;
      text_codec: number | null;
    }
  >(
    "SELECT position, type, data, bin, metadata, bin_codec, text_codec FROM entries WHERE stream_id = ? AND revision BETWEEN ? AND ? ORDER BY revision",
  ),
  deleteEntries: db.prepare<[number]>("DELETE FROM entries WHERE stream_id = ?"),
  deleteStreamRow: db.prepare<[number]>("DELETE FROM streams WHERE id = ?"),
});

type Writes = ReturnType<typeof prepareWrites>;

/**
 * A request whose expected revision does not match: a retry of an append that was stored (its reply lost) when the
 * same entries are stored right after `expected` (their positions; `retry`), else the wrong revision.
 */
const retryOrWrong = (
  w: Writes,
  request: AppendRequest,
  streamRow: { readonly id: number } | undefined,
  actual: number | "no_stream",
): AppendOutcome => {
  const { expected, entries } = request;
  const first = expected === "no_stream" || expected === "any" ? 0 : expected + 1;
  const stored =
    entries.length === 0 || streamRow === undefined
      ? []
      : w.selectRange.all(streamRow.id, first, first + entries.length - 1);
  const same =
    stored.length === entries.length &&
    stored.length > 0 &&
    stored.every((row, i) => {
      const entry = entries[i] as EncodedEntry;
      const bin = row.bin === null ? null : unpackBlob(row.bin, binCodecs.name(row.bin_codec));
      const text = unpackText(row.data, row.metadata, textCodecs.name(row.text_codec));
      return (
        row.type === entry.type &&
        text.json === entry.json &&
        text.metadata === entry.metadata &&
        (bin === null ? entry.blob === null : entry.blob !== null && Buffer.from(bin).equals(entry.blob))
      );
    });
  if (same)
    return { ok: true, revision: first + entries.length - 1, positions: stored.map((r) => r.position), retry: true };
  return { ok: false, wrongRevision: { actual } };
};

/** A stored failure of `stream`'s append: a UNIQUE violation is another writer (the wrong revision). */
const failureOf = (w: Writes, error: unknown, stream: string): AppendOutcome => {
  if (isUniqueViolation(error))
    return { ok: false, wrongRevision: { actual: w.selectStream.get(stream)?.revision ?? "no_stream" } };
  const e = error instanceof Error ? error : new Error(String(error));
  const code = (e as { code?: unknown }).code;
  return {
    ok: false,
    failure: { name: e.name, message: e.message, ...(typeof code === "string" ? { code } : {}) },
  };
};

/** Creates the writer of `db` (opened by sqlite-writer.ts `openStoreFile`). */
export function createStoreWriter(db: Database.Database): StoreWriter {
  const w = prepareWrites(db);
  const summaries = createSummaryWriter(db);

  const writeOne = ({ request, packed, texts }: Packed): AppendOutcome => {
    const { stream, expected, entries } = request;
    const streamRow = w.selectStream.get(stream);
    const actual = streamRow?.revision ?? "no_stream";
    if (expected !== "any" && expected !== actual) return retryOrWrong(w, request, streamRow, actual);
    let revision = actual === "no_stream" ? -1 : actual;
    const positions: number[] = [];
    const first = entries[0];
    if (first === undefined) return { ok: true, revision, positions };
    const id = streamRow?.id ?? Number(w.insertStream.run(stream, first.at, first.at).lastInsertRowid);
    for (const [i, entry] of entries.entries()) {
      revision += 1;
      const bin = packed[i] ?? null;
      const text = texts[i] ?? null;
      const { lastInsertRowid } = w.insertEntry.run(
        id,
        revision,
        entry.type,
        text?.bytes ?? entry.json,
        bin?.bytes ?? null,
        text === null ? entry.metadata : "",
        binCodecs.id(bin?.codec ?? null),
        textCodecs.id(text?.codec ?? null),
      );
      const position = Number(lastInsertRowid);
      positions.push(position);
      if (revision === 0) w.setFirstPosition.run(position, id);
    }
    w.updateStream.run(revision, (entries.at(-1) as EncodedEntry).at, id);
    summaries.advance(id, stream, revision - entries.length + 1, entries);
    return { ok: true, revision, positions };
  };

  const writeAll = db.transaction((group: readonly Packed[]): AppendOutcome[] => group.map(writeOne));

  const writeGroup = (requests: readonly AppendRequest[]): AppendOutcome[] => {
    let group: Packed[];
    try {
      group = requests.map((request) => ({
        request,
        packed: request.entries.map((entry) => (entry.blob === null ? null : packBlob(entry.blob))),
        texts: request.entries.map((entry) => packText(entry.json, entry.metadata)),
      }));
    } catch (error) {
      return requests.map((request) => failureOf(w, error, request.stream));
    }
    try {
      return writeAll.immediate(group);
    } catch (error) {
      summaries.forget();
      if (group.length === 1) return [failureOf(w, error, requests[0]?.stream ?? "")];
    }
    return group.map((one) => {
      try {
        return writeAll.immediate([one])[0] as AppendOutcome;
      } catch (error) {
        summaries.forget();
        return failureOf(w, error, one.request.stream);
      }
    });
  };

  const deleteStream = db.transaction((stream: string): boolean => {
    const row = w.selectStream.get(stream);
    if (row === undefined) return false;
    w.deleteEntries.run(row.id);
    summaries.remove(row.id);
    return w.deleteStreamRow.run(row.id).changes > 0;
  });
  const rebuildSummaries = db.transaction((): number => summaries.rebuild());

  return {
    writeGroup,
    deleteStream: (stream) => deleteStream.immediate(stream),
    rebuildSummaries: () => rebuildSummaries.immediate(),
  };
}

function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}
