import { execFile } from "node:child_process";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { STREAM_PREFIX } from "../../src/engine/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { startTestServer } from "../support/server.ts";
import { reportRowOf } from "../support/session-list-reference.ts";

/**
 * `duplex sessions`, `replay --last` and `export --last` on a real store (issue 9, "The server's lifecycle"): how
 * each session ended, and the one opened last without copying its id.
 */
const run = promisify(execFile);
/** The id of the session `client` opened. */
const idOf = async (client: RealtimeClient): Promise<string> =>
  String(((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id);

const duplex = (...args: string[]) => run(process.execPath, ["bin/duplex.js", ...args], { timeout: 30_000 });

describe("duplex sessions", () => {
  let dataDir = "";
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    const server = await startTestServer();
    dataDir = server.dataDir;
    const closed = await RealtimeClient.connect(server.url);
    ids.closed = await idOf(closed);
    closed.send({ type: "session.close" });
    await closed.closed;
    const unused = await RealtimeClient.connect(server.url);
    ids.unused = await idOf(unused);
    await unused.close();
    const detached = await RealtimeClient.connect(server.url);
    ids.detached = await idOf(detached);
    detached.send({ type: "session.update", session: { tracing: { workflow_name: "support", group_id: "g1" } } });
    await detached.waitFor("session.updated", { since: 0 });
    // close(), not stop(): the store stays on disk for the commands.
    await server.close();
  });
  afterAll(async () => rm(dataDir, { recursive: true, force: true }));

  it("says how each session ended, oldest first; --last N shows the newest N", async () => {
    const rows = (await duplex("sessions", "--data", dataDir, "--json")).stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { session_id: string; state: string; duration_s: number });
    expect(rows.map((r) => [r.session_id, r.state])).toEqual([
      [ids.closed, "closed"],
      [ids.unused, "unused"],
      [ids.detached, "detached"],
    ]);
    for (const r of rows) expect(r.duration_s).toBeGreaterThanOrEqual(0);
    // A session's tracing labels are kept and shown: JSON as the client gave them, the table as key=value.
    expect(rows.map((r) => (r as { tracing?: unknown }).tracing)).toEqual([
      null,
      null,
      { workflow_name: "support", group_id: "g1" },
    ]);
    const table = (await duplex("sessions", "--data", dataDir)).stdout.split("\n");
    expect(table[0]).toMatch(/responses {2}labels$/);
    // Every duration in one format: seconds with one decimal.
    const durations = rows.map((r) =>
      table
        .find((l) => l.startsWith(r.session_id))
        ?.slice(66, 76)
        .trim(),
    );
    expect(durations).toEqual(rows.map((r) => r.duration_s.toFixed(1)));
    expect(table.find((l) => l.startsWith(ids.detached ?? "?"))).toMatch(/ {2}workflow=support group=g1$/);
    const last = (await duplex("sessions", "--data", dataDir, "--json", "--last", "1")).stdout.trim().split("\n");
    expect(last.map((l) => (JSON.parse(l) as { session_id: string }).session_id)).toEqual([ids.detached]);
  });

  it("says a file that is not a session file is not one, instead of a JSON parse error", async () => {
    const notes = join(dataDir, "notes.txt");
    await writeFile(notes, "remember to buy milk\n");
    const refused = await duplex("replay", notes).catch((error: { code: number; stderr: string }) => error);
    expect(refused).toMatchObject({ code: 1 });
    expect((refused as { stderr: string }).stderr).toBe(
      'duplex: not a duplex-session file: its first line must be the header {"format":"duplex-session",...} (write one with duplex export)\n',
    );
  });

  it("replays and exports the session opened last with --last", async () => {
    const replayed = await duplex("replay", "--data", dataDir, "--last");
    expect(replayed.stdout).toContain(ids.detached);
    const out = join(dataDir, "last.jsonl");
    const exported = await duplex("export", "--data", dataDir, "--last", "--out", out);
    expect(exported.stdout).toContain(`of ${ids.detached} to ${out}`);
    expect(await readFile(out, "utf8")).toContain(ids.detached);
  });

  it("reindex folds every summary again from the logs: a spoiled row comes back as the log tells it", async () => {
    const path = join(dataDir, "duplex.sqlite");
    const spoiler = new Database(path);
    spoiler.exec(
      "UPDATE summaries SET state = 'failed (runner)', fold = json_set(fold, '$.ending', 'failed (runner)')",
    );
    spoiler.close();

    expect((await duplex("reindex", "--data", dataDir)).stdout).toMatch(
      /^reindexed 3 stream\(s\) in .*duplex\.sqlite \(\d+ ms\)\n$/,
    );
    const store = createSqliteEventStore({ path, migrate: false });
    try {
      const page = await store.listSummaries({ prefix: STREAM_PREFIX, limit: 10 });
      expect(page.summaries.map((s) => [s.summary.id, s.summary.state])).toEqual([
        [ids.closed, "closed"],
        [ids.unused, "unused"],
        [ids.detached, "detached"],
      ]);
      for (const { stream, summary } of page.summaries) expect(summary).toEqual(reportRowOf(await store.read(stream)));
    } finally {
      await store.close();
    }
    await expect(duplex("reindex", "--data", join(dataDir, "nothing"))).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining("no event store in"),
    });
  });

  it("gc removes finished sessions (here the closed and the unused one) and keeps what may still be resumed", async () => {
    const young = await duplex("gc", "--data", dataDir, "--older-than", "7d");
    expect(young.stdout.trim()).toBe("0 finished session(s) removed, 3 kept");
    // How old is never a default: removing is for good.
    await expect(duplex("gc", "--data", dataDir)).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--older-than"),
    });
    // A number without its unit could mean days or seconds: refused, and nothing is removed.
    await expect(duplex("gc", "--data", dataDir, "--older-than", "7")).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining("7 has no unit: say 7d, 12h, 30m or 45s"),
    });
    const dry = await duplex("gc", "--data", dataDir, "--older-than", "0", "--dry-run");
    expect(dry.stdout.trim().split("\n")).toEqual([
      `would remove ${ids.closed}`,
      `would remove ${ids.unused}`,
      "2 finished session(s) to remove, 1 kept",
    ]);
    await duplex("gc", "--data", dataDir, "--older-than", "0");
    const rows = (await duplex("sessions", "--data", dataDir, "--json")).stdout.trim().split("\n");
    expect(rows.map((l) => (JSON.parse(l) as { session_id: string }).session_id)).toEqual([ids.detached]);
  });
});

