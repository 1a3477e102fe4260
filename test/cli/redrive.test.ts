import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { writeSessionFile } from "../../src/infra/event-store/index.ts";
import { startTestServer } from "../support/server.ts";

/**
 * `duplex replay FILE --runner CONFIG` (the real command in a child process): a recorded session's client inputs
 * re-driven against a live runner; the same model behaves the same (exit 0), another one differs, and the report
 * names the first line that differs with the lines around it (exit 1).
 */
const run = promisify(execFile);

describe("duplex replay FILE --runner CONFIG", () => {
  let dir = "";
  let file = "";
  const configFor = async (script: string): Promise<string> => {
    const path = join(dir, `${script}.deploy.yaml`);
    await writeFile(path, `runner:\n  kind: scripted\n  script: ${join(process.cwd(), "deploy/scripts", script)}\n`);
    return path;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "duplex-redrive-test-"));
    const server = await startTestServer({ runner: { kind: "scripted", script: "deploy/scripts/greeting.yaml" } });
    try {
      const client = await RealtimeClient.connect(server.url);
      client.send({ type: "session.update", session: {} });
      const created = await client.waitFor("session.created", { since: 0 });
      client.send({
        type: "conversation.item.create",
        item: { type: "message", role: "user", content: [{ type: "input_text", text: "what now?" }] },
      });
      client.send({ type: "response.create", response: { instructions: "Answer." } });
      await client.waitFor("response.done", { since: 0 });
      client.send({ type: "session.close" });
      await client.waitFor("session.closed", { since: 0 });
      const id = String((created.session as { id: string }).id);
      file = join(dir, "session.jsonl");
      await writeSessionFile(file, streamOf(id), await server.store.read(streamOf(id)));
    } finally {
      await server.stop();
    }
  }, 30_000);
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it("reports the same behaviour against the model that was recorded", async () => {
    const config = await configFor("greeting.yaml");
    const { stdout } = await run(process.execPath, [
      "bin/duplex.js",
      "replay",
      file,
      "--runner",
      config,
      "--speed",
      "inf",
    ]);
    expect(stdout).toMatch(/same behaviour \(4 client inputs, \d+ behaviour lines\)/);
  }, 30_000);

  it("re-drives a recorded session of real speech, barge-in and resume against the live echo runner", async () => {
    const { stdout } = await run(process.execPath, [
      "bin/duplex.js",
      "replay",
      "replays/barge-in-resume.jsonl",
      "--runner",
      "deploy/embedded.yaml",
      "--speed",
      "2",
    ]);
    expect(stdout).toMatch(/against echo: same behaviour \(84 client inputs, 18 behaviour lines\)/);
  }, 60_000);

  it("re-drives the upstream chain's recorded session through its own model played back (--runner recorded)", async () => {
    const { stdout } = await run(process.execPath, [
      "bin/duplex.js",
      "replay",
      "replays/upstream-chain-tool-call.jsonl",
      "--runner",
      "recorded",
      "--speed",
      "inf",
    ]);
    expect(stdout).toMatch(/against recorded: same behaviour \(\d+ client inputs, [1-9]\d* behaviour lines\)/);
  }, 60_000);

  it("reports where another model differs, with the lines around it, and exits 1", async () => {
    const config = await configFor("tools.yaml");
    const failed = await run(process.execPath, [
      "bin/duplex.js",
      "replay",
      file,
      "--runner",
      config,
      "--speed",
      "inf",
    ]).then(
      () => null,
      (error: { code: number; stdout: string }) => error,
    );
    expect(failed?.code).toBe(1);
    const lines = failed?.stdout.split("\n") ?? [];
    expect(lines[0]).toMatch(/DIFFERS at behaviour line \d+/);
    expect(lines[1]).toBe("  recorded: #3 MessageStarted");
    expect(lines[2]).toBe("  live:     #3 FunctionCallDelivered get_weather");
    expect(lines).toContain("  recorded around it:");
    expect(lines.some((l) => l.trim() === "#3 ResponseStarted")).toBe(true);
  }, 30_000);
});
