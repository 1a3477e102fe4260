import Database from "better-sqlite3";

/**
 * A store file of layout 1 (user_version 0, before issue 24's layout 2: each entry names its stream, codecs by
 * name), created at `path` and returned open for the test to fill and close. `binCodec: false` makes it a file from
 * before blob packing, without the `bin_codec` column.
 */
export const createLayout1File = (
  path: string,
  { binCodec = true }: { binCodec?: boolean } = {},
): Database.Database => {
  const db = new Database(path);
  db.exec(`CREATE TABLE entries (position INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL,
    revision INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, bin BLOB, metadata TEXT NOT NULL,
    ${binCodec ? "bin_codec TEXT, " : ""}UNIQUE (stream, revision));
    CREATE TABLE streams (stream TEXT PRIMARY KEY, revision INTEGER NOT NULL, first_position INTEGER NOT NULL,
    first_at REAL NOT NULL, last_at REAL NOT NULL);
    CREATE INDEX streams_by_first_position ON streams (first_position);`);
  return db;
};
