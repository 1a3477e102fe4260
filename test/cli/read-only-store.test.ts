import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { Command, CommanderError } from "commander";
import { firstValueFrom, take, toArray } from "rxjs";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { failureOf } from "../../src/cli/args.ts";
import { freshDatabase } from "../../src/cli/postgres-temp.ts";
import { registerStoreCommands } from "../../src/cli/store-commands.ts";
import { RealtimeClient } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { parseSessionFile } from "../../src/infra/event-store/index.ts";
import { createPostgresEventStore } from "../../src/infra/event-store/postgres.ts";
import { createSqliteEventStore, ReadOnlyStoreError } from "../../src/infra/event-store/sqlite.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * The commands that only read a store work on read-only media (issue 33, part 6): a backup, a snapshot, an archive.
 * Each opens the sqlite file read-only and creates nothing beside it (no -wal, -shm or lock file), so a folder of
 * mode 0555 (read as a user other than root, whom permission bits do not stop) lists, shows, replays, verifies,
 * exports and draws its sessions; a copy taken while a server was writing reads the commits its -wal holds. `gc
 * --dry-run` reads it too; `gc` and `reindex` say why they cannot write it. A PostgreSQL role that may only read
 * (CONNECT and SELECT) is enough for the same commands: the store opens without DDL or writes.
 */
const TEMP = "/tmp/pgro";
const run = promisify(execFile);
type Result = { code: number; stdout: string; stderr: string };

/** `duplex ARGS` in this process: the store commands on a program of their own, as main.ts runs them. */
const duplex = async (...args: string[]): Promise<Result> => {
  const program = new Command("duplex").exitOverride();
  registerStoreCommands(program);
  const out: string[] = [];
  const err: string[] = [];
  const write = { out: process.stdout.write, err: process.stderr.write };
  process.stdout.write = ((chunk: string) => out.push(String(chunk)) > 0) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string) => err.push(String(chunk)) > 0) as typeof process.stderr.write;
  let code = 0;
  try {
    await program.parseAsync(args, { from: "user" });
    code = Number(process.exitCode ?? 0);
  } catch (error) {
    if (error instanceof CommanderError && error.code !== "commander.invalidArgument") code = 2;
    else {
      const failure = failureOf(error);
      err.push(`duplex: ${failure.message}\n`);
      code = failure.exitCode;
    }
  } finally {
    process.stdout.write = write.out;
    process.stderr.write = write.err;
    process.exitCode = undefined;
  }
  return { code, stdout: out.join(""), stderr: err.join("") };
};

/** `duplex ARGS` as another user than root (nobody), when this runs as root and setpriv is there; else null. */
const asNobody = async (...args: string[]): Promise<Result | null> => {
  if (process.getuid?.() !== 0 || !existsSync("/usr/bin/setpriv")) return null;
  return run(
    "/usr/bin/setpriv",
    ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, "bin/duplex.js", ...args],
    { timeout: 30_000 },
  ).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: Result) => error,
  );
};

/** Each file of `dir` with its size and sha256: what reading must leave as it was. */
const snapshot = async (dir: string): Promise<Record<string, string>> => {
  const files: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort())
    files[name] = createHash("sha256")
      .update(await readFile(join(dir, name)))
      .digest("hex");
  return files;
};

/** Copies `names` of `from` into a new folder under TEMP. */
const copyOf = async (from: string, names: readonly string[]): Promise<string> => {
  const dir = await mkdtemp(join(TEMP, "ro-store-"));
  for (const name of names) await copyFile(join(from, name), join(dir, name));
  return dir;
};

