/**
 * The PostgreSQL store's SELECTs of entries (postgres.ts): a stream read from a revision, a subscription's catch-up
 * page (a stream by revision, or `$all` by position), and the live poller's page of what other nodes appended after
 * the highest position seen. Each is `{ text, values }` for `pg`'s `query`; rows come as postgres-schema.ts `EntryRow`.
 */

/** Rows read per query while a subscription catches up, and per poll. */
export const CATCH_UP_PAGE = 256;

/** The name `subscribe` takes for every stream; no entry can be appended to it. */
export const ALL = "$all";

/** An entry row's columns, `position` (bigint) as text. */
const COLUMNS = "position::text AS position, stream, revision, type, data, bin, metadata";
/** COLUMNS with the body (data, bin, metadata) only of rows of a stream in $3 or of a type in $4; null elsewhere. */
const BODIES_WHERE_READ = [
  "position::text AS position, stream, revision, type",
  ...["data", "bin", "metadata"].map(
    (c) => `CASE WHEN stream = ANY($3::text[]) OR type = ANY($4::text[]) THEN ${c} END AS ${c}`,
  ),
].join(", ");

/** A query for `pg`: its text and parameters. */
export interface EntryQuery {
  readonly text: string;
  readonly values: readonly unknown[];
}

/** `stream`'s entries from revision `from`, at most `limit` (all when undefined), by revision. */
export const streamQuery = (stream: string, from: number, limit: number | undefined): EntryQuery => ({
  text: `SELECT ${COLUMNS} FROM duplex_entries WHERE stream = $1 AND revision >= $2 ORDER BY revision${limit === undefined ? "" : " LIMIT $3"}`,
  values: limit === undefined ? [stream, from] : [stream, from, limit],
});

/** A catch-up page: `stream`'s entries from revision `from`, or (`$all`) every entry from position `from`. */
export const catchUpQuery = (stream: string, from: number): EntryQuery =>
  stream === ALL
    ? {
        text: `SELECT ${COLUMNS} FROM duplex_entries WHERE position >= $1 ORDER BY position LIMIT ${CATCH_UP_PAGE}`,
        values: [from],
      }
    : {
        text: `SELECT ${COLUMNS} FROM duplex_entries WHERE stream = $1 AND revision >= $2 ORDER BY revision LIMIT ${CATCH_UP_PAGE}`,
        values: [stream, from],
      };

/** A live subscription as the poller sees it: its stream (or `$all`) and the types it reads (null: all). */
export interface Follower {
  readonly stream: string;
  readonly types: readonly string[] | null;
}

/**
 * The poller's page for `followers`: the entries after position `seen` of the streams they follow (every stream when
 * one follows `$all`), by position. A stream followed only by readers of a few types (every session's takeover watch
 * on a node of a cluster, src/engine/takeover-watch.ts) has its other rows' bodies left in the database: their
 * revisions still come, so each reader sees its stream whole, and passes them over undecoded.
 */
export const pollQuery = (followers: readonly Follower[]): ((seen: number) => EntryQuery) => {
  const everything = followers.some((l) => l.stream === ALL);
  const streams = [...new Set(followers.map((l) => l.stream))];
  const fullStreams = [...new Set(followers.filter((l) => l.types === null).map((l) => l.stream))];
  const readTypes = [...new Set(followers.flatMap((l) => l.types ?? []))];
  const columns = fullStreams.length === streams.length ? COLUMNS : BODIES_WHERE_READ;
  return (seen) => ({
    text: everything
      ? `SELECT ${COLUMNS} FROM duplex_entries WHERE position > $1 ORDER BY position LIMIT ${CATCH_UP_PAGE}`
      : `SELECT ${columns} FROM duplex_entries WHERE position > $1 AND stream = ANY($2::text[]) ORDER BY position LIMIT ${CATCH_UP_PAGE}`,
    values:
      everything || columns === COLUMNS
        ? everything
          ? [seen]
          : [seen, streams]
        : [seen, streams, fullStreams, readTypes],
  });
};
