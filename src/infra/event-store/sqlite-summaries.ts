import type Database from "better-sqlite3";
import type { StreamSummary, SummaryPage, SummaryQuery } from "../../engine/ports/event-store.ts";
import {
  foldSessionSummary,
  initialSessionSummary,
  reduceSessionSummary,
  type SessionSummaryState,
  SUMMARY_DATA_TYPES,
  type SummaryEntry,
  summaryReadsTime,
  summaryRowOf,
} from "../../projections/session-summary.ts";
import type { EncodedEntry } from "./codec.ts";
import { textCodecs } from "./sqlite-codecs.ts";
import { unpackText } from "./text-packing.ts";

/**
 * The summaries of the sqlite store file (layout 3, issue 32): one row per stream in table `summaries`, the
 * `sessionSummary` fold of its entries (src/projections/session-summary.ts), kept by the writer in the transaction
 * of every append, so a session list reads rows instead of logs.
 *
 * Columns: `stream_id` (its row in `streams`), `stream` (its name: the list's order and prefix), `first_at` (ms, the
 * first entry's `metadata.at`), `state`, `model` and `error_codes` (a JSON array) of the summary's row, for the
 * filters, and `fold`, the fold's state as JSON, which the next append goes on from. Index (first_at, stream): a page
 * in order is read along it, up to its LIMIT.
 */
export const SUMMARY_SCHEMA = `
CREATE TABLE IF NOT EXISTS summaries (
  stream_id INTEGER PRIMARY KEY,
  stream TEXT NOT NULL,
  first_at REAL NOT NULL,
  state TEXT NOT NULL,
  model TEXT,
  error_codes TEXT NOT NULL,
  fold TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS summaries_by_first_at ON summaries (first_at, stream);
`;

/**
 * An entry's data as the fold reads it: the JSON parsed for the types it reads (`SUMMARY_DATA_TYPES`), else null.
 * Binary references and escaped `$` keys are left as stored: the fold reads none of them (ids, models, codes).
 */
const dataOf = (type: string, json: string): unknown => (SUMMARY_DATA_TYPES.has(type) ? JSON.parse(json) : null);

/** An entry appended now, as the fold reads it. */
export const summaryEntryOf = (entry: EncodedEntry, revision: number): SummaryEntry => ({
  type: entry.type,
  revision,
  metadata: { at: entry.at },
  data: dataOf(entry.type, entry.json),
});

/** A stored entry's columns the fold may read: stream_id, revision, type, data, metadata, text_codec. */
type StoredRow = readonly [number, number, string, string | Uint8Array, string, number | null];

/**
 * A stored entry as the fold reads it, given the type of the entry after it (null: the last): its texts unpacked
 * (text-packing.ts), never its blob; left packed (time NaN, data null) where the fold reads neither
 * (`summaryReadsTime`, `SUMMARY_DATA_TYPES`): most of a log, its audio.
 */
const storedEntryOf = (row: StoredRow, nextType: string | null): SummaryEntry => {
  const [, revision, type, data, metadata, codec] = row;
  if (!SUMMARY_DATA_TYPES.has(type) && !summaryReadsTime(revision, type, nextType))
    return { type, revision, metadata: { at: Number.NaN }, data: null };
  const text = unpackText(data, metadata, textCodecs.name(codec));
  return {
    type,
    revision,
    metadata: { at: (JSON.parse(text.metadata) as { at: number }).at },
    data: dataOf(type, text.json),
  };
};

/**
 * The summaries of the streams of `rows` (in position order: each stream's entries by revision, streams
 * interleaved), one pass; each entry is folded once the next one of its stream (or the end) says whether its time
 * counts.
 */
