import type { StreamSummary, SummaryPage, SummaryQuery } from "../../engine/ports/event-store.ts";

/** Stream names in code-point order (as SQLite's BINARY collation and PostgreSQL's "C" order UTF-8). */
const compareNames = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** Whether `summary` passes the filters of `query` (prefix, state's first word, model, error code, times). */
export const passesSummaryQuery = (row: StreamSummary, query: SummaryQuery): boolean =>
  row.stream.startsWith(query.prefix) &&
  (query.state === undefined || row.summary.state.split(" ")[0] === query.state) &&
  (query.model === undefined || row.summary.model === query.model) &&
  (query.error === undefined || row.summary.error_codes.includes(query.error)) &&
  (query.since === undefined || row.firstAt >= query.since) &&
  (query.until === undefined || row.firstAt <= query.until);

/**
 * `listSummaries` over summaries held in memory (the KurrentDB adapter's, tests' references): filtered, sorted by
 * (firstAt, stream) in `query.order`, from after `query.after`, `query.limit` of them, `hasMore` when one more
 * passes. O(n log n) in the rows given. @throws RangeError when `limit` is below 1.
 */
export const selectSummaries = (rows: Iterable<StreamSummary>, query: SummaryQuery): SummaryPage => {
  if (!(query.limit >= 1)) throw new RangeError(`listSummaries: limit must be at least 1, got ${query.limit}`);
  const sign = query.order === "desc" ? -1 : 1;
  const compare = (a: { firstAt: number; stream: string }, b: { firstAt: number; stream: string }): number =>
    sign * (a.firstAt - b.firstAt || compareNames(a.stream, b.stream));
  const after = query.after;
  const passing = [...rows]
    .filter((row) => passesSummaryQuery(row, query) && (after === undefined || compare(row, after) > 0))
    .sort(compare);
  return { summaries: passing.slice(0, query.limit), hasMore: passing.length > query.limit };
};
