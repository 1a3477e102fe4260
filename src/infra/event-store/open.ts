import type { EventStore } from "../../engine/ports/event-store.ts";
import type { DeployConfig } from "../config.ts";
import { lockStore } from "./lock.ts";

/** An opened store and what releases it beyond `close` (the sqlite file's lock). */
export interface OpenedStore {
  readonly store: EventStore;
  /** Where the store is, for logs: the sqlite file, or the server's URL without its password. */
  readonly where: string;
  readonly unlock: () => void;
}

/** A URL with its password replaced by `***`, for logs. */
export const redactUrl = (url: string): string => {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    return url.replace(/:[^:@/]*@/, ":***@");
  }
};

/**
 * Opens the configured event store (`event_store` of the config): the embedded sqlite file, locked to this process
 * (lock.ts: one server per file); PostgreSQL (postgres.ts), shared by nodes; KurrentDB (kurrentdb.ts). A store's
 * driver is loaded only when it is configured. With `options.readOnly` (the commands that only read), a sqlite file
 * is opened read-only and not locked (sqlite.ts `openReadOnlyStoreFile`: nothing is created beside it, a server may
 * be writing it meanwhile), and must exist; PostgreSQL is opened read-only too (postgres.ts `readOnly`: no DDL, no
 * write, so a role that may only read, or a hot standby, is enough), and must hold the tables; KurrentDB opens as for
 * a server (it creates nothing on open).
 * @throws StoreInUseError when another process holds the sqlite file (not with `readOnly`); Error when a read-only
 *   sqlite file is missing or unreadable (openReadOnlyStoreFile), or a read-only PostgreSQL database lacks the
 *   tables (it holds no sessions) or its role may not read them; the driver's error when a server cannot be reached.
 */
export const openEventStore = async (
  config: DeployConfig["event_store"],
  options: {
    /** Each group commit of a shared store: appends and entries it held, its transaction's time (ms). */
    readonly groupCommitted?: (appends: number, entries: number, ms: number) => void;
    /** Read only: no lock, no writer, nothing created or written, every write refused (default false). */
    readonly readOnly?: boolean;
  } = {},
): Promise<OpenedStore> => {
  switch (config.kind) {
    case "sqlite": {
      const { createSqliteEventStore } = await import("./sqlite.ts");
      const memory = config.path === ":memory:" || config.path === "";
      if (options.readOnly === true)
        return {
          store: createSqliteEventStore({ path: config.path, readOnly: true }),
          where: config.path,
          unlock: () => undefined,
        };
      const unlock = memory ? () => undefined : lockStore(config.path);
      try {
        return { store: createSqliteEventStore({ path: config.path }), where: config.path, unlock };
      } catch (error) {
        unlock();
        throw error;
      }
    }
    case "postgres": {
      const { createPostgresEventStore } = await import("./postgres.ts");
      const store = await createPostgresEventStore({
        url: config.url,
        pollMs: config.poll_ms,
        ...(options.readOnly === true ? { readOnly: true } : {}),
        ...(options.groupCommitted === undefined ? {} : { onGroupCommit: options.groupCommitted }),
      });
      return { store, where: redactUrl(config.url), unlock: () => undefined };
    }
    case "kurrentdb": {
      const { createKurrentDbEventStore } = await import("./kurrentdb.ts");
      const store = await createKurrentDbEventStore({ url: config.url });
      return { store, where: redactUrl(config.url), unlock: () => undefined };
    }
    default:
      throw new Error(`unknown event_store kind ${(config as { kind: string }).kind}`);
  }
};
