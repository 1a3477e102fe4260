/**
 * The PostgreSQL store's group commit (postgres.ts): one group of appends, from any stream, in one transaction under
 * the append lock, each append checked against its stream's head (and its fence) and refused or stored alone; a
 * mismatched append that repeats one already stored is recognised as a retry. Writes the entries, the streams' rows
 * and their summaries (postgres-summaries.ts), lifts this instance's fences on the streams it appended to, and
 * NOTIFYs the other nodes.
 */
import type pg from "pg";
import type { ExpectedRevision } from "../../engine/ports/event-store.ts";
import { foldSessionSummary, type SessionSummaryState } from "../../projections/session-summary.ts";
import type { EncodedEntry } from "./codec.ts";
import { APPEND_LOCK, CHANNEL, type EntryRow } from "./postgres-schema.ts";
import { foldStored, parseFold, summaryColumns, summaryEntryOf, upsertSummaries } from "./postgres-summaries.ts";

/**
 * Rows per INSERT statement: 7 parameters each, under PostgreSQL's 65 535 parameters with the streams' five arrays
 * and the summaries' seven.
 */
export const ROWS_PER_INSERT = 4096;

/** One append waiting for the next group commit. */
export interface Pending {
  readonly stream: string;
  readonly expected: ExpectedRevision;
  readonly entries: readonly EncodedEntry[];
  readonly resolve: (outcome: Outcome) => void;
  readonly reject: (error: Error) => void;
}

export type Outcome =
  | { readonly ok: true; readonly revision: number; readonly rows: readonly EntryRow[]; readonly retry: boolean }
  | { readonly ok: false; readonly actual: number | "no_stream"; readonly fenced?: true };

const sameEntry = (row: EntryRow, entry: EncodedEntry): boolean =>
  row.type === entry.type &&
  row.data === entry.json &&
  row.metadata === entry.metadata &&
  (row.bin === null ? entry.blob === null : entry.blob !== null && row.bin.equals(entry.blob));

/**
 * One group's transaction, in three round trips: BEGIN, the lock, the streams' heads and the last position; the
 * entries and the streams' rows in one statement (per 4096 entries); NOTIFY and COMMIT.
 */
export const commitGroupOn = async (
  writer: pg.Client,
  group: readonly Pending[],
  instance: string,
): Promise<Outcome[]> => {
  // BEGIN, the lock, and the heads in one round trip: the simple query protocol takes several statements, with the
  // stream names as escaped literals (it takes no parameters).
  const streams = [...new Set(group.map((p) => p.stream))];
  const names = streams.map((name) => writer.escapeLiteral(name)).join(", ");
  const opened = (await writer.query(
    `BEGIN; SELECT pg_advisory_xact_lock(${APPEND_LOCK.toString()});
     SELECT s.stream, s.revision FROM duplex_streams s WHERE s.stream IN (${names});
     SELECT coalesce(max(position), 0)::text AS top FROM duplex_entries;
     SELECT m.stream, m.fold FROM duplex_summaries m WHERE m.stream IN (${names});
     SELECT f.stream, f.holder = ${writer.escapeLiteral(instance)} AS mine FROM duplex_fences f
       WHERE f.stream IN (${names}) AND f.expires_at > now()`,
  )) as unknown as pg.QueryResult[];
  try {
    const plan = await planGroup(writer, group, opened);
    await writeRows(writer, plan);
    if (plan.lifted.size > 0)
      await writer.query("DELETE FROM duplex_fences WHERE holder = $1 AND stream = ANY($2::text[])", [
        instance,
        [...plan.lifted],
      ]);
    await writer.query(plan.rows.length > 0 ? `NOTIFY ${CHANNEL}; COMMIT` : "COMMIT");
    return [...plan.outcomes];
  } catch (error) {
    await writer.query("ROLLBACK").catch(() => undefined);
    throw error;
  }
};

/** What one group writes: its rows, the streams' new heads, first and last `metadata.at`, summaries and fences. */
interface GroupWrite {
  /** Per append of the group, in its order. */
  readonly outcomes: readonly Outcome[];
  /** The rows of every append stored, in position order. */
  readonly rows: readonly EntryRow[];
  /** Each stream's last revision after the group. */
  readonly heads: ReadonlyMap<string, number>;
  /** Streams created by the group: their first entry's position and `metadata.at` (ms). */
  readonly firstAt: ReadonlyMap<string, { readonly position: number; readonly at: number }>;
  /** Each stream appended to: its last entry's `metadata.at` (ms). */
  readonly lastAt: ReadonlyMap<string, number>;
  /** The summaries this group moved on, written with its entries. */
  readonly moved: ReadonlyMap<string, SessionSummaryState>;
  /** Streams this instance had fenced and now appended to: their fences are lifted. */
  readonly lifted: ReadonlySet<string>;
}

/**
 * Checks each append of `group` against the heads, fences and summaries the transaction read (`opened`: the results
 * of its first round trip) and gives the rows of those that go through, with positions after the last one stored.
 */
