/**
 * The PostgreSQL store's writes outside the group commit (postgres.ts), each one short transaction under the append
 * lock: a takeover's fence on a stream (issue 33, part 2: `duplex_fences`) and a stream's deletion.
 */
import type pg from "pg";
import { APPEND_LOCK } from "./postgres-schema.ts";

/**
 * Fences `stream` for `instance` (a store instance's id) for `ms` milliseconds, by the database's clock: appends
 * through other instances are refused until it expires or `instance` appends. Every append in flight commits (or is
 * refused) before it, none after goes through. Returns the stream's last revision, `"no_stream"`, or null when
 * another instance holds an unexpired fence on it. @throws Error from `pg` (the transaction is rolled back).
 */
export const takeFence = async (
  reads: pg.Pool,
  stream: string,
  instance: string,
  ms: number,
): Promise<number | "no_stream" | null> => {
  const client = await reads.connect();
  try {
    // Under the append lock: every append in flight commits (or is refused) before, none after goes through.
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1)", [APPEND_LOCK.toString()]);
    const taken = await client.query(
      `INSERT INTO duplex_fences (stream, holder, expires_at) VALUES ($1, $2, now() + $3::interval)
       ON CONFLICT (stream) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
         WHERE duplex_fences.expires_at <= now() OR duplex_fences.holder = EXCLUDED.holder
       RETURNING holder`,
      [stream, instance, `${Math.max(1, Math.round(ms))} milliseconds`],
    );
    const head = await client.query<{ revision: number }>("SELECT revision FROM duplex_streams WHERE stream = $1", [
      stream,
    ]);
    await client.query("COMMIT");
    if ((taken.rowCount ?? 0) === 0) return null;
    const revision = head.rows[0]?.revision;
    return revision === undefined ? "no_stream" : revision;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
};

/**
 * Deletes `stream`'s entries, summary, fence and row. Returns whether it was there. @throws Error from `pg` (the
 * transaction is rolled back).
 */
export const deleteStreamRows = async (reads: pg.Pool, stream: string): Promise<boolean> => {
  const client = await reads.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1)", [APPEND_LOCK.toString()]);
    await client.query("DELETE FROM duplex_entries WHERE stream = $1", [stream]);
    await client.query("DELETE FROM duplex_summaries WHERE stream = $1", [stream]);
    await client.query("DELETE FROM duplex_fences WHERE stream = $1", [stream]);
    const deleted = await client.query("DELETE FROM duplex_streams WHERE stream = $1", [stream]);
    await client.query("COMMIT");
    return (deleted.rowCount ?? 0) > 0;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
};