describe("duplex show, sessions --errors and --slowest", () => {
  let dataDir = "";
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    const server = await startTestServer();
    dataDir = server.dataDir;
    const answered = await RealtimeClient.connect(server.url);
    ids.answered = await idOf(answered);
    answered.send({ type: "response.create", response: { instructions: "Answer." } });
    await answered.waitFor("response.done", { since: 0 });
    answered.send({ type: "session.close" });
    await answered.closed;
    const failing = await RealtimeClient.connect(server.url);
    ids.failing = await idOf(failing);
    failing.send({ type: "conversation.item.truncate", item_id: "item_nope", content_index: 0, audio_end_ms: 10 });
    await failing.waitFor("error", { since: 0 });
    failing.send({ type: "session.close" });
    await failing.closed;
    await server.close();
  });
  afterAll(async () => rm(dataDir, { recursive: true, force: true }));

  it("--errors lists only sessions whose log holds an error, each with its revision, code and message", async () => {
    const rows = (await duplex("sessions", "--data", dataDir, "--errors", "--json")).stdout.trim().split("\n");
    const parsed = rows.map((l) => JSON.parse(l) as { session_id: string; errors: { code: string }[] });
    expect(parsed.map((r) => [r.session_id, r.errors.map((e) => e.code)])).toEqual([[ids.failing, ["item_not_found"]]]);
    const table = (await duplex("sessions", "--data", dataDir, "--errors")).stdout.trim().split("\n");
    expect(table).toHaveLength(3);
    expect(table[1]?.startsWith(ids.failing ?? "?")).toBe(true);
    expect(table[2]).toMatch(/^ {2}revision \d+: item_not_found: /);
  });

  it("--slowest N lists the sessions whose slowest turn took longest to its first audio, with that time", async () => {
    const rows = (await duplex("sessions", "--data", dataDir, "--slowest", "5", "--json")).stdout.trim().split("\n");
    const parsed = rows.map((l) => JSON.parse(l) as { session_id: string; first_audio_worst_ms: number | null });
    // Only the answered session has a turn with audio.
    expect(parsed.map((r) => r.session_id)).toEqual([ids.answered]);
    expect(parsed[0]?.first_audio_worst_ms).toBeGreaterThanOrEqual(0);
  });

  it("show prints what happened (state, errors, history, playback) and with --turns the turn ledger; --json is the whole report", async () => {
    const json = JSON.parse((await duplex("show", ids.answered ?? "", "--data", dataDir, "--json")).stdout) as {
      session_id: string;
      state: string;
      responses: number;
      turns: { index: number; responseId: string; status: string }[];
      spans: { span: string; samples: number }[];
    };
    expect(json).toMatchObject({ session_id: ids.answered, state: "closed", responses: 1 });
    expect(json.turns).toHaveLength(1);
    expect(json.turns[0]).toMatchObject({ index: 1, status: "completed" });
    expect(json.spans.find((s) => s.span === "response_created_to_first_audio")?.samples).toBe(1);
    const text = (await duplex("show", "--last", "--data", dataDir, "--turns")).stdout.split("\n");
    expect(text[0]).toBe(`session ${ids.failing}  closed  model echo`);
    expect(text).toContain("errors:");
    expect(text.some((l) => /^ {2}revision \d+: item_not_found: /.test(l))).toBe(true);
    expect(text).toContain("turns (ms after the speech stopped, or after response.created without speech):");
    const answered = (await duplex("show", ids.answered ?? "", "--data", dataDir, "--turns")).stdout.split("\n");
    expect(answered).toContain("errors: none");
    expect(answered.find((l) => l.startsWith("     1  resp_"))).toMatch(/ completed /);
    await expect(duplex("show", "sess_nope", "--data", dataDir)).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining("no session sess_nope"),
    });
  });
});