/** Opens a session on `url`, speaks the question into it with server VAD and waits for the answer's end. */
const speak = async (url: string, close: boolean): Promise<string> => {
  const client = await RealtimeClient.connect(url);
  const id = String(((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id);
  client.send({ type: "session.update", session: { input_audio_format: "pcm16", input_sample_rate_hz: 16000 } });
  await client.waitFor("session.updated", { since: 0 });
  const question = await readWavFile(sharedAudio("question_16k.wav"));
  client.appendSamples(question.samples, { sampleRateHz: 16000, tailMs: 1000 });
  await client.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
  if (close) {
    client.send({ type: "session.close" });
    await client.closed;
  } else await client.close();
  return id;
};

beforeAll(async () => mkdir(TEMP, { recursive: true }));

describe("the read-only commands on a store of a stopped server", () => {
  let stopped = "";
  const ids = { spoken: "", unused: "" };
  let dir = "";
  beforeAll(async () => {
    const server = await startTestServer();
    stopped = server.dataDir;
    ids.spoken = await speak(server.url, true);
    const unused = await RealtimeClient.connect(server.url);
    ids.unused = String(((await unused.waitFor("session.created", { since: 0 })).session as { id: string }).id);
    await unused.close();
    await server.close();
    // What a stopped server leaves: the file alone (SQLite removes the -wal and -shm at the last close).
    expect(await readdir(stopped)).toEqual(["duplex.sqlite"]);
    dir = await copyOf(stopped, ["duplex.sqlite"]);
    await chmod(join(dir, "duplex.sqlite"), 0o444);
    await chmod(dir, 0o555);
  });
  afterAll(async () => {
    if (dir !== "") await chmod(dir, 0o755);
    await rm(dir, { recursive: true, force: true });
    await rm(stopped, { recursive: true, force: true });
  });

  it("lists, shows, replays, verifies, exports, traces and draws its sessions and creates no file beside it", async () => {
    const before = await snapshot(dir);
    const out = await mkdtemp(join(TEMP, "ro-out-"));
    try {
      const sessions = await duplex("sessions", "--data", dir, "--json");
      expect(sessions.code).toBe(0);
      expect(
        sessions.stdout
          .trim()
          .split("\n")
          .map((l) => (JSON.parse(l) as { session_id: string }).session_id),
      ).toEqual([ids.spoken, ids.unused]);
      // A filter that keeps none says so, and that the store is not empty.
      expect((await duplex("sessions", "--data", dir, "--errors")).stdout).toContain(
        `(none of the 2 sessions in ${dir} has an error)`,
      );
      const shown = await duplex("show", "--data", dir, "--session", ids.spoken, "--json");
      expect(JSON.parse(shown.stdout)).toMatchObject({ session_id: ids.spoken, state: "closed", responses: 1 });
      // The positional is the same as --session.
      expect((await duplex("show", ids.spoken, "--data", dir, "--json")).stdout).toBe(shown.stdout);
      const replayed = await duplex("replay", "--data", dir, "--session", ids.spoken);
      expect(replayed).toMatchObject({ code: 0, stderr: "" });
      expect(replayed.stdout).toMatch(new RegExp(`^replay of ${ids.spoken}: identical `));
      const verified = await duplex("verify", "--data", dir, "--session", ids.spoken);
      expect(verified.stdout).toMatch(new RegExp(`^verified ${ids.spoken}: \\d+ entries`));
      const exported = await duplex("export", "--data", dir, "--session", ids.spoken, "--out", join(out, "s.jsonl"));
      expect(exported).toMatchObject({ code: 0, stderr: "" });
      const file = parseSessionFile(await readFile(join(out, "s.jsonl"), "utf8"));
      expect(file.entries.map((e) => e.revision)).toEqual(file.entries.map((_, i) => i));
      expect(JSON.parse((await duplex("show", join(out, "s.jsonl"), "--json")).stdout)).toEqual(
        JSON.parse(shown.stdout),
      );
      expect(await duplex("timeline", "--data", dir, "--last", "--out", join(out, "t.html"))).toMatchObject({
        code: 0,
      });
      expect(await duplex("trace", "--data", dir, "--last", "--out", join(out, "t.json"))).toMatchObject({ code: 0 });
      // --last is the unused session, opened after the spoken one.
      expect(JSON.parse((await duplex("show", "--data", dir, "--last", "--json")).stdout)).toMatchObject({
        session_id: ids.unused,
        state: "unused",
      });
      expect(await snapshot(dir)).toEqual(before);
      expect(Object.keys(before)).toEqual(["duplex.sqlite"]);
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  it("opens as a user whom the folder's mode 0555 and the file's 0444 stop from writing", async (ctx) => {
    const listed = await asNobody("sessions", "--data", dir, "--json");
    if (listed === null) ctx.skip();
    expect(listed).toMatchObject({ code: 0, stderr: "" });
    expect(listed?.stdout.trim().split("\n").length).toBe(2);
    const replayed = await asNobody("replay", "--data", dir, "--last");
    expect(replayed?.stdout).toMatch(new RegExp(`^replay of ${ids.unused}: identical `));
    expect(await readdir(dir)).toEqual(["duplex.sqlite"]);
  });

  it("refuses every write to a store opened read-only, and writes nothing", async () => {
    const store = createSqliteEventStore({ path: join(dir, "duplex.sqlite"), readOnly: true });
    try {
      const appended = store.append(
        streamOf(ids.spoken),
        [{ type: "X", data: {}, metadata: { at: 0, epoch: 0, turnId: 0 } }],
        "any",
      );
      await expect(appended).rejects.toBeInstanceOf(ReadOnlyStoreError);
      await expect(appended).rejects.toMatchObject({ code: "event_store_read_only" });
      await expect(store.deleteStream(streamOf(ids.spoken))).rejects.toMatchObject({ code: "event_store_read_only" });
      expect((await store.read(streamOf(ids.spoken))).length).toBeGreaterThan(0);
    } finally {
      await store.close();
    }
    expect(await readdir(dir)).toEqual(["duplex.sqlite"]);
  });

  it("lists what gc --dry-run would remove, reading the store as the other commands do", async () => {
    const before = await snapshot(dir);
    const listed = await duplex("gc", "--data", dir, "--older-than", "0", "--dry-run");
    expect(listed).toEqual({
      code: 0,
      // The unused session was closed with its server.
      stdout: `would remove ${ids.spoken}\nwould remove ${ids.unused}\n2 finished session(s) to remove, 0 kept\n`,
      stderr: "",
    });
    expect(await snapshot(dir)).toEqual(before);
    // As a user whom the modes stop from writing, too.
    const nobody = await asNobody("gc", "--data", dir, "--older-than", "0", "--dry-run");
    if (nobody !== null) expect(nobody).toMatchObject({ code: 0, stdout: listed.stdout });
    expect(await readdir(dir)).toEqual(["duplex.sqlite"]);
  });

  it("refuses gc and reindex on a store this user may not write, saying why and what to do", async (ctx) => {
    const gc = await asNobody("gc", "--data", dir, "--older-than", "0");
    if (gc === null) ctx.skip();
    const file = join(dir, "duplex.sqlite");
    expect(gc).toMatchObject({ code: 1, stdout: "" });
    expect(gc?.stderr).toBe(
      `duplex: cannot remove sessions from ${file}: this user may not write the file (permission denied); gc a writable copy of the store (the -wal with it, if there is one), or run it as the store's owner (--dry-run lists what it would remove, and writes nothing)\n`,
    );
    const reindex = await asNobody("reindex", "--data", dir);
    expect(reindex).toMatchObject({ code: 1, stdout: "" });
    expect(reindex?.stderr).toBe(
      `duplex: cannot reindex ${file}: this user may not write the file (permission denied); reindex a writable copy of the store (the -wal with it, if there is one), or run it as the store's owner\n`,
    );
    expect(await readdir(dir)).toEqual(["duplex.sqlite"]);
    expect((await asNobody("sessions", "--data", dir))?.stdout).toContain(ids.spoken);
  });

  it("takes a session one way: two ways at once, a FILE with a store, or none is a usage error", async () => {
    const cases: [string[], RegExp][] = [
      [
        ["replay", "x.jsonl", "--last"],
        /give one of a session FILE, --session ID or --last, not the session FILE x\.jsonl and --last/,
      ],
      [["verify", "--session", "a", "--last", "--data", dir], /not --session a and --last/],
      [["show", ids.spoken, "--session", ids.unused, "--data", dir], /give the session once/],
      [
        ["timeline", "x.jsonl", "--data", dir, "--out", "t.html"],
        /--data .* name a store, and the session FILE x\.jsonl is read alone/,
      ],
      [["export", "--data", dir, "--out", "e.jsonl"], /give a session FILE, --session ID or --last/],
    ];
    for (const [args, message] of cases) {
      const result = await duplex(...args);
      expect({ args, code: result.code, stdout: result.stdout }).toEqual({ args, code: 2, stdout: "" });
      expect(result.stderr).toMatch(message);
    }
    const missing = await duplex("show", "--data", dir, "--session", "sess_nope");
    expect(missing).toMatchObject({ code: 2, stdout: "" });
    expect(missing.stderr).toBe(`duplex: no session sess_nope in ${dir}\n`);
  });
});

describe("a copy of a store taken while its server was writing it", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let id = "";
  let revisions: number[] = [];
  const dirs: string[] = [];
  beforeAll(async () => {
    server = await startTestServer();
    id = await speak(server.url, true);
    revisions = (await server.store.read(streamOf(id))).map((e) => e.revision);
  });
  afterAll(async () => {
    await server.stop();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  /** The revisions `export` reads of the session from the store in `dir`. */
  const exported = async (dir: string): Promise<number[]> => {
    const out = join(dir, "..", `${id}-${dirs.length}.jsonl`);
    const result = await duplex("export", "--data", dir, "--session", id, "--out", out);
    expect(result).toMatchObject({ code: 0, stderr: "" });
    const file = parseSessionFile(await readFile(out, "utf8"));
    await rm(out);
    return file.entries.map((e) => e.revision);
  };

  it("holds commits in its -wal that the file alone does not", async () => {
    expect((await stat(join(server.dataDir, "duplex.sqlite-wal"))).size).toBeGreaterThan(0);
    const dir = await copyOf(server.dataDir, ["duplex.sqlite"]);
    dirs.push(dir);
    const result = await duplex("show", "--data", dir, "--session", id, "--json");
    // Without its WAL the copy holds less of the session than the server wrote, or none of it.
    const revision = result.code === 0 ? (JSON.parse(result.stdout) as { revision: number }).revision : -1;
    expect(revision).toBeLessThan(revisions.at(-1) ?? 0);
  });

  it("reads every commit, beside the -wal and -shm, and changes nothing", async () => {
    const dir = await copyOf(server.dataDir, ["duplex.sqlite", "duplex.sqlite-wal", "duplex.sqlite-shm"]);
    dirs.push(dir);
    const before = await snapshot(dir);
    expect(await exported(dir)).toEqual(revisions);
    const after = await snapshot(dir);
    // The -shm is the WAL's shared index: a reader may update it (a user who cannot write it reads without it).
    expect(Object.keys(after)).toEqual(Object.keys(before));
    expect([after["duplex.sqlite"], after["duplex.sqlite-wal"]]).toEqual([
      before["duplex.sqlite"],
      before["duplex.sqlite-wal"],
    ]);
  });

  it("reads every commit of a -wal without its -shm, and creates no -shm", async () => {
    const dir = await copyOf(server.dataDir, ["duplex.sqlite", "duplex.sqlite-wal"]);
    dirs.push(dir);
    const before = await snapshot(dir);
    expect(await exported(dir)).toEqual(revisions);
    expect(await snapshot(dir)).toEqual(before);
  });

  it("reads up to the last whole commit of a -wal cut short", async () => {
    const dir = await copyOf(server.dataDir, ["duplex.sqlite", "duplex.sqlite-wal"]);
    dirs.push(dir);
    const wal = join(dir, "duplex.sqlite-wal");
    // Cut inside the frame after the first half of the committed ones (a WAL reused after a checkpoint holds stale
    // frames past them): the commit it belongs to is torn, those before it are whole.
    const bytes = await readFile(wal);
    // The committed frames (each header's "database size in pages" is not 0 on a commit frame), counted from the
    // WAL header's page size (sqlite.org/fileformat2.html, "The Write-Ahead Log").
    const frameBytes0 = 24 + bytes.readUInt32BE(8);
    let frames = 0;
    for (let at = 32, n = 1; at + frameBytes0 <= bytes.length; at += frameBytes0, n += 1) {
      // Frames of this WAL carry its header's salts; those past them are stale (a WAL reused after a checkpoint).
      if (!bytes.subarray(at + 8, at + 16).equals(bytes.subarray(16, 24))) break;
      if (bytes.readUInt32BE(at + 4) !== 0) frames = n;
    }
    expect(frames).toBeGreaterThan(2);
    const frameBytes = 24 + bytes.readUInt32BE(8);
    await truncate(wal, 32 + frameBytes * Math.floor(frames / 2) + 4096);
    const read = await exported(dir);
    expect(read.length).toBeGreaterThan(0);
    expect(read.length).toBeLessThan(revisions.length);
    expect(read).toEqual(revisions.slice(0, read.length));
    // SQLite's own recovery of the same two files (in a folder it may write to) reads as many.
    const oracle = await copyOf(dir, ["duplex.sqlite", "duplex.sqlite-wal"]);
    dirs.push(oracle);
    const db = new Database(join(oracle, "duplex.sqlite"));
    const count = db
      .prepare<[string], { n: number }>(
        "SELECT count(*) AS n FROM entries e JOIN streams s ON s.id = e.stream_id WHERE s.stream = ?",
      )
      .get(streamOf(id))?.n;
    db.close();
    expect(count).toBe(read.length);
  });

  it("lists the sessions of the live server's own store, beside it, without its lock", async () => {
    const before = (await readdir(server.dataDir)).sort();
    const listed = await duplex("sessions", "--data", server.dataDir, "--json");
    expect(
      listed.stdout
        .trim()
        .split("\n")
        .map((l) => (JSON.parse(l) as { session_id: string }).session_id),
    ).toEqual([id]);
    expect((await readdir(server.dataDir)).sort()).toEqual(before);
  });
});

describe("--config names the store", () => {
  let dir = "";
  let config = "";
  let id = "";
  beforeAll(async () => {
    const server = await startTestServer();
    id = await speak(server.url, true);
    await server.close();
    dir = server.dataDir;
    config = join(dir, "sqlite.yaml");
    await writeFile(config, `event_store:\n  kind: sqlite\n  path: ${join(dir, "duplex.sqlite")}\n`);
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it("reads a sqlite config's file as --data reads its folder", async () => {
    const result = await duplex("replay", "--config", config, "--last");
    expect(result.stdout).toMatch(new RegExp(`^replay of ${id}: identical `));
    expect((await duplex("sessions", "--config", config, "--json")).stdout).toBe(
      (await duplex("sessions", "--data", dir, "--json")).stdout,
    );
  });

  it("says which file is missing and what named it", async () => {
    const elsewhere = join(dir, "elsewhere.yaml");
    await writeFile(elsewhere, `event_store:\n  kind: sqlite\n  path: ${join(dir, "none", "duplex.sqlite")}\n`);
    const result = await duplex("sessions", "--config", elsewhere);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      `expected ${join(dir, "none", "duplex.sqlite")}, from event_store.path of --config ${elsewhere}`,
    );
    expect(existsSync(join(dir, "none"))).toBe(false);
  });
});

const postgresUrl = inject("postgresUrl");

/**
 * A role of its own that may only read the database of `url` (CONNECT on it, SELECT on its tables; PUBLIC's rights
 * on the database and CREATE on its schema revoked), and that database's URL as that role; `drop` removes the role.
 */
const readerOf = async (url: string): Promise<{ url: string; drop: () => Promise<void> }> => {
  const { default: pg } = await import("pg");
  const role = `duplex_reader_${process.pid}_${Date.now().toString(36)}_${Math.floor(Math.random() * 1e6)}`;
  const database = new URL(url).pathname.slice(1);
  const admin = new pg.Client(url);
  await admin.connect();
  try {
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    await admin.query(`REVOKE ALL ON DATABASE ${database} FROM PUBLIC`);
    await admin.query("REVOKE CREATE ON SCHEMA public FROM PUBLIC");
    await admin.query(`GRANT CONNECT ON DATABASE ${database} TO ${role}`);
    await admin.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role}`);
  } finally {
    await admin.end();
  }
  const reader = new URL(url);
  reader.username = role;
  return {
    url: reader.toString(),
    drop: async () => {
      const db = new pg.Client(url);
      await db.connect();
      try {
        await db.query(`DROP OWNED BY ${role}`);
        await db.query(`DROP ROLE ${role}`);
      } finally {
        await db.end();
      }
    },
  };
};

/** The tables of the public schema of the database at `url`, by name. */
const tablesOf = async (url: string): Promise<string[]> => {
  const { default: pg } = await import("pg");
  const db = new pg.Client(url);
  await db.connect();
  try {
    const { rows } = await db.query<{ name: string }>(
      "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename",
    );
    return rows.map((r) => r.name);
  } finally {
    await db.end();
  }
};

describe.skipIf(postgresUrl === null)("--config with a PostgreSQL event_store", () => {
  let dir = "";
  let config = "";
  let readerConfig = "";
  let url = "";
  let reader: Awaited<ReturnType<typeof readerOf>> | null = null;
  let id = "";
  beforeAll(async () => {
    url = await freshDatabase(postgresUrl ?? "");
    const store = { kind: "postgres", url, poll_ms: 50 };
    const server = await startTestServer({ event_store: store });
    id = await speak(server.url, true);
    await server.stop();
    dir = await mkdtemp(join(TEMP, "ro-pg-"));
    config = join(dir, "cluster.yaml");
    await writeFile(config, `event_store:\n  kind: postgres\n  url: ${store.url}\n`);
    reader = await readerOf(url);
    readerConfig = join(dir, "reader.yaml");
    await writeFile(readerConfig, `event_store:\n  kind: postgres\n  url: ${reader.url}\n  poll_ms: 50\n`);
  });
  afterAll(async () => {
    await reader?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  it("lists, shows, replays, verifies and exports its sessions as a role that may only read", async () => {
    const listed = await duplex("sessions", "--config", readerConfig, "--json");
    expect(listed).toMatchObject({ code: 0, stderr: "" });
    expect(
      listed.stdout
        .trim()
        .split("\n")
        .map((l) => (JSON.parse(l) as { session_id: string }).session_id),
    ).toEqual([id]);
    // The role that wrote them reads the same.
    expect((await duplex("sessions", "--config", config, "--json")).stdout).toBe(listed.stdout);
    const shown = await duplex("show", "--config", readerConfig, "--session", id, "--json");
    expect(shown).toMatchObject({ code: 0, stderr: "" });
    expect(JSON.parse(shown.stdout)).toMatchObject({ session_id: id, state: "closed", responses: 1 });
    const replayed = await duplex("replay", "--config", readerConfig, "--last");
    expect(replayed).toMatchObject({ code: 0, stderr: "" });
    expect(replayed.stdout).toMatch(new RegExp(`^replay of ${id}: identical `));
    const verified = await duplex("verify", "--config", readerConfig, "--session", id);
    expect(verified).toMatchObject({ code: 0, stderr: "" });
    expect(verified.stdout).toMatch(new RegExp(`^verified ${id}: `));
    const out = join(dir, "s.jsonl");
    expect(await duplex("export", "--config", readerConfig, "--last", "--out", out)).toMatchObject({
      code: 0,
      stderr: "",
    });
    expect((await duplex("verify", out)).stdout).toMatch(new RegExp(`^verified ${out}: `));
    expect(await duplex("gc", "--config", readerConfig, "--older-than", "0", "--dry-run")).toEqual({
      code: 0,
      stdout: `would remove ${id}\n1 finished session(s) to remove, 0 kept\n`,
      stderr: "",
    });
    expect((await duplex("sessions", "--config", config, "--json")).stdout).toBe(listed.stdout);
  });

  it("reads the role's URL from DUPLEX_EVENT_STORE_URL, in place of the file's store", async () => {
    const elsewhere = join(dir, "elsewhere.yaml");
    await writeFile(elsewhere, "event_store:\n  kind: postgres\n  url: postgres://nobody@127.0.0.1:1/none\n");
    const before = process.env.DUPLEX_EVENT_STORE_URL;
    process.env.DUPLEX_EVENT_STORE_URL = reader?.url ?? "";
    try {
      const listed = await duplex("sessions", "--config", elsewhere, "--json");
      expect(listed).toMatchObject({ code: 0, stderr: "" });
      expect((JSON.parse(listed.stdout) as { session_id: string }).session_id).toBe(id);
      const shown = await duplex("show", "--config", elsewhere, "--last", "--json");
      expect(JSON.parse(shown.stdout)).toMatchObject({ session_id: id, state: "closed" });
      expect((await duplex("verify", "--config", elsewhere, "--last")).stdout).toMatch(new RegExp(`^verified ${id}: `));
    } finally {
      if (before === undefined) delete process.env.DUPLEX_EVENT_STORE_URL;
      else process.env.DUPLEX_EVENT_STORE_URL = before;
    }
  });

  it("refuses every write through a store opened read-only, and reads, lists and tails it", async () => {
    const store = await createPostgresEventStore({ url: reader?.url ?? "", readOnly: true, pollMs: 50 });
    const writer = await createPostgresEventStore({ url, pollMs: 50 });
    try {
      const entry = { type: "Probe", data: { n: 1 }, metadata: { at: 1, epoch: 0, turnId: 0 } };
      const appended = store.append(streamOf(id), [entry], "any");
      await expect(appended).rejects.toBeInstanceOf(ReadOnlyStoreError);
      await expect(appended).rejects.toMatchObject({ code: "event_store_read_only" });
      await expect(store.deleteStream(streamOf(id))).rejects.toBeInstanceOf(ReadOnlyStoreError);
      await expect(store.rebuildSummaries()).rejects.toBeInstanceOf(ReadOnlyStoreError);
      await expect(store.fence?.(streamOf(id), 1000) ?? Promise.resolve(null)).rejects.toBeInstanceOf(
        ReadOnlyStoreError,
      );
      const entries = await store.read(streamOf(id));
      expect(entries.length).toBeGreaterThan(0);
      expect((await store.listStreams("session-")).map((s) => s.stream)).toEqual([streamOf(id)]);
      const page = await store.listSummaries({ prefix: "session-", limit: 10 });
      expect(page.summaries.map((s) => [s.stream, s.summary.state])).toEqual([[streamOf(id), "closed"]]);
      // A tail: what is stored, then what a writer appends meanwhile (another stream than the sessions').
      const tail = firstValueFrom(store.subscribe("probe-1").pipe(take(2), toArray()));
      await writer.append("probe-1", [entry], "no_stream");
      await writer.append("probe-1", [{ ...entry, data: { n: 2 } }], 0);
      expect((await tail).map((e) => e.data)).toEqual([{ n: 1 }, { n: 2 }]);
      await writer.deleteStream("probe-1");
    } finally {
      await store.close();
      await writer.close();
    }
  });

  it("says that a database without the tables holds no sessions, and creates none", async () => {
    const empty = await freshDatabase(postgresUrl ?? "");
    const emptyReader = await readerOf(empty);
    try {
      for (const [name, storeUrl] of [
        ["owner", empty],
        ["reader", emptyReader.url],
      ] as const) {
        const file = join(dir, `empty-${name}.yaml`);
        await writeFile(file, `event_store:\n  kind: postgres\n  url: ${storeUrl}\n`);
        for (const args of [["sessions"], ["show", "--last"], ["gc", "--older-than", "0", "--dry-run"]]) {
          const result = await duplex(...args, "--config", file);
          expect({ name, args, code: result.code, stdout: result.stdout }).toEqual({ name, args, code: 1, stdout: "" });
          expect(result.stderr).toMatch(
            /^duplex: no event store in postgres:\/\/.*: the database has no table duplex_entries, so it holds no sessions/,
          );
        }
      }
      expect(await tablesOf(empty)).toEqual([]);
    } finally {
      await emptyReader.drop();
    }
  });

  it("refuses --data beside it, naming both", async () => {
    const result = await duplex("sessions", "--config", config, "--data", dir);
    expect(result).toMatchObject({ code: 2, stdout: "" });
    expect(result.stderr).toBe(
      `duplex: --data ${dir} with --config ${config}: the configuration's event_store is postgres, and --data names the folder of an embedded sqlite store; give one of them\n`,
    );
  });
});
