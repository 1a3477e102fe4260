import Database from "better-sqlite3";
import type { NewEntry } from "../../src/engine/ports/event-store.ts";
import { packBlob } from "../../src/infra/event-store/blob-packing.ts";
import { encodeData } from "../../src/infra/event-store/codec.ts";
import { binCodecs, textCodecs } from "../../src/infra/event-store/sqlite-codecs.ts";
import { packText } from "../../src/infra/event-store/text-packing.ts";

/**
 * A store file of layout 2 (user_version 2: the release before issue 32's summaries), its schema as that release
 * created it, at `path`. `append` stores a stream's entries as that release did (texts packed with their metadata
 * where that saves bytes, blobs packed, both named by codec id; positions follow on). Close it before the store
 * opens the file.
 */
export const createLayout2File = (
  path: string,
): { readonly db: Database.Database; append(stream: string, entries: readonly NewEntry[]): void } => {
  const db = new Database(path);
  db.exec(`CREATE TABLE streams (id INTEGER PRIMARY KEY, stream TEXT NOT NULL UNIQUE, revision INTEGER NOT NULL,
    first_position INTEGER NOT NULL, first_at REAL NOT NULL, last_at REAL NOT NULL);
    CREATE INDEX streams_by_first_position ON streams (first_position);
    CREATE TABLE entries (position INTEGER PRIMARY KEY AUTOINCREMENT, stream_id INTEGER NOT NULL,
    revision INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, bin BLOB, metadata TEXT NOT NULL,
    bin_codec INTEGER, text_codec INTEGER, UNIQUE (stream_id, revision));
    PRAGMA user_version = 2;`);
  const insertStream = db.prepare<[string, number, number, number]>(
    "INSERT INTO streams (stream, revision, first_position, first_at, last_at) VALUES (?, ?, 0, ?, ?)",
  );
  const insertEntry = db.prepare<
    [number, number, string, string | Uint8Array, Uint8Array | null, string, number | null, number | null]
  >(
    "INSERT INTO entries (stream_id, revision, type, data, bin, metadata, bin_codec, text_codec) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
  );
  const setFirst = db.prepare<[number, number]>("UPDATE streams SET first_position = ? WHERE id = ?");
  const append = db.transaction((stream: string, entries: readonly NewEntry[]) => {
    const first = entries[0]?.metadata.at ?? 0;
    const last = entries.at(-1)?.metadata.at ?? 0;
    const id = Number(insertStream.run(stream, entries.length - 1, first, last).lastInsertRowid);
    for (const [revision, entry] of entries.entries()) {
      const { json, blob } = encodeData(entry.data);
      const metadata = JSON.stringify(entry.metadata);
      const text = packText(json, metadata);
      const bin = blob === null ? null : packBlob(blob);
      const position = Number(
        insertEntry.run(
          id,
          revision,
          entry.type,
          text?.bytes ?? json,
          bin?.bytes ?? null,
          text === null ? metadata : "",
          binCodecs.id(bin?.codec ?? null),
          textCodecs.id(text?.codec ?? null),
        ).lastInsertRowid,
      );
      if (revision === 0) setFirst.run(position, id);
    }
  });
  return { db, append: (stream, entries) => append(stream, entries) };
};
