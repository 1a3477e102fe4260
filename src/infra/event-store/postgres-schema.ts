/**
 * The PostgreSQL store's tables and rows (postgres.ts): the schema it creates (`duplex_entries`, `duplex_streams`,
 * `duplex_fences`, and postgres-summaries.ts' `duplex_summaries`), the advisory lock and NOTIFY channel its appends
 * use, the check a read-only store makes of the tables it reads, and an entry's row as `pg` returns it.
 */
import type pg from "pg";
import type { RecordedEntry } from "../../engine/ports/event-store.ts";
import { decodeData } from "./codec.ts";
import { SUMMARY_SCHEMA } from "./postgres-summaries.ts";

/** The advisory lock every append transaction takes (any 64-bit key no other code uses): one writer at a time. */
export const APPEND_LOCK = 0x6475706c6578n; // "duplex"
/** The NOTIFY channel of committed appends (a wake-up hint for other nodes' live subscriptions). */
export const CHANNEL = "duplex_entries";

/** The tables a read-only store reads (`duplex_summaries` for `listSummaries` only: older stores lack it). */
export const READ_TABLES = ["duplex_entries", "duplex_streams", "duplex_summaries"] as const;

/**
 * Checks that the database a read-only store opens holds the tables it reads, and that its role may read them.
 * Returns whether `duplex_summaries` is there. @throws Error saying that a database without `duplex_entries` or
 * `duplex_streams` holds no sessions, or which GRANT the role lacks; Error from `pg` when it cannot be reached.
 */
export const checkReadable = async (reads: pg.Pool, where: string): Promise<{ readonly summaries: boolean }> => {
  const { rows } = await reads.query<{ name: string; found: boolean; readable: boolean | null; role: string }>(
    `SELECT t.name, to_regclass(t.name) IS NOT NULL AS found,
       CASE WHEN to_regclass(t.name) IS NOT NULL THEN has_table_privilege(to_regclass(t.name), 'SELECT') END AS readable,
       current_user AS role
     FROM unnest($1::text[]) WITH ORDINALITY AS t(name, i) ORDER BY t.i`,
    [[...READ_TABLES]],
  );
  const missing = rows.find((r) => !r.found && r.name !== "duplex_summaries");
  if (missing !== undefined)
    throw new Error(
      `no event store in ${where}: the database has no table ${missing.name}, so it holds no sessions (a duplex server creates the tables when it first starts on a database: is this the one its config names?)`,
    );
  const unreadable = rows.filter((r) => r.found && r.readable !== true).map((r) => r.name);
  if (unreadable.length > 0)
    throw new Error(
      `the role ${rows[0]?.role} may not read ${unreadable.join(", ")} in ${where}: GRANT SELECT ON ${unreadable.join(", ")} TO ${rows[0]?.role} (as their owner)`,
    );
  return { summaries: rows.some((r) => r.name === "duplex_summaries" && r.found) };
};

/** The tables, created when missing (under the append lock: two nodes may start at once). */
export const SCHEMA = `
CREATE TABLE IF NOT EXISTS duplex_entries (
  position bigint PRIMARY KEY,
  stream text NOT NULL,
  revision integer NOT NULL,
  type text NOT NULL,
  data text NOT NULL,
  bin bytea,
  bin_codec text,
  metadata text NOT NULL,
  UNIQUE (stream, revision)
);
CREATE TABLE IF NOT EXISTS duplex_streams (
  stream text PRIMARY KEY,
  revision integer NOT NULL,
  first_position bigint NOT NULL,
  first_at double precision NOT NULL,
  last_at double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS duplex_streams_by_first_position ON duplex_streams (first_position);
CREATE TABLE IF NOT EXISTS duplex_fences (
  stream text PRIMARY KEY,
  holder text NOT NULL,
  expires_at timestamptz NOT NULL
);
${SUMMARY_SCHEMA}`;

/** An entry's row in `duplex_entries` as `pg` returns it: `position` (bigint) as text, `bin` (bytea) as bytes. */
export interface EntryRow {
  readonly position: string;
  readonly stream: string;
  readonly revision: number;
  readonly type: string;
  readonly data: string;
  readonly bin: Buffer | null;
  readonly metadata: string;
}

/** The entry a row holds, decoded (`data` from its JSON and `bin`, `metadata` parsed). */
export const toRecorded = (row: EntryRow): RecordedEntry => ({
  stream: row.stream,
  revision: row.revision,
  position: Number(row.position),
  type: row.type,
  data: decodeData({ json: row.data, blob: row.bin === null ? null : new Uint8Array(row.bin) }),
  metadata: JSON.parse(row.metadata),
});
