import type pg from "pg";
import type { StreamSummary, SummaryPage, SummaryQuery } from "../../engine/ports/event-store.ts";
import {
  foldSessionSummary,
  initialSessionSummary,
  reduceSessionSummary,
  type SessionSummaryState,
  SUMMARY_DATA_TYPES,
  type SummaryEntry,
  summaryRowOf,
} from "../../projections/session-summary.ts";
import type { EncodedEntry } from "./codec.ts";

/**
 * The summaries of the PostgreSQL store (issue 32): table `duplex_summaries`, one row per stream, the
 * `sessionSummary` fold of its entries (src/projections/session-summary.ts), written in the transaction of each
 * group commit, under the append lock. Columns: `first_at` (ms) and `stream` (the order, index in "C" collation: code
 * points), `revision` (the stream's last revision it folded: a row behind its stream's is folded on from the log),
 * `state`, `model` and `error_codes` (jsonb array) for the filters, `fold` (the fold's state, JSON text).
 */
export const SUMMARY_SCHEMA = `
CREATE TABLE IF NOT EXISTS duplex_summaries (
  stream text PRIMARY KEY,
  first_at double precision NOT NULL,
  revision integer NOT NULL,
  state text NOT NULL,
  model text,
  error_codes jsonb NOT NULL,
  fold text NOT NULL
);
CREATE INDEX IF NOT EXISTS duplex_summaries_by_first_at ON duplex_summaries (first_at, stream COLLATE "C");
`;

/** An entry's data as the fold reads it: JSON parsed for the types it reads, else null (see sqlite-summaries.ts). */
const dataOf = (type: string, json: string | null): unknown =>
  json !== null && SUMMARY_DATA_TYPES.has(type) ? JSON.parse(json) : null;

/** An entry appended now, as the fold reads it. */
export const summaryEntryOf = (entry: EncodedEntry, revision: number): SummaryEntry => ({
  type: entry.type,
  revision,
  metadata: { at: entry.at },
  data: dataOf(entry.type, entry.json),
});

/** A stored fold, or null for a missing row. @throws SyntaxError for a row that is not JSON. */
export const parseFold = (fold: string | null | undefined): SessionSummaryState | null =>
  fold === null || fold === undefined ? null : (JSON.parse(fold) as SessionSummaryState);

/**
 * The fold of `stream` up to its stored head `head`, going on from `before` when it ends at or below it (reading
 * only the entries after it), from the start otherwise. On `client`, inside the caller's transaction. The data column
 * is sent only for the types the fold reads.
 */
export const foldStored = async (
  client: pg.ClientBase,
  stream: string,
  before: SessionSummaryState | null,
  head: number,
): Promise<SessionSummaryState> => {
  const from = before !== null && before.revision <= head ? before : initialSessionSummary;
  if (from.revision === head) return from;
  const { rows } = await client.query<{ revision: number; type: string; data: string | null; metadata: string }>(
    `SELECT revision, type, CASE WHEN type = ANY($3::text[]) THEN data END AS data, metadata
     FROM duplex_entries WHERE stream = $1 AND revision > $2 ORDER BY revision`,
    [stream, from.revision, [...SUMMARY_DATA_TYPES]],
  );
  return foldSessionSummary(
    rows.map((row) => ({
      type: row.type,
      revision: row.revision,
      metadata: { at: (JSON.parse(row.metadata) as { at: number }).at },
      data: dataOf(row.type, row.data),
    })),
    from,
  );
};

/** The columns of a summary's row, as parallel arrays for `unnest` (see `UPSERT_SUMMARIES`). */
export const summaryColumns = (folds: ReadonlyMap<string, SessionSummaryState>): unknown[] => {
  const names = [...folds.keys()];
  const states = [...folds.values()];
  const rows = states.map(summaryRowOf);
  return [
    names,
    states.map((s) => s.firstAt),
    states.map((s) => s.revision),
    rows.map((r) => r.state),
    rows.map((r) => r.model),
    rows.map((r) => JSON.stringify(r.error_codes)),
    states.map((s) => JSON.stringify(s)),
  ];
};

/**
 * Upserts summaries from the seven arrays of `summaryColumns`, at parameter `$n + 1` on: a SELECT over `unnest`,
 * for an INSERT (plain, or as the main statement of a data-modifying WITH).
 */
export const upsertSummaries = (n: number): string =>
  `INSERT INTO duplex_summaries (stream, first_at, revision, state, model, error_codes, fold)
   SELECT u.stream, u.first_at, u.revision, u.state, u.model, u.error_codes::jsonb, u.fold
   FROM unnest($${n + 1}::text[], $${n + 2}::double precision[], $${n + 3}::integer[], $${n + 4}::text[],
     $${n + 5}::text[], $${n + 6}::text[], $${n + 7}::text[]) AS u(stream, first_at, revision, state, model, error_codes, fold)
   ON CONFLICT (stream) DO UPDATE SET first_at = EXCLUDED.first_at, revision = EXCLUDED.revision,
     state = EXCLUDED.state, model = EXCLUDED.model, error_codes = EXCLUDED.error_codes, fold = EXCLUDED.fold`;