const foldRows = (rows: Iterable<StoredRow>): Map<number, SessionSummaryState> => {
  const folds = new Map<number, SessionSummaryState>();
  const waiting = new Map<number, StoredRow>();
  const fold = (row: StoredRow, nextType: string | null): void => {
    folds.set(row[0], reduceSessionSummary(folds.get(row[0]) ?? initialSessionSummary, storedEntryOf(row, nextType)));
  };
  for (const row of rows) {
    const before = waiting.get(row[0]);
    if (before !== undefined) fold(before, row[2]);
    waiting.set(row[0], row);
  }
  for (const row of waiting.values()) fold(row, null);
  return folds;
};

/** Streams whose last fold a writer keeps in memory (about 0.5 kB each). */
const CACHED_FOLDS = 4096;

/** The writer's side: summaries moved on in the caller's transaction. */
export interface SummaryWriter {
  /**
   * Moves the summary of stream `id` (named `stream`) on by `entries`, just inserted as revisions `first`, `first +
   * 1`, ...; a summary that is missing or does not end at `first - 1` is folded again from the stored log instead.
   * @throws SyntaxError when a stored entry's texts are not JSON; errors of the driver.
   */
  advance(id: number, stream: string, first: number, entries: readonly EncodedEntry[]): void;
  /** Drops the summary of stream `id`. */
  remove(id: number): void;
  /** Forgets the folds kept in memory: after a transaction rolled back, what they say was not stored. */
  forget(): void;
  /**
   * Every summary folded again from the stored entries, in one pass over them (by stream, by revision): the table
   * emptied and filled anew. Returns how many streams it summarised. Call it inside a transaction.
   */
  rebuild(): number;
}

/** The summaries' writer over `db` (of layout 3: the table exists). */
export function createSummaryWriter(db: Database.Database): SummaryWriter {
  const selectFold = db.prepare<[number], { fold: string }>("SELECT fold FROM summaries WHERE stream_id = ?");
  const upsert = db.prepare<[number, string, number, string, string | null, string, string]>(
    `INSERT INTO summaries (stream_id, stream, first_at, state, model, error_codes, fold) VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (stream_id) DO UPDATE SET first_at = excluded.first_at, state = excluded.state,
       model = excluded.model, error_codes = excluded.error_codes, fold = excluded.fold`,
  );
  // Raw rows (arrays): a store's every entry goes through `rebuild`, and objects cost a third of its time. Position
  // order is the table's: one sequential scan.
  const COLUMNS = "stream_id, revision, type, data, metadata, text_codec";
  const selectStreamRows = db
    .prepare<[number], StoredRow>(`SELECT ${COLUMNS} FROM entries WHERE stream_id = ? ORDER BY revision`)
    .raw(true);
  const selectAllRows = db.prepare<[], StoredRow>(`SELECT ${COLUMNS} FROM entries ORDER BY position`).raw(true);
  const selectStreams = db.prepare<[], { id: number; stream: string }>("SELECT id, stream FROM streams");
  const deleteOne = db.prepare<[number]>("DELETE FROM summaries WHERE stream_id = ?");
  const deleteAll = db.prepare("DELETE FROM summaries");

  /**
   * The folds this writer wrote last, by stream id, so an append need not read and parse its stream's row. Only
   * trusted when it ends right before the entries appended (another process's append leaves it behind: the row is
   * read then); forgotten when a transaction rolls back (`forget`), and past `CACHED_FOLDS` streams.
   */
  const cache = new Map<number, SessionSummaryState>();
  const write = (id: number, stream: string, state: SessionSummaryState): void => {
    const row = summaryRowOf(state);
    upsert.run(id, stream, state.firstAt, row.state, row.model, JSON.stringify(row.error_codes), JSON.stringify(state));
    if (cache.size >= CACHED_FOLDS && !cache.has(id)) cache.clear();
    cache.set(id, state);
  };

  const storedFold = (id: number, first: number): SessionSummaryState | null => {
    const cached = cache.get(id);
    if (cached !== undefined && cached.revision === first - 1) return cached;
    const stored = selectFold.get(id);
    return stored === undefined ? null : (JSON.parse(stored.fold) as SessionSummaryState);
  };

  const advance = (id: number, stream: string, first: number, entries: readonly EncodedEntry[]): void => {
    const before = storedFold(id, first);
    const state =
      before !== null && before.revision === first - 1
        ? foldSessionSummary(
            entries.map((entry, i) => summaryEntryOf(entry, first + i)),
            before,
          )
        : (foldRows(selectStreamRows.all(id)).get(id) ?? initialSessionSummary);
    write(id, stream, state);
  };

  const rebuild = (): number => {
    const names = new Map(selectStreams.all().map((s) => [s.id, s.stream]));
    // Folded in one pass, written after it (a connection that iterates runs no other statement).
    const folds = foldRows(selectAllRows.iterate());
    deleteAll.run();
    cache.clear();
    let written = 0;
    for (const [id, state] of folds) {
      const name = names.get(id);
      if (name === undefined) continue;
      write(id, name, state);
      written += 1;
    }
    return written;
  };

  const remove = (id: number): void => {
    cache.delete(id);
    deleteOne.run(id);
  };

  return { advance, remove, rebuild, forget: () => cache.clear() };
}

