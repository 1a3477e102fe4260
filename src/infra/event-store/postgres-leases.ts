/**
 * Node leases in PostgreSQL (issue 22, part 4): which node of a cluster holds its node id, and until when, by the
 * database's clock (table `duplex_nodes`).
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { NodeIdInUseError, type NodeLeases } from "../../engine/ports/node-leases.ts";

/** Options of `createPostgresNodeLeases`. */
export interface PostgresNodeLeasesOptions {
  readonly url: string;
  readonly nodeId: string;
  /** How long a lease lasts once renewed, ms. */
  readonly leaseMs: number;
}

/**
 * Node leases in PostgreSQL (issue 22, part 4): table `duplex_nodes` (node, expires_at, instance), every time
 * PostgreSQL's `now()`, so a lease expires by the database's clock, never a node's. `instance` is this process's
 * (a random UUID): a lease is renewed only by the process that holds it, or taken once it expired, so two processes
 * started with one node id cannot both hold it (issue 33's attack: the second one recovered the first one's live
 * sessions and a client's socket on the first hung).
 * @throws Error from `pg` when the server cannot be reached or the table cannot be created (from the factory).
 */
export async function createPostgresNodeLeases(options: PostgresNodeLeasesOptions): Promise<NodeLeases> {
  const pool = new pg.Pool({ connectionString: options.url, max: 1 });
  pool.on("error", () => undefined);
  await pool.query("CREATE TABLE IF NOT EXISTS duplex_nodes (node text PRIMARY KEY, expires_at timestamptz NOT NULL)");
  await pool.query("ALTER TABLE duplex_nodes ADD COLUMN IF NOT EXISTS instance text");
  const interval = `${Math.max(1, Math.round(options.leaseMs))} milliseconds`;
  const instance = randomUUID();
  /**
   * Renews or takes the lease: whether it was held by this process before (a node never seen: it was not), or
   * null when another process holds it unexpired (the row is left as it is).
   */
  const take = async (): Promise<boolean | null> => {
    const { rows } = await pool.query<{ held: boolean }>(
      `WITH before AS (SELECT expires_at, instance FROM duplex_nodes WHERE node = $1)
       INSERT INTO duplex_nodes (node, expires_at, instance) VALUES ($1, now() + $2::interval, $3)
       ON CONFLICT (node) DO UPDATE SET expires_at = EXCLUDED.expires_at, instance = EXCLUDED.instance
         WHERE duplex_nodes.instance IS NOT DISTINCT FROM EXCLUDED.instance OR duplex_nodes.expires_at <= now()
       RETURNING coalesce((SELECT expires_at > now() AND instance IS NOT DISTINCT FROM $3 FROM before), false) AS held`,
      [options.nodeId, interval, instance],
    );
    return rows.length === 0 ? null : rows[0]?.held === true;
  };
  return {
    nodeId: options.nodeId,
    leaseMs: options.leaseMs,
    // Another process holding it now means this one lost its node id for good (its lease ran out, say while it was
    // paused, and a process started with the same id took it).
    async renew() {
      const held = await take();
      if (held === null) throw new NodeIdInUseError(options.nodeId);
      return held;
    },
    async claim() {
      let seen: number | null = null;
      for (;;) {
        if ((await take()) !== null) return;
        const { rows } = await pool.query<{ expires: string; left_ms: number }>(
          "SELECT (extract(epoch FROM expires_at) * 1000)::text AS expires, greatest(0, extract(epoch FROM expires_at - now()) * 1000)::float8 AS left_ms FROM duplex_nodes WHERE node = $1",
          [options.nodeId],
        );
        const row = rows[0];
        if (row === undefined) continue;
        // Renewed since it was first seen: its process is alive.
        if (seen !== null && Number(row.expires) > seen) throw new NodeIdInUseError(options.nodeId);
        seen = Number(row.expires);
        await new Promise((resolve) => setTimeout(resolve, Math.min(options.leaseMs, row.left_ms) + 50));
      }
    },
    async holds(node) {
      const { rows } = await pool.query<{ held: boolean }>(
        "SELECT expires_at > now() AS held FROM duplex_nodes WHERE node = $1",
        [node],
      );
      return rows[0]?.held === true;
    },
    async release() {
      await pool
        .query("UPDATE duplex_nodes SET expires_at = now() WHERE node = $1", [options.nodeId])
        .catch(() => undefined);
      await pool.end().catch(() => undefined);
    },
  };
}
