import type Database from "better-sqlite3";
import type { RecordedEntry } from "../../engine/ports/event-store.ts";
import { unpackBlob } from "./blob-packing.ts";
import { decodeData } from "./codec.ts";
import { binCodecs, textCodecs } from "./sqlite-writer.ts";
import type { StreamRow } from "./stream-info.ts";
import { unpackText } from "./text-packing.ts";

/** The rows the sqlite store (sqlite.ts) reads, its prepared reads, and a row as the entry it records. */

/** A row of `entries` joined with its stream's name. */
export interface EntryRow {
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

/**
 * The store's prepared reads: a stream's entries from a revision (all, or a page of `limit`), every stream's from a
 * global position (a page), and the streams whose name starts with a prefix, in the order they were created.
 */
export const prepareReads = (db: Database.Database) => {
  // CROSS JOIN keeps the join order as written: the stream's row, then its entries by (stream_id, revision); or
  // the entries by position, each with its stream's name by id.
  const COLUMNS = "e.position, s.stream, e.revision, e.type, e.data, e.bin, e.metadata, e.bin_codec, e.text_codec";
  const fromStream = db.prepare<[string, number, number], EntryRow>(
    `SELECT ${COLUMNS} FROM streams s CROSS JOIN entries e ON e.stream_id = s.id
     WHERE s.stream = ? AND e.revision >= ? ORDER BY e.revision LIMIT ?`,
  );
  const fromAll = db.prepare<[number, number], EntryRow>(
    `SELECT ${COLUMNS} FROM entries e CROSS JOIN streams s ON s.id = e.stream_id
     WHERE e.position >= ? ORDER BY e.position LIMIT ?`,
  );
  const allOfStream = db.prepare<[string, number], EntryRow>(
    `SELECT ${COLUMNS} FROM streams s CROSS JOIN entries e ON e.stream_id = s.id
     WHERE s.stream = ? AND e.revision >= ? ORDER BY e.revision`,
  );
  const pageOfStream = db.prepare<[string, number, number], EntryRow>(
    `SELECT ${COLUMNS} FROM streams s CROSS JOIN entries e ON e.stream_id = s.id
     WHERE s.stream = ? AND e.revision >= ? ORDER BY e.revision LIMIT ?`,
  );
  // substr rather than LIKE, where `_` and `%` in a prefix would be wildcards.
  const streams = db.prepare<{ prefix: string }, StreamRow>(
    `SELECT stream, revision, first_at, last_at FROM streams
     WHERE substr(stream, 1, length(@prefix)) = @prefix ORDER BY first_position`,
  );

  return { fromStream, fromAll, allOfStream, pageOfStream, streams };
};

/** The prepared reads of a store file ({@link prepareReads}). */
export type StoreReads = ReturnType<typeof prepareReads>;

/** A stored row as the entry it records: its texts and blob unpacked, its data decoded. */
export function toRecorded(row: EntryRow): RecordedEntry {
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
