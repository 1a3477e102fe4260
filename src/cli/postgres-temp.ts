import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A throwaway PostgreSQL server for the tests and `duplex bench --only postgres` (issue 22, parts 2 and 6): Debian's
 * `postgresql` binaries (.ci/run installs the package when missing), a cluster in a temporary folder, listening on a free port of 127.0.0.1 with
 * `trust` authentication, `fsync` and `synchronous_commit` on (as a production server). As root, the cluster runs
 * as the `postgres` user (initdb refuses root).
 */
export interface PostgresCluster {
  /** `postgres://postgres@127.0.0.1:PORT/postgres`. */
  readonly url: string;
  readonly port: number;
  /** Stops the server (fast shutdown) and removes its folder. */
  stop(): void;
}

/** The folder of initdb, pg_ctl and pgbench, or null when PostgreSQL is not installed. */
export const postgresBinaries = (): string | null => {
  const root = "/usr/lib/postgresql";
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(join(root, v, "bin", "initdb")))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0] !== undefined) return join(root, versions[0], "bin");
  }
  const found = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" }).stdout.trim();
  return found === "" ? null : found.slice(0, found.lastIndexOf("/"));
};

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0));
    });
  });

/**
 * Starts a cluster. @throws Error with the tool's output when initdb or pg_ctl fails; Error when PostgreSQL is not
 * installed (`postgresBinaries()` is null).
 */
export const startPostgresCluster = async (): Promise<PostgresCluster> => {
  const bin = postgresBinaries();
  if (bin === null) throw new Error("PostgreSQL is not installed (apt-get install postgresql)");
  const dir = mkdtempSync(join(tmpdir(), "duplex-pg-"));
  const data = join(dir, "data");
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    chownSync(dir, uid, gid);
    chmodSync(dir, 0o700);
  }
  const run = (tool: string, args: readonly string[]): void => {
    const [command, argv] = asRoot
      ? ["runuser", ["-u", "postgres", "--", join(bin, tool), ...args]]
      : [join(bin, tool), [...args]];
    const result = spawnSync(command, argv, { encoding: "utf8", cwd: dir });
    if (result.status !== 0)
      throw new Error(`${tool} ${args.join(" ")} failed (${result.status}): ${result.stderr}${result.stdout}`);
  };
  run("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"]);
  const port = await freePort();
  const options = [
    `-p ${port}`,
    "-c listen_addresses=127.0.0.1",
    `-c unix_socket_directories=${dir}`,
    "-c fsync=on",
    "-c synchronous_commit=on",
    "-c max_connections=200",
  ].join(" ");
  run("pg_ctl", ["-D", data, "-o", options, "-l", join(dir, "server.log"), "-w", "-t", "60", "start"]);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    stop() {
      try {
        run("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
};

let databases = 0;

/**
 * A new, empty database on the server of `url` (one per cluster test, so that no other test's sessions and nodes
 * are in it), and its URL. @throws Error from `pg` when the server cannot be reached.
 */
export const freshDatabase = async (url: string): Promise<string> => {
  const { default: pg } = await import("pg");
  const name = `duplex_${process.pid}_${Date.now().toString(36)}_${++databases}`;
  const admin = new pg.Client(url);
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const fresh = new URL(url);
  fresh.pathname = `/${name}`;
  return fresh.toString();
};
