import { upcastEarlierReleases } from "./earlier-releases.ts";
import type { RecordedEntry } from "./ports/index.ts";

/**
 * Versions of the session log's schema (issue 20, part 5; docs/log-format.md, "Versions"). A log's version is the
 * `metadata.schema` of its first entry (`SessionOpened`); a log without one is version 1. Entries are read in
 * today's shape: each step from a version to the next is one pure function over the entries (an upcaster, as in
 * emmett and Marten), applied in order on read, never written back.
 *
 * - 1: the log before the hash chain. The releases that wrote it differ among themselves (fields added, decision
 *   rules and server bytes changed, none of it versioned): the step to 2 reads each release's log as that release
 *   decided and rendered it (src/engine/earlier-releases.ts; issue 33, part 1). A version 1 entry has no digest to
 *   verify, and none is made up for it.
 * - 2: every entry carries `metadata.chain` (src/engine/chain.ts), the first one `metadata.schema: 2`. Nothing else
 *   changed; every release that wrote it had the entries' shape of today. Decision rules changed since (issue 33,
 *   part 2: the utterance in progress at a move) are kept for the logs that show them, as for schema 1.
 *
 * A change of the log's shape raises the version and adds a frozen fixture of the version before it
 * (replays/frozen/schema-N/; test/e2e/frozen-logs.test.ts fails without one).
 */
export const LOG_SCHEMA_VERSION = 2;

/** One step of the log's schema: entries of version `from` in the shape of version `from + 1`. */
export interface Upcaster {
  readonly from: number;
  readonly upcast: (entries: readonly RecordedEntry[]) => RecordedEntry[];
}

/** The upcasters, one per version step, in order. */
export const UPCASTERS: readonly Upcaster[] = [{ from: 1, upcast: upcastEarlierReleases }];

/** Thrown for a log of a version this server does not know (written by a newer one). */
export class LogSchemaError extends Error {
  readonly code = "log_schema_unsupported";
  constructor(message: string) {
    super(message);
    this.name = "LogSchemaError";
  }
}

/** The schema version of a session's entries (1 when its first entry names none). */
export const schemaOf = (entries: readonly RecordedEntry[]): number => {
  const schema = entries[0]?.metadata.schema;
  return typeof schema === "number" ? schema : 1;
};

/**
 * A session's entries in today's shape: each upcaster from the log's version up to `LOG_SCHEMA_VERSION` applied in
 * turn. @throws LogSchemaError when the log is of a version newer than this server's, or one no upcaster leaves.
 */
export const upcast = (entries: readonly RecordedEntry[]): readonly RecordedEntry[] => {
  let version = schemaOf(entries);
  if (version > LOG_SCHEMA_VERSION)
    throw new LogSchemaError(
      `the log is of schema version ${version}, newer than this server's ${LOG_SCHEMA_VERSION}: read it with the version that wrote it`,
    );
  const written = version;
  let out = entries;
  while (version < LOG_SCHEMA_VERSION) {
    const step = UPCASTERS.find((u) => u.from === version);
    if (step === undefined) throw new LogSchemaError(`no upcaster from log schema version ${version}`);
    out = step.upcast(out);
    version += 1;
  }
  // A decision rule changed without a version step since the log's schema came in: a log that shows it was decided
  // under the old rule keeps it (src/engine/earlier-releases.ts, `sinceSchema`). Schema 1 had them all above.
  return written === 1 ? out : upcastEarlierReleases(out, written);
};
