/**
 * Opening a sqlite store file read-only (sqlite.ts, `readOnly`), for the commands that only read, on read-only media
 * too: in place beside its `-wal` and `-shm`, or as an image in memory with its `-wal`'s commits, and the check that
 * the file holds a store of this code's layout.
 */
import { accessSync, constants, copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import Database from "better-sqlite3";
import { LAYOUT } from "./sqlite-writer.ts";

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
