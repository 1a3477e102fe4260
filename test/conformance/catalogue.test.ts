import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  isOk,
  loadScenarios,
  parseScenario,
  REFERENCE_PEER_SCRIPT,
  type RunReport,
  renderJson,
  renderTable,
  runScenario,
  runScenarios,
  SCENARIO_DIR,
} from "../../src/conformance/index.ts";
import { CLIENT_EVENTS, SERVER_EVENTS } from "../../src/protocol/index.ts";
import { startTestServer } from "../support/server.ts";

/**
 * The conformance catalogue (conformance/scenarios) against our own server with the reference peer
 * (conformance/reference-peer.yaml): every scenario passes or fails as its known_failure says, together they cover
 * the whole event catalogue, and the suite can fail.
 */
const scenarios = await loadScenarios(SCENARIO_DIR);
const run = promisify(execFile);

describe("conformance catalogue against our server", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let report: RunReport;

  beforeAll(async () => {
    server = await startTestServer({ runner: { kind: "scripted", script: REFERENCE_PEER_SCRIPT } });
    report = await runScenarios(scenarios, { url: server.url });
  }, 180_000);
  afterAll(async () => server?.stop());

  it("has a scenario for every BEHAVIOUR.md scenario but 14 (a server crash) and 15 (offline replay)", () => {
    const covered = new Set(
      scenarios.flatMap((s) =>
        [...(s.behaviour ?? "").matchAll(/BEHAVIOUR\.md scenario (\d+)/g)].map((m) => Number(m[1])),
      ),
    );
    expect([...covered].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 18]);
  });

  it.each(scenarios.map((s) => [s.name, s.knownFailure] as const))(
    "%s passes (or fails as its known_failure says)",
    (name, knownFailure) => {
      const result = report.results.find((r) => r.name === name);
      const details = result === undefined ? "no result" : renderTable({ ...report, results: [result] });
      expect(result?.status, details).toBe(knownFailure === null ? "pass" : "known_failure");
    },
  );

  it("leaves no session of ours open on the server", async () => {
    await expect.poll(() => server.engine.sessions().filter((s) => !s.isClosed).length).toBe(0);
  });

  it("observes every server event and sends every client event and alias of the catalogue", () => {
    expect(report.server.error).toBeNull();
    expect(report.coverage.server.total).toBe(SERVER_EVENTS.length);
    expect(report.coverage.server.missing).toEqual([]);
    expect(report.coverage.client.total).toBe(CLIENT_EVENTS.length);
    expect(report.coverage.client.missing).toEqual([]);
    expect(report.coverage.aliases.missing).toEqual([]);
    expect(report.coverage.unlisted).toEqual([]);
  });

  it("fails a wrong scenario with a report naming the step, the expected and the observed events", async () => {
    const wrong = parseScenario(
      `name: deliberately-wrong
description: expects a generation our server never gives a new session
steps:
  - send: { type: session.update, session: {} }
  - expect:
      within_ms: 300
      events: [{ type: session.created, attachment_generation: 2 }]
`,
      "deliberately-wrong",
    );
    const result = await runScenario(wrong, report.server, { url: server.url });
    expect(result.status).toBe("fail");
    expect(isOk(result)).toBe(false);
    expect(result.failure).toMatchObject({
      step: "2",
      kind: "expect",
      conn: "main",
      expected: [{ type: "session.created", attachment_generation: 2 }],
    });
    expect(result.failure?.message).toContain("attachment_generation: expected 2, got 1");
    expect(result.failure?.observed.map((o) => o.type)).toEqual(["session.created", "session.updated"]);
    expect(result.failure?.observed[0]?.json).toMatchObject({ type: "session.created", attachment_generation: 1 });

    const table = renderTable({ ...report, results: [result] });
    expect(table).toMatch(/FAIL\s+deliberately-wrong/);
    expect(table).toContain('{"type":"session.created","attachment_generation":2}');
    expect(table).toContain("session.created, session.updated#1");
    expect(table).toContain('"attachment_generation":1');
    const json = JSON.parse(renderJson({ ...report, results: [result] }));
    expect(json.summary).toMatchObject({ total: 1, failed: 1, ok: false });
    expect(json.scenarios[0].failure.expected).toEqual([{ type: "session.created", attachment_generation: 2 }]);
  });

  it("fails when an event that must not come comes, and reports a known failure that passes", async () => {
    const absent = parseScenario(
      `name: absent
description: forbids the session.updated that follows every session.update
steps:
  - send: { type: session.update, session: {} }
  - expect: { events: [{ type: session.updated }], absent: [{ type: session.created }] }
`,
      "absent",
    );
    const failed = await runScenario(absent, report.server, { url: server.url });
    expect(failed.status).toBe("fail");
    expect(failed.failure?.message).toContain("the first: session.created");
    expect(failed.failure?.expected).toEqual([{ $not: { type: "session.created" } }]);

    const fixed = parseScenario(
      `name: fixed
description: a known failure that passes
known_failure: it used to fail
steps:
  - send: { type: session.update, session: {} }
  - expect: [{ type: session.created }]
`,
      "fixed",
    );
    const result = await runScenario(fixed, report.server, { url: server.url });
    expect(result).toMatchObject({ status: "unexpected_pass", reason: "it used to fail", failure: null });
    expect(isOk(result)).toBe(false);
  });

  it("runs from the CLI: --json report, exit 0 only when every selected scenario passed, 2 for an unknown one", async () => {
    const cli = (args: string[]) =>
      run(process.execPath, ["bin/duplex.js", "conform", ...args], { cwd: process.cwd() }).then(
        (out) => ({ code: 0, stdout: out.stdout, stderr: out.stderr }),
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
    const passing = await cli(["--url", server.url, "--scenario", "session-open,commit-empty", "--json"]);
    expect(passing.code).toBe(0);
    expect(JSON.parse(passing.stdout).summary).toMatchObject({ total: 2, passed: 2, ok: true });
    const dir = await mkdtemp(join(tmpdir(), "conform-"));
    await writeFile(
      join(dir, "wrong.yaml"),
      "name: wrong\ndescription: expects an event the server never sends\nsteps:\n  - send: { type: session.update, session: {} }\n  - expect: { within_ms: 500, events: [{ type: session.nope }] }\n",
    );
    const failing = await cli(["--url", server.url, "--scenarios", dir]);
    await rm(dir, { recursive: true, force: true });
    expect(failing.code).toBe(1);
    expect(failing.stdout).toMatch(/FAIL\s+wrong/);
    expect(failing.stdout).toContain("session.nope");
    const unknown = await cli(["--url", server.url, "--scenario", "no-such-scenario"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("no scenario named no-such-scenario");
  });
});
