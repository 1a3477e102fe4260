import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { binCodecs, textCodecs } from "./sqlite-codecs.ts";
import { createSummaryWriter, SUMMARY_SCHEMA } from "./sqlite-summaries.ts";

export {
  type AppendOutcome,
  type AppendRequest,
  createStoreWriter,
  type EncodedEntry,
  type StoreWriter,
} from "./sqlite-store-writer.ts";
export { binCodecs, textCodecs };

/**
 * The write side of the sqlite event store: the file's layout, and group commit of appends (sqlite-store-writer.ts). The store runs it on a
 * worker thread for a file (sqlite-writer-worker.mjs, issue 11: packing and committing off the event loop) and on
 * the calling thread for `:memory:`.
 */

/**
 * Layout 3 (`PRAGMA user_version = 3`, issue 32: lists that read no logs): layout 2 and table `summaries`, one row per
 * stream (sqlite-summaries.ts), written with every append. Layout 2 (issue 24: the log's size): entries name their
 * stream by the integer `id` of its row in `streams`, not by its name, which was about 45 bytes in every row and
 * again in the (stream, revision) index, a tenth of a conversation's log. Files of layout 1 (user_version 0: every
 * file before layout 2) and 2 are migrated on open.
 */
export const LAYOUT = 3;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS streams (
  id INTEGER PRIMARY KEY,
  stream TEXT NOT NULL UNIQUE,
  revision INTEGER NOT NULL,
  first_position INTEGER NOT NULL,
  first_at REAL NOT NULL,
  last_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS streams_by_first_position ON streams (first_position);
CREATE TABLE IF NOT EXISTS entries (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  stream_id INTEGER NOT NULL,
  revision INTEGER NOT NULL,
  type TEXT NOT NULL,
  data TEXT NOT NULL,
  bin BLOB,
  metadata TEXT NOT NULL,
  bin_codec INTEGER,
  text_codec INTEGER,
  UNIQUE (stream_id, revision)
);
${SUMMARY_SCHEMA}`;

/**
 * Opens (creating it and its parent folder when missing) a store file or `":memory:"`, with its pragmas and
 * tables. Pragmas: `journal_mode = WAL`, `synchronous = NORMAL` (a power loss may drop the last commits, never
 * corrupt the file), 16 KiB pages for a new file, the WAL checkpointed every 4 MiB and cut back to that size.
 * A file of the current layout is not written to by opening it. A file of an earlier layout is migrated in one
 * transaction when `migrate` is not false (the caller holds the store's lock: the server does). Layout 1 to 2: every
 * row is copied, seconds for a file of hundreds of MB, and the disk needs room for the copy twice over while it runs
 * (in the WAL, then in the file, which keeps the old tables' pages as free pages); positions, revisions, codecs and
 * the position counter are kept. Layout 2 to 3: the summaries are folded from the logs, one pass over the entries'
 * texts (not their blobs), about a second per million entries.
 *
 * @throws SqliteError (from better-sqlite3) when the file cannot be opened or is not a store, or the migration
 *   fails (nothing of it is kept then). @throws Error when the file's layout is newer than this code's, when it is
 *   of an earlier layout and `migrate` is false, or when its blobs name a codec this version does not know (nothing
 *   migrated). The file is closed before any of these is thrown.
 */
export function openStoreFile(path: string, options: { readonly migrate?: boolean } = {}): Database.Database {
  if (path !== ":memory:" && path !== "") mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  try {
    // Rows of 100 ms of packed audio (1-3 KB) leave half of a 4 KiB page empty; 16 KiB pages hold several. Only a
    // new file takes the size (an existing one keeps its own).
    db.pragma("page_size = 16384");
    db.pragma("journal_mode = WAL");
    // The WAL is checkpointed every 4 MiB (the default, 1000 pages, would be 16 MiB at this page size) and cut back
    // to that size afterwards, so it does not stay at its largest on disk.
    db.pragma("wal_autocheckpoint = 256");
    db.pragma(`journal_size_limit = ${4 * 1024 * 1024}`);
    db.pragma("synchronous = NORMAL");
    const layoutOf = (): { layout: number; columns: Set<string> } => ({
      layout: db.pragma("user_version", { simple: true }) as number,
      columns: new Set(
        db
          .prepare<[], { name: string }>("SELECT name FROM pragma_table_info('entries')")
          .all()
          .map((c) => c.name),
      ),
    });
    const seen = layoutOf();
    if (seen.layout > LAYOUT) {
      throw new Error(`store file ${path} has layout ${seen.layout}, newer than this server's (${LAYOUT})`);
    }
    if (seen.layout === LAYOUT && seen.columns.size > 0) return db;
    if (seen.columns.size > 0 && options.migrate === false) {
      throw new Error(
        `store file ${path} has layout ${Math.max(1, seen.layout)} (user_version ${seen.layout}): the server migrates it to layout ${LAYOUT} when it next starts on it (duplex serve --data ...)`,
      );
    }
    db.transaction(() => {
      // Read again under the write lock: another process may have created or migrated it meanwhile.
      const { layout, columns } = layoutOf();
      if (layout === LAYOUT && columns.size > 0) return;
      if (columns.size === 0) db.exec(SCHEMA);
      else {
        if (layout < 2) migrateLayout1(db, columns, path);
        migrateLayout2(db);
      }
      db.pragma(`user_version = ${LAYOUT}`);
    }).immediate();
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/**
 * Layout 1 to 2, inside the caller's transaction: the tables renamed aside, the new ones created, streams copied in
 * the order they began and entries with their positions, the AUTOINCREMENT counter carried over (a deleted last
 * stream leaves it above the largest position left, and a position is never given twice). Files from before blob
 * packing lack `bin_codec` (their blobs are raw: NULL), and the names it held become ids; texts of layout 1 are
 * plain (NULL `text_codec`).
 * @throws Error when a blob names a codec this version does not know, or when the copy does not hold every entry
 *   (an entry of a stream without its row): the caller's transaction then keeps nothing.
 */
