import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { Command } from "commander";
import { sqlitePathIn } from "../infra/event-store/paths.ts";
import { checkWritableStore, type StoreWrite, storeWriteError } from "./session-source.ts";

/**
 * `duplex reindex` (issue 32): folds every session's summary (the rows `GET /v1/sessions` and `/sessions` read) again
 * from its log, in the store of `--data` or the `event_store` of `--config` (PostgreSQL, KurrentDB, or a sqlite
 * path). For a store some other program wrote to, or after a release that changed what a summary holds; a store
 * migrated on open (sqlite layout 2 to 3, PostgreSQL without the table) needs none. The sqlite file is locked as the
 * server locks it: reindexing a store a server has open is refused (stop it first); a file this user may not write
 * (read-only media, its mode) is refused before it is opened, saying why and to reindex a writable copy. Prints one
 * line: how many sessions it summarised, where, and in how long (ms). Exit 1 (with the error's one line) when the
 * store cannot be opened or written.
 */
export const registerReindexCommand = (program: Command): void => {
  program
    .command("reindex")
    .description(
      "fold every session's summary (what GET /v1/sessions and /sessions list) again from its log, in --data's store or --config's event_store",
    )
    .option("--data <dir>", "folder of the embedded event store", "./data")
    .option("--config <file>", "a deployment YAML: reindex its event_store (PostgreSQL, KurrentDB, sqlite)")
    .action(async (opts: { data: string; config?: string }) => {
      const { openEventStore } = await import("../infra/event-store/index.ts");
      let target: Parameters<typeof openEventStore>[0];
      if (opts.config !== undefined) {
        const { loadConfig } = await import("../infra/config.ts");
        target = (await loadConfig(opts.config)).event_store;
      } else {
        const path = sqlitePathIn(resolve(opts.data));
        if (!existsSync(path))
          throw new Error(`no event store in ${resolve(opts.data)} (expected ${path}); give the --data of a server`);
        target = { kind: "sqlite", path };
      }
      const write: StoreWrite = {
        doing: "reindex",
        instead:
          "reindex a writable copy of the store (the -wal with it, if there is one), or run it as the store's owner",
      };
      const file = target.kind === "sqlite" ? target.path : null;
      if (file !== null) checkWritableStore(file, write);
      const { store, where, unlock } = await openEventStore(target).catch((error: unknown) => {
        throw file === null ? error : storeWriteError(error, file, write);
      });
      try {
        const started = performance.now();
        const sessions = await store.rebuildSummaries().catch((error: unknown) => {
          throw file === null ? error : storeWriteError(error, file, write);
        });
        process.stdout.write(
          `reindexed ${sessions} stream(s) in ${where} (${Math.round(performance.now() - started)} ms)\n`,
        );
      } finally {
        await store.close();
        unlock();
      }
    });
};