/** The SQL and values of one `listSummaries` query: WHERE the filters given, ORDER BY the index, LIMIT limit + 1. */
export const summaryQuerySql = (query: SummaryQuery): { text: string; values: unknown[] } => {
  const values: unknown[] = [query.prefix];
  const where = ["left(stream, length($1)) = $1"];
  const param = (value: unknown): string => {
    values.push(value);
    return `$${values.length}`;
  };
  if (query.state !== undefined) {
    const p = param(query.state);
    where.push(`(state = ${p} OR left(state, length(${p}) + 1) = ${p} || ' ')`);
  }
  if (query.model !== undefined) where.push(`model = ${param(query.model)}`);
  if (query.error !== undefined) where.push(`error_codes @> jsonb_build_array(${param(query.error)}::text)`);
  if (query.since !== undefined) where.push(`first_at >= ${param(query.since)}::double precision`);
  if (query.until !== undefined) where.push(`first_at <= ${param(query.until)}::double precision`);
  const desc = query.order === "desc";
  if (query.after !== undefined) {
    const beyond = desc ? "<" : ">";
    const at = param(query.after.firstAt);
    const name = param(query.after.stream);
    where.push(
      `(first_at ${beyond} ${at}::double precision OR (first_at = ${at}::double precision AND stream COLLATE "C" ${beyond} ${name}))`,
    );
  }
  const direction = desc ? "DESC" : "ASC";
  const limit = param(query.limit + 1);
  return {
    text: `SELECT stream, first_at, fold FROM duplex_summaries WHERE ${where.join(" AND ")}
      ORDER BY first_at ${direction}, stream COLLATE "C" ${direction} LIMIT ${limit}`,
    values,
  };
};

/** A page from the rows of `summaryQuerySql` (one more than `limit` when there is more). */
export const summaryPageOf = (
  rows: readonly { stream: string; first_at: number; fold: string }[],
  limit: number,
): SummaryPage => {
  const summaries: StreamSummary[] = rows.slice(0, limit).map((row) => ({
    stream: row.stream,
    firstAt: Number(row.first_at),
    summary: summaryRowOf(JSON.parse(row.fold) as SessionSummaryState),
  }));
  return { summaries, hasMore: rows.length > limit };
};

/** Streams summarised per transaction by `refreshSummaries`. */
const REFRESH_BATCH = 50;

/**
 * Folds the summaries of the streams that lack one or whose row is behind the stream (`all`: of every stream) from
 * their logs, from their first entry, `REFRESH_BATCH` streams per transaction under `lock` (so the appends of other
 * nodes go on between them), and drops the rows of streams that no longer exist. Returns how many streams it
 * summarised. @throws Error from `pg`.
 */
export const refreshSummaries = async (
  pool: pg.Pool,
  lock: (client: pg.ClientBase) => Promise<void>,
  all: boolean,
): Promise<number> => {
  const { rows: stale } = await pool.query<{ stream: string }>(
    all
      ? "SELECT stream FROM duplex_streams"
      : `SELECT s.stream FROM duplex_streams s LEFT JOIN duplex_summaries m ON m.stream = s.stream
         WHERE m.stream IS NULL OR m.revision <> s.revision`,
  );
  let done = 0;
  const client = await pool.connect();
  try {
    for (let i = 0; i < stale.length; i += REFRESH_BATCH) {
      const names = stale.slice(i, i + REFRESH_BATCH).map((r) => r.stream);
      await client.query("BEGIN");
      try {
        await lock(client);
        // Under the lock: every entry of these streams is committed, and none is added until COMMIT.
        const { rows } = await client.query<{
          stream: string;
          revision: number;
          type: string;
          data: string | null;
          metadata: string;
        }>(
          `SELECT stream, revision, type, CASE WHEN type = ANY($2::text[]) THEN data END AS data, metadata
           FROM duplex_entries WHERE stream = ANY($1::text[]) ORDER BY stream, revision`,
          [names, [...SUMMARY_DATA_TYPES]],
        );
        const folds = new Map<string, SessionSummaryState>();
        for (const row of rows) {
          const entry: SummaryEntry = {
            type: row.type,
            revision: row.revision,
            metadata: { at: (JSON.parse(row.metadata) as { at: number }).at },
            data: dataOf(row.type, row.data),
          };
          folds.set(row.stream, reduceSessionSummary(folds.get(row.stream) ?? initialSessionSummary, entry));
        }
        if (folds.size > 0) await client.query(upsertSummaries(0), summaryColumns(folds));
        await client.query("COMMIT");
        done += folds.size;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      }
    }
    await client.query(
      "DELETE FROM duplex_summaries m WHERE NOT EXISTS (SELECT 1 FROM duplex_streams s WHERE s.stream = m.stream)",
    );
  } finally {
    client.release();
  }
  return done;
};
