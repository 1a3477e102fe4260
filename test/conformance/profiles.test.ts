import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadScenarios, type RunReport, renderTable, runScenarios, SCENARIO_DIR } from "../../src/conformance/index.ts";
import { loadConfig } from "../../src/infra/config.ts";
import { startTestServer } from "../support/server.ts";

/**
 * The conformance catalogue against a gated model profile (deploy/personaplex.yaml: no barge-in, no resume, no
 * truncation): every scenario either passes or is skipped because it requires what the profile lacks; none fails
 * on a refusal the capability table asks for.
 */
const scenarios = await loadScenarios(SCENARIO_DIR);

describe("conformance catalogue against the personaplex profile", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let report: RunReport;
  beforeAll(async () => {
    const config = await loadConfig(new URL("../../deploy/personaplex.yaml", import.meta.url).pathname);
    server = await startTestServer({ runner: config.runner });
    report = await runScenarios(scenarios, { url: server.url });
  }, 180_000);
  afterAll(async () => server?.stop());

  it("fails no scenario, and skips exactly those that need barge-in, resume, truncation, tools or the reference peer", () => {
    const failed = report.results.filter((r) => r.status !== "pass" && r.status !== "skipped");
    expect(
      failed.map((r) => r.name),
      renderTable({ ...report, results: failed }),
    ).toEqual([]);
    const skipped = report.results.filter((r) => r.status === "skipped");
    for (const result of skipped) {
      expect(result.reason ?? "").toMatch(
        /supports_barge_in|supports_session_resume|supports_audio_truncate|supports_tool_calls|scripted:reference-peer/,
      );
    }
    expect(report.results.filter((r) => r.status === "pass").length).toBeGreaterThanOrEqual(15);
  });
});
