import { spawnSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { createPostgresEventStore } from "../infra/event-store/postgres.ts";
import { freshDatabase, postgresBinaries, startPostgresCluster } from "./postgres-temp.ts";

/**
 * `duplex bench --only postgres` (issue 22, parts 2 and 6): the PostgreSQL store against the physical limit, on a
 * throwaway PostgreSQL (`--postgres-url` names another), `synchronous_commit` on:
 *
 * - drivers on the audio path: single-row inserts of 100 ms of audio (3200 bytes) into `bytea`, through `pg`
 *   (a `Buffer` parameter goes in binary) and postgres.js (every parameter as text: bytea as hex), rows per second;
 * - pgbench beside our adapter, the same rows (a small event; a 100 ms audio event) from 16 clients for `seconds`:
 *   pgbench's transactions per second, and our appends per second from 16 sessions appending at once (group commit),
 *   with the ratio.
 */
export const benchPostgres = async (o: {
  readonly url?: string;
  readonly seconds: number;
  readonly print: (line: Record<string, unknown>) => void;
}): Promise<void> => {
  const server = o.url === undefined ? await startPostgresCluster() : null;
  const base = o.url ?? server?.url ?? "";
  try {
    await drivers(await freshDatabase(base), o.print);
    await againstPgbench(await freshDatabase(base), o.seconds, o.print);
  } finally {
    server?.stop();
  }
};

const AUDIO = Buffer.alloc(3200, 7);
const ROWS = 2000;

const drivers = async (url: string, print: (line: Record<string, unknown>) => void): Promise<void> => {
  const client = new pg.Client(url);
  await client.connect();
  await client.query("CREATE TABLE audio_pg (id integer PRIMARY KEY, bin bytea NOT NULL)");
  await client.query("CREATE TABLE audio_js (id integer PRIMARY KEY, bin bytea NOT NULL)");
  let started = performance.now();
  for (let i = 0; i < ROWS; i += 1) await client.query("INSERT INTO audio_pg VALUES ($1, $2)", [i, AUDIO]);
  const pgMs = performance.now() - started;
  await client.end();
  let jsMs: number | null = null;
  try {
    // postgres.js is a devDependency: measured where it is installed.
    const { default: postgres } = await import("postgres");
    const sql = postgres(url, { max: 1, onnotice: () => undefined });
    started = performance.now();
    for (let i = 0; i < ROWS; i += 1) await sql`INSERT INTO audio_js VALUES (${i}, ${AUDIO})`;
    jsMs = performance.now() - started;
    await sql.end();
  } catch {
    jsMs = null;
  }
  print({
    bench: "postgres-drivers",
    meaning:
      "single-row inserts of 100 ms of audio (3200 B) into bytea, rows per second: pg sends a Buffer parameter in binary, postgres.js as hex text (twice the bytes)",
    rows: ROWS,
    pg_rows_per_s: Math.round((ROWS / pgMs) * 1000),
    postgres_js_rows_per_s: jsMs === null ? null : Math.round((ROWS / jsMs) * 1000),
    pg_over_postgres_js: jsMs === null ? null : Math.round((jsMs / pgMs) * 100) / 100,
  });
};

const CLIENTS = 16;

/** The events both sides write: small ones, and 100 ms of audio (3200 B). */
type Kind = "small" | "audio";

/**
 * pgbench's transactions per second (`seconds` long, CLIENTS connections) inserting the rows our appends write, one
 * per transaction, into a table of our entries' shape; null for a kind when pgbench is not installed or printed none.
 */
const pgbenchRates = async (url: string, seconds: number): Promise<Record<Kind, number | null>> => {
  const bin = postgresBinaries();
  const client = new pg.Client(url);
  await client.connect();
  await client.query(
    "CREATE TABLE bench_entries (position bigserial PRIMARY KEY, stream text NOT NULL, revision integer NOT NULL, type text NOT NULL, data text NOT NULL, bin bytea, metadata text NOT NULL)",
  );
  await client.end();
  const parsed = new URL(url);
  // pgbench: one transaction = one small event, or one 100 ms audio event, as our appends are.
  const rates: Record<Kind, number | null> = { small: null, audio: null };
  const dir = await mkdtemp(join(tmpdir(), "duplex-pgbench-"));
  try {
    for (const [kind, bytes] of [
      ["small", 0],
      ["audio", 3200],
    ] as const) {
      const script = join(dir, `${kind}.sql`);
      await writeFile(
        script,
        // The audio as a literal in the statement: its bytes cross the connection, as ours do (pgbench has no
        // binary parameters; a bytea made by the server, decode(repeat(...)), would send nothing).
        `INSERT INTO bench_entries (stream, revision, type, data, bin, metadata) VALUES ('s' || :client_id, 0, 'CommandReceived', '{"n":1}', ${bytes === 0 ? "NULL" : `'\\x${"07".repeat(bytes)}'::bytea`}, '{"at":1}');\n`,
      );
      if (bin === null) continue;
      const run = spawnSync(
        join(bin, "pgbench"),
        [
          "-n",
          "-f",
          script,
          "-c",
          String(CLIENTS),
          "-j",
          "2",
          "-T",
          String(seconds),
          "-h",
          parsed.hostname,
          "-p",
          parsed.port,
          "-U",
          decodeURIComponent(parsed.username) || "postgres",
          parsed.pathname.slice(1),
        ],
        { encoding: "utf8", env: { ...process.env, PGPASSWORD: decodeURIComponent(parsed.password) } },
      );
      const tps = /tps = ([\d.]+)/.exec(run.stdout)?.[1];
      rates[kind] = tps === undefined ? null : Math.round(Number(tps));
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return rates;
};

/** Our appends per second: CLIENTS sessions, each appending one entry and waiting for it, for `seconds`. */
const ourRates = async (url: string, seconds: number): Promise<Record<Kind, number>> => {
  const store = await createPostgresEventStore({ url });
  const ours: Record<Kind, number> = { small: 0, audio: 0 };
  for (const [kind, audio] of [
    ["small", null],
    ["audio", new Uint8Array(3200).fill(7)],
  ] as const) {
    let appended = 0;
    const until = performance.now() + seconds * 1000;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, k) => {
        const stream = `session-bench-${kind}-${k}`;
        for (let revision = -1; performance.now() < until; revision += 1) {
          await store.append(
            stream,
            [
              {
                type: "CommandReceived",
                data: audio === null ? { n: 1 } : { audio },
                metadata: { at: 1, epoch: 0, turnId: 0 },
              },
            ],
            revision < 0 ? "no_stream" : revision,
          );
          appended += 1;
        }
      }),
    );
    ours[kind] = Math.round((appended / (performance.now() - started)) * 1000);
  }
  await store.close();
  return ours;
};

/** Our adapter against pgbench writing the same rows (the baseline, in the same run): one line per kind. */
const againstPgbench = async (
  url: string,
  seconds: number,
  print: (line: Record<string, unknown>) => void,
): Promise<void> => {
  const rates = await pgbenchRates(url, seconds);
  const ours = await ourRates(url, seconds);
  for (const kind of ["small", "audio"] as const) {
    const baseline = rates[kind] ?? null;
    print({
      bench: `postgres-${kind}-events`,
      meaning: `${kind === "small" ? "small events" : "100 ms audio events (3200 B)"} per second from ${CLIENTS} writers, synchronous_commit on: pgbench inserting the same rows (one per transaction) against our adapter (one append per session at a time, group-committed); ratio >= 0.7 is the target`,
      seconds,
      pgbench_tps: baseline,
      ours_appends_per_s: ours[kind],
      ours_over_pgbench:
        baseline === null || baseline === 0 ? null : Math.round(((ours[kind] ?? 0) / baseline) * 100) / 100,
    });
  }
};