const planGroup = async (
  writer: pg.Client,
  group: readonly Pending[],
  opened: readonly pg.QueryResult[],
): Promise<GroupWrite> => {
  const heads = new Map<string, number>();
  for (const r of opened[2]?.rows ?? []) heads.set(String(r.stream), Number(r.revision));
  /** Streams fenced for a takeover: by this instance (true; its append lifts it) or by another (false). */
  const fences = new Map<string, boolean>();
  for (const r of opened[5]?.rows ?? []) fences.set(String(r.stream), r.mine === true);
  const lifted = new Set<string>();
  /** The summaries as they stand before each append of the group (null: none stored). */
  const folds = new Map<string, SessionSummaryState | null>();
  for (const r of opened[4]?.rows ?? []) folds.set(String(r.stream), parseFold(r.fold as string));
  const moved = new Map<string, SessionSummaryState>();
  let position = Number(opened[3]?.rows[0]?.top ?? 0);
  const outcomes: Outcome[] = [];
  const rows: EntryRow[] = [];
  const firstAt = new Map<string, { position: number; at: number }>();
  const lastAt = new Map<string, number>();
  for (const p of group) {
    const head = heads.get(p.stream);
    const actual = head === undefined ? "no_stream" : head;
    if (p.expected !== "any" && p.expected !== actual) {
      outcomes.push(await retryOutcome(writer, p, actual));
      continue;
    }
    // Another node fences the stream for its takeover: this node's session there is no longer its own.
    const fence = fences.get(p.stream);
    if (fence === false) {
      outcomes.push({ ok: false, actual, fenced: true });
      continue;
    }
    if (fence === true && p.entries.length > 0) lifted.add(p.stream);
    let revision = head ?? -1;
    const mine: EntryRow[] = [];
    for (const entry of p.entries) {
      revision += 1;
      position += 1;
      const row: EntryRow = {
        position: String(position),
        stream: p.stream,
        revision,
        type: entry.type,
        data: entry.json,
        bin: entry.blob === null ? null : Buffer.from(entry.blob.buffer, entry.blob.byteOffset, entry.blob.byteLength),
        metadata: entry.metadata,
      };
      mine.push(row);
      if (revision === 0) firstAt.set(p.stream, { position, at: entry.at });
      lastAt.set(p.stream, entry.at);
    }
    if (mine.length > 0) {
      // A summary behind the stream (none yet, or a node of an earlier version appended) is folded on from the
      // stored log first; then the new entries.
      const head = heads.get(p.stream) ?? -1;
      const known = folds.get(p.stream) ?? null;
      const before = known?.revision === head ? known : await foldStored(writer, p.stream, known, head);
      const after = foldSessionSummary(
        p.entries.map((entry, i) => summaryEntryOf(entry, head + 1 + i)),
        before,
      );
      folds.set(p.stream, after);
      moved.set(p.stream, after);
      heads.set(p.stream, revision);
    }
    rows.push(...mine);
    outcomes.push({ ok: true, revision, rows: mine, retry: false });
  }
  return { outcomes, rows, heads, firstAt, lastAt, moved, lifted };
};

/**
 * Inserts the rows, 4096 per statement; with the last ones, the streams' rows and their summaries in the same
 * statement (a data-modifying WITH).
 */
const writeRows = async (writer: pg.Client, plan: GroupWrite): Promise<void> => {
  const { rows, heads, firstAt, lastAt, moved } = plan;
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
    const chunk = rows.slice(i, i + ROWS_PER_INSERT);
    const last = i + ROWS_PER_INSERT >= rows.length;
    const values: unknown[] = [];
    const tuples = chunk.map((r, k) => {
      values.push(r.position, r.stream, r.revision, r.type, r.data, r.bin, r.metadata);
      const b = k * 7;
      return `($${b + 1}::bigint, $${b + 2}, $${b + 3}::integer, $${b + 4}, $${b + 5}, $${b + 6}::bytea, $${b + 7})`;
    });
    const insert = `INSERT INTO duplex_entries (position, stream, revision, type, data, bin, metadata) VALUES ${tuples.join(", ")}`;
    if (!last) {
      await writer.query(insert, values);
      continue;
    }
    // With the last entries, the streams' rows and their summaries: one statement (a data-modifying WITH).
    const touched = [...lastAt.keys()];
    const n = values.length;
    values.push(
      touched,
      touched.map((t) => heads.get(t)),
      touched.map((t) => firstAt.get(t)?.position ?? 0),
      touched.map((t) => firstAt.get(t)?.at ?? lastAt.get(t)),
      touched.map((t) => lastAt.get(t)),
      ...summaryColumns(moved),
    );
    await writer.query(
      `WITH entries AS (${insert}),
       heads AS (INSERT INTO duplex_streams (stream, revision, first_position, first_at, last_at)
         SELECT * FROM unnest($${n + 1}::text[], $${n + 2}::integer[], $${n + 3}::bigint[], $${n + 4}::double precision[], $${n + 5}::double precision[])
         ON CONFLICT (stream) DO UPDATE SET revision = EXCLUDED.revision, last_at = EXCLUDED.last_at)
       ${upsertSummaries(n + 5)}`,
      values,
    );
  }
};

/** A mismatched append: a retry of one already stored (the same entries right after `expected`), or a conflict. */
const retryOutcome = async (writer: pg.Client, p: Pending, actual: number | "no_stream"): Promise<Outcome> => {
  if (p.expected === "any" || p.entries.length === 0 || actual === "no_stream") return { ok: false, actual };
  const first = p.expected === "no_stream" ? 0 : p.expected + 1;
  const last = first + p.entries.length - 1;
  if (actual < last) return { ok: false, actual };
  const stored = await writer.query<EntryRow>(
    "SELECT position::text AS position, stream, revision, type, data, bin, metadata FROM duplex_entries WHERE stream = $1 AND revision BETWEEN $2 AND $3 ORDER BY revision",
    [p.stream, first, last],
  );
  const same =
    stored.rows.length === p.entries.length &&
    stored.rows.every((row, i) => sameEntry(row, p.entries[i] as EncodedEntry));
  return same ? { ok: true, revision: last, rows: [], retry: true } : { ok: false, actual };
};
