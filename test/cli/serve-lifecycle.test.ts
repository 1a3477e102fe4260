import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, SERVE_NODE_FLAGS, startServerProcess } from "../../src/cli/server-process.ts";
import { RealtimeClient } from "../../src/client/index.ts";

/**
 * The server's lifecycle as a user drives it (issue 9, "The server's lifecycle"): `npm start` passes SIGTERM to the
 * server process, which logs that it shuts down, closes every socket with 1012 and a reason, and frees the port.
 */
describe("npm start", () => {
  let dir = "";
  let child: ChildProcess | null = null;
  afterAll(async () => {
    child?.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  });

  it("passes SIGTERM to the server: 'shutting down', sockets closed with 1012 and a reason, the port freed", async () => {
    dir = await mkdtemp(join(tmpdir(), "duplex-npm-start-"));
    const port = await freePort();
    const npm = spawn("npm", ["start", "--silent", "--", "--port", String(port), "--data", dir], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    child = npm;
    let out = "";
    npm.stdout?.on("data", (b: Buffer) => {
      out += b.toString();
    });
    npm.stderr?.on("data", (b: Buffer) => {
      out += b.toString();
    });
    await expect.poll(() => out.includes("duplex server listening"), { timeout: 30_000 }).toBe(true);
    const url = `ws://127.0.0.1:${port}/v1/realtime`;
    const client = await RealtimeClient.connect(url);
    await client.waitFor("session.created", { since: 0 });
    const exited = new Promise<number | null>((resolve) => npm.once("exit", (code) => resolve(code)));
    npm.kill("SIGTERM");
    const closed = await client.closed;
    expect(closed.code).toBe(1012);
    expect(closed.reason).toContain("shutting down");
    expect(await exited).toBe(0);
    expect(out).toContain("shutting down");
    // Nothing holds the port any more.
    await expect(RealtimeClient.connect(url)).rejects.toMatchObject({ code: "ECONNREFUSED" });
  }, 60_000);

  it("logs each lifecycle event at info, requests only at debug, and never a token", async () => {
    const port = await freePort();
    const data = await mkdtemp(join(tmpdir(), "duplex-logs-"));
    const { child: server, stdout } = await startServerProcess(port, data, 30_000);
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    const client = await RealtimeClient.connect(`ws://127.0.0.1:${port}/v1/realtime`);
    const created = await client.waitFor("session.created", { since: 0 });
    client.send({ type: "session.close" });
    await client.closed;
    const exited = new Promise((resolve) => server.once("exit", resolve));
    server.kill("SIGTERM");
    await exited;
    await rm(data, { recursive: true, force: true });
    const out = stdout();
    const lines = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { level: number; msg: string; sessionId?: string; reason?: string; url?: string });
    const id = (created.session as { id: string }).id;
    expect(lines.filter((l) => l.sessionId === id).map((l) => [l.level, l.msg, l.reason ?? null])).toEqual([
      [30, "session opened", null],
      [30, "session closed", "session_close"],
    ]);
    expect(lines.some((l) => l.url === "/health")).toBe(false);
    expect(out).not.toContain(String(created.resume_token));
    expect(lines.map((l) => l.msg)).toContain("shutting down");
  }, 60_000);
});

describe("the server's Node.js flags", () => {
  it("are the same for npm start, the duplex command and the processes the benchmarks start", async () => {
    expect(SERVE_NODE_FLAGS.length).toBeGreaterThan(0);
    const start = (JSON.parse(await readFile("package.json", "utf8")) as { scripts: { start: string } }).scripts.start;
    const shebang = (await readFile("bin/duplex.js", "utf8")).split("\n")[0];
    expect(start).toBe(`exec node ${SERVE_NODE_FLAGS.join(" ")} bin/duplex.js serve`);
    expect(shebang).toBe(`#!/usr/bin/env -S node ${SERVE_NODE_FLAGS.join(" ")}`);
    const dir = await mkdtemp(join(tmpdir(), "duplex-flags-"));
    const server = await startServerProcess(await freePort(), dir);
    try {
      const cmdline = (await readFile(`/proc/${server.child.pid}/cmdline`, "utf8")).split("\0");
      expect(cmdline.slice(1, 1 + SERVE_NODE_FLAGS.length)).toEqual([...SERVE_NODE_FLAGS]);
    } finally {
      server.child.kill("SIGTERM");
      await new Promise((resolve) => server.child.once("exit", resolve));
      await rm(dir, { recursive: true, force: true });
    }
  });
});