function migrateLayout1(db: Database.Database, columns: ReadonlySet<string>, path: string): void {
  const counter = (name: string): number =>
    db.prepare<[string], { seq: number }>("SELECT seq FROM sqlite_sequence WHERE name = ?").get(name)?.seq ?? 0;
  const count = (table: string): number =>
    db.prepare<[], { n: number }>(`SELECT count(*) AS n FROM ${table}`).get()?.n ?? 0;
  if (columns.has("bin_codec")) {
    const unknown = db
      .prepare<[], { codec: string }>("SELECT DISTINCT bin_codec AS codec FROM entries WHERE bin_codec IS NOT NULL")
      .all()
      .map((r) => r.codec)
      .filter((codec) => (binCodecs.id(codec) ?? -1) < 0);
    if (unknown.length > 0) {
      throw new Error(
        `store file ${path}: blobs packed with ${unknown.map((c) => JSON.stringify(c)).join(", ")}, a codec this version does not know; nothing migrated`,
      );
    }
  }
  const before = counter("entries");
  const entries = count("entries");
  db.exec(`
    ALTER TABLE entries RENAME TO entries_layout1;
    ALTER TABLE streams RENAME TO streams_layout1;
    DROP INDEX IF EXISTS streams_by_first_position;
    ${SCHEMA}
    INSERT INTO streams (stream, revision, first_position, first_at, last_at)
      SELECT stream, revision, first_position, first_at, last_at FROM streams_layout1 ORDER BY first_position;
    INSERT INTO entries (position, stream_id, revision, type, data, bin, metadata, bin_codec, text_codec)
      SELECT e.position, s.id, e.revision, e.type, e.data, e.bin, e.metadata,
        ${columns.has("bin_codec") ? binCodecs.sqlOf("e.bin_codec") : "NULL"}, NULL
      FROM entries_layout1 e JOIN streams s ON s.stream = e.stream ORDER BY e.position;
  `);
  if (count("entries") !== entries) {
    throw new Error(
      `store file ${path}: ${entries - count("entries")} of ${entries} entries belong to no stream row; nothing migrated`,
    );
  }
  db.exec("DROP TABLE entries_layout1; DROP TABLE streams_layout1;");
  const seq = Math.max(before, counter("entries"), counter("entries_layout1"));
  db.prepare("DELETE FROM sqlite_sequence WHERE name IN ('entries', 'entries_layout1')").run();
  if (seq > 0) db.prepare("INSERT INTO sqlite_sequence (name, seq) VALUES ('entries', ?)").run(seq);
}

/**
 * Layout 2 to 3, inside the caller's transaction: table `summaries` created and a row folded for every stream from
 * its stored entries (sqlite-summaries.ts).
 */
function migrateLayout2(db: Database.Database): void {
  db.exec(SUMMARY_SCHEMA);
  createSummaryWriter(db).rebuild();
}
