import { accessSync, constants, existsSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { type Command, InvalidArgumentError } from "commander";
import type { EventStore, RecordedEntry } from "../engine/index.ts";
import type { DeployConfig } from "../infra/config.ts";
import { sqlitePathIn } from "../infra/event-store/paths.ts";

/**
 * How the commands that read a store (`sessions`, `show`, `replay`, `timeline`, `export`, `verify`, `trace`, `gc`)
 * name it and a session in it (issue 33, part 6), one way for all: the store is the embedded one in `--data DIR`
 * (default ./data) or the `event_store` of `--config FILE` (the server's config: sqlite, PostgreSQL, KurrentDB); the
 * session is `--session ID`, `--last` (the one opened last), or a session FILE (an export, one log entry a line),
 * exactly one of them. The modules of a store are imported when one is opened.
 */

/** `--data DIR` and `--config FILE` as commander parses them: each absent unless given. */
export interface StoreChoice {
  readonly data?: string;
  readonly config?: string;
}

/** A store's options and, for those that name a session, `--session ID` and `--last`. */
export interface SessionChoice extends StoreChoice {
  readonly session?: string;
  readonly last: boolean;
}

/** The folder `--data` names when neither it nor `--config` is given. */
const DEFAULT_DATA = "./data";

/** Adds `--data DIR` and `--config FILE` to `command` (no default: {@link storeOf} knows which was given). */
export const withStoreOptions = (command: Command): Command =>
  command
    .option("--data <dir>", `folder of the embedded event store (default ${DEFAULT_DATA})`)
    .option(
      "--config <file>",
      "the server's deployment YAML: read its event_store (sqlite, PostgreSQL or KurrentDB) instead of --data's",
    );

/** Adds {@link withStoreOptions}, `--session ID` and `--last` to `command`. */
export const withSessionOptions = (command: Command): Command =>
  withStoreOptions(command)
    .option("--session <id>", "the session's id in the store")
    .option("--last", "the session opened last in the store", false);

/** A store to open: the configured `event_store`, and where it is for messages (a folder, a file or a URL). */
export interface StoreTarget {
  readonly config: DeployConfig["event_store"];
  readonly where: string;
  /** What named it: `--data DIR`, `--config FILE` or the default folder; said when it holds no store. */
  readonly namedBy: string;
}

/**
 * The store `opts` name: with `--config FILE` its `event_store` (a relative sqlite path is the working folder's,
 * as for `serve`); with `--data DIR` as well, a sqlite config's file moved into DIR (as `serve --data` does); else
 * the sqlite store in `--data` (default ./data).
 * @throws ConfigError (exit 2) when the config cannot be read, or `--data` comes with a PostgreSQL or KurrentDB
 *   config (the two name different stores).
 */
export const storeOf = async (opts: StoreChoice): Promise<StoreTarget> => {
  if (opts.config === undefined) {
    const dir = resolve(opts.data ?? DEFAULT_DATA);
    return {
      config: { kind: "sqlite", path: sqlitePathIn(dir) },
      where: dir,
      namedBy: opts.data === undefined ? `the default --data ${DEFAULT_DATA}` : `--data ${opts.data}`,
    };
  }
  const { ConfigError, loadConfig } = await import("../infra/config.ts");
  const store = (await loadConfig(opts.config)).event_store;
  if (opts.data !== undefined) {
    if (store.kind !== "sqlite")
      throw new ConfigError(
        `--data ${opts.data} with --config ${opts.config}: the configuration's event_store is ${store.kind}, and --data names the folder of an embedded sqlite store; give one of them`,
      );
    const dir = resolve(opts.data);
    return { config: { kind: "sqlite", path: sqlitePathIn(dir) }, where: dir, namedBy: `--data ${opts.data}` };
  }
  if (store.kind === "sqlite") {
    const path = resolve(store.path);
    return { config: { ...store, path }, where: path, namedBy: `event_store.path of --config ${opts.config}` };
  }
  const { redactUrl } = await import("../infra/event-store/open.ts");
  return { config: store, where: redactUrl(store.url), namedBy: `--config ${opts.config}` };
};

/**
 * Why this process may not write the sqlite store at `path`, or null when it may: the file, its `-wal` or `-shm` when
 * there, or its folder (where SQLite creates them, and a server its lock) is on read-only media, or its mode stops
 * this user (root passes every mode, but not read-only media).
 */
export const unwritableStore = (path: string): string | null => {
  const parts: [string, string][] = [
    ["the file", path],
    ...["-wal", "-shm"]
      .filter((s) => existsSync(`${path}${s}`))
      .map((s): [string, string] => [`its ${s}`, `${path}${s}`]),
    [`its folder ${dirname(path)}`, dirname(path)],
  ];
  for (const [what, part] of parts) {
    try {
      accessSync(part, constants.W_OK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const why =
        code === "EROFS"
          ? "read-only media"
          : code === "EACCES" || code === "EPERM"
            ? "permission denied"
            : String(code ?? (error as Error).message);
      return `this user may not write ${what} (${why})`;
    }
  }
  return null;
};

/** What a command that writes a sqlite store says when it cannot: `cannot DOING FILE: WHY; INSTEAD`. */
export interface StoreWrite {
  /** What it does to the file, e.g. `remove sessions from`. */
  readonly doing: string;
  /** What to do instead, e.g. `gc a writable copy of the store`. */
  readonly instead: string;
}

/**
 * Checks that this process may write the sqlite store at `path` ({@link unwritableStore}) before a command writes it.
 * @throws Error `cannot DOING FILE: WHY; INSTEAD` when it may not.
 */
export const checkWritableStore = (path: string, write: StoreWrite): void => {
  const why = unwritableStore(path);
  if (why !== null) throw new Error(`cannot ${write.doing} ${path}: ${why}; ${write.instead}`);
};

/**
 * `error` of a write to the sqlite store at `path` said as {@link checkWritableStore} says it, when SQLite or the
 * file system refused the write (a read-only database or media, a mode); any other error as it is.
 */
export const storeWriteError = (error: unknown, path: string, write: StoreWrite): unknown => {
  const code = String((error as NodeJS.ErrnoException).code ?? "");
  if (!/^(SQLITE_READONLY|SQLITE_CANTOPEN|SQLITE_PERM|EROFS|EACCES|EPERM)/.test(code)) return error;
  return new Error(
    `cannot ${write.doing} ${path}: ${unwritableStore(path) ?? `it is read-only (${(error as Error).message})`}; ${write.instead}`,
    { cause: error },
  );
};

/** An opened store, where it is (for messages) and what releases it. */
export interface OpenStore {
  readonly store: EventStore;
  readonly where: string;
  /** The sqlite file, for a sqlite store (null for another). */
  readonly file: string | null;
  readonly close: () => Promise<void>;
}

/**
 * Opens the store `opts` name ({@link storeOf}). `access: "read"` (every command that only reads, `gc --dry-run`):
 * a sqlite file read-only, creating nothing beside it and taking no lock (sqlite.ts `openReadOnlyStoreFile`: it
 * opens on read-only media and beside a running server), PostgreSQL read-only (postgres.ts `readOnly`: no DDL, no
 * write; a role that may only read is enough); writes through either reject with ReadOnlyStoreError. A
 * {@link StoreWrite} (`gc`): the sqlite file as the commands always opened it, not migrated, once this user may
 * write it (else an error saying why, and what to do instead); PostgreSQL as for a server. KurrentDB opens as for a
 * server either way. Nothing is created for a store that is not there.
 * @throws ConfigError as storeOf; Error naming the file and what named it when a sqlite store is missing, or why
 *   it cannot be written; Error saying that a PostgreSQL database without the tables holds no sessions (read); the
 *   store's error when it cannot be opened.
 */
export const openStoreOf = async (opts: StoreChoice, access: "read" | StoreWrite): Promise<OpenStore> => {
  const target = await storeOf(opts);
  const { config } = target;
  if (config.kind === "sqlite") {
    if (!existsSync(config.path))
      throw new Error(
        `no event store in ${target.where} (expected ${config.path}, from ${target.namedBy}); give the --data of a server, or its --config`,
      );
    const { createSqliteEventStore } = await import("../infra/event-store/sqlite.ts");
    if (access !== "read") checkWritableStore(config.path, access);
    // Reading does not migrate: a server of an earlier version may still be writing the file.
    let store: EventStore;
    try {
      store =
        access === "read"
          ? createSqliteEventStore({ path: config.path, readOnly: true })
          : createSqliteEventStore({ path: config.path, migrate: false });
    } catch (error) {
      throw access === "read" ? error : storeWriteError(error, config.path, access);
    }
    return { store, where: target.where, file: config.path, close: () => store.close() };
  }
  const { openEventStore } = await import("../infra/event-store/open.ts");
  const opened = await openEventStore(config, { readOnly: access === "read" });
  return {
    store: opened.store,
    where: target.where,
    file: null,
    close: async () => {
      await opened.store.close();
      opened.unlock();
    },
  };
};

/** The id of the session opened last in `store` (`--last`). @throws InvalidArgumentError when it holds none. */
export const lastSessionId = async (store: EventStore, where: string): Promise<string> => {
  const { STREAM_PREFIX } = await import("../engine/index.ts");
  const streams = await store.listStreams(STREAM_PREFIX);
  const last = streams.reduce<(typeof streams)[number] | undefined>(
    (a, b) => (a === undefined || b.firstAt >= a.firstAt ? b : a),
    undefined,
  );
  if (last === undefined) throw new InvalidArgumentError(`--last: no sessions in ${where}`);
  return last.stream.slice(STREAM_PREFIX.length);
};

/** A recorded session as a command reads it: its entries, the chain head a file's header records, and its name. */
export interface ReadSession {
  readonly entries: readonly RecordedEntry[];
  /** The stream the entries are of (`session-ID`). */
  readonly stream: string;
  readonly recordedHead: string | null;
  /** The file's path, or the session id in the store. */
  readonly name: string;
}

/**
 * Whether `show`'s positional names a session FILE rather than an id: a file that exists, or a name ending in
 * `.jsonl` (so that a missing one is said to be missing). Session ids hold neither a `/` nor `.jsonl`.
 */
export const isSessionFile = (positional: string): boolean =>
  positional.endsWith(".jsonl") || (existsSync(positional) && statSync(positional).isFile());

/**
 * Checks that `file` and `opts` name one session one way: a FILE, `--session ID` or `--last`, and a FILE without
 * `--data` or `--config` (it reads no store).
 * @throws InvalidArgumentError (exit 2) naming the combination given, or asking for one when none is.
 */
export const checkSessionChoice = (file: string | undefined, opts: SessionChoice): void => {
  const given = [
    ...(file === undefined ? [] : [`the session FILE ${file}`]),
    ...(opts.session === undefined ? [] : [`--session ${opts.session}`]),
    ...(opts.last ? ["--last"] : []),
  ];
  if (given.length === 0) throw new InvalidArgumentError("give a session FILE, --session ID or --last");
  if (given.length > 1)
    throw new InvalidArgumentError(`give one of a session FILE, --session ID or --last, not ${given.join(" and ")}`);
  const store = [
    ...(opts.data === undefined ? [] : [`--data ${opts.data}`]),
    ...(opts.config === undefined ? [] : [`--config ${opts.config}`]),
  ];
  if (file !== undefined && store.length > 0)
    throw new InvalidArgumentError(
      `${store.join(" and ")} name a store, and the session FILE ${file} is read alone: give the FILE, or the store with --session ID or --last`,
    );
};

/**
 * The session a command names ({@link checkSessionChoice}): a session FILE, or from the store of `opts` (read-only)
 * the session `--session ID` or the one opened last. Returns null after saying there is no such session (exit 2).
 * @throws InvalidArgumentError as checkSessionChoice, for a missing file, or `--last` in a store without sessions;
 *   Error when the file is not a session file or the store cannot be opened.
 */
export const readSession = async (file: string | undefined, opts: SessionChoice): Promise<ReadSession | null> => {
  checkSessionChoice(file, opts);
  if (file !== undefined) {
    if (!existsSync(file)) throw new InvalidArgumentError(`${file}: no such file`);
    const { readSessionFile } = await import("../infra/event-store/session-file.ts");
    const { entries, header } = await readSessionFile(file);
    return {
      entries,
      stream: entries[0]?.stream ?? header.stream,
      recordedHead: header.chain_head ?? null,
      name: file,
    };
  }
  const { streamOf } = await import("../engine/index.ts");
  const { store, where, close } = await openStoreOf(opts, "read");
  try {
    const session = opts.session ?? (await lastSessionId(store, where));
    const entries = await store.read(streamOf(session));
    if (entries.length === 0) {
      process.stderr.write(`duplex: no session ${session} in ${where}\n`);
      process.exitCode = 2;
      return null;
    }
    return { entries, stream: streamOf(session), recordedHead: null, name: session };
  } finally {
    await close();
  }
};