interface SummaryRow {
  readonly stream: string;
  readonly first_at: number;
  readonly fold: string;
}

/**
 * The SQL and parameters of one `listSummaries` query: WHERE with the filters given, ORDER BY (first_at, stream)
 * along the index, LIMIT `limit + 1` (the row past the page says whether there is more).
 */
const querySql = (query: SummaryQuery): { sql: string; params: Record<string, string | number> } => {
  const where = ["substr(stream, 1, length(@prefix)) = @prefix"];
  const params: Record<string, string | number> = { prefix: query.prefix, limit: query.limit + 1 };
  if (query.state !== undefined) {
    where.push("(state = @state OR substr(state, 1, length(@state) + 1) = @state || ' ')");
    params.state = query.state;
  }
  if (query.model !== undefined) {
    where.push("model = @model");
    params.model = query.model;
  }
  if (query.error !== undefined) {
    where.push("EXISTS (SELECT 1 FROM json_each(summaries.error_codes) WHERE json_each.value = @error)");
    params.error = query.error;
  }
  if (query.since !== undefined) {
    where.push("first_at >= @since");
    params.since = query.since;
  }
  if (query.until !== undefined) {
    where.push("first_at <= @until");
    params.until = query.until;
  }
  const desc = query.order === "desc";
  if (query.after !== undefined) {
    const beyond = desc ? "<" : ">";
    where.push(`(first_at ${beyond} @afterAt OR (first_at = @afterAt AND stream ${beyond} @afterStream))`);
    params.afterAt = query.after.firstAt;
    params.afterStream = query.after.stream;
  }
  const direction = desc ? "DESC" : "ASC";
  return {
    sql: `SELECT stream, first_at, fold FROM summaries WHERE ${where.join(" AND ")}
      ORDER BY first_at ${direction}, stream ${direction} LIMIT @limit`,
    params,
  };
};

/**
 * `listSummaries` over `db` (layout 3). Statements are prepared once per shape of query (which filters are given).
 * @throws RangeError when `limit` is below 1; errors of the driver.
 */
export function createSummaryReader(db: Database.Database): (query: SummaryQuery) => SummaryPage {
  const statements = new Map<string, Database.Statement<[Record<string, string | number>], SummaryRow>>();
  return (query) => {
    if (!(query.limit >= 1)) throw new RangeError(`listSummaries: limit must be at least 1, got ${query.limit}`);
    const { sql, params } = querySql(query);
    let statement = statements.get(sql);
    if (statement === undefined) {
      statement = db.prepare<[Record<string, string | number>], SummaryRow>(sql);
      statements.set(sql, statement);
    }
    const rows = statement.all(params);
    const summaries: StreamSummary[] = rows.slice(0, query.limit).map((row) => ({
      stream: row.stream,
      firstAt: row.first_at,
      summary: summaryRowOf(JSON.parse(row.fold) as SessionSummaryState),
    }));
    return { summaries, hasMore: rows.length > query.limit };
  };
}
