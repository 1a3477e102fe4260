import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  loadScenarios,
  REFERENCE_PEER_SCRIPT,
  type RunReport,
  renderTable,
  runScenarios,
  SCENARIO_DIR,
} from "../../src/conformance/index.ts";
import { CLIENT_EVENTS, SERVER_EVENTS } from "../../src/protocol/index.ts";
import { startTestServer } from "../support/server.ts";

/**
 * The conformance catalogue through a chain: server A (`runner: upstream`) in front of server B (our server with the
 * reference peer, as `duplex conform --serve` runs it). A decides everything a session shows; B's model only
 * supplies the model's outputs. With the duplex dialect every scenario passes; with the openai dialect (B in its
 * turn lane, as an OpenAI server is) every scenario passes but those that need a model-native model, which are
 * skipped because A's sessions say `implementation_level: turn_based`.
 */
const scenarios = await loadScenarios(SCENARIO_DIR);

describe.each([
  ["duplex", "", []],
  ["openai", "?native_duplex=0", ["model-listen", "native-answer", "speed-unsupported"]],
] as const)("conformance catalogue through an upstream chain (%s dialect)", (dialect, query, skipped) => {
  let a: Awaited<ReturnType<typeof startTestServer>>;
  let b: Awaited<ReturnType<typeof startTestServer>>;
  let report: RunReport;

  beforeAll(async () => {
    b = await startTestServer({
      runner: { kind: "scripted", script: REFERENCE_PEER_SCRIPT },
      duplex_session: { max_sessions: 16 },
    });
    a = await startTestServer({
      runner: { kind: "upstream", url: `${b.url}${query}`, dialect, model: "scripted:reference-peer" },
    });
    report = await runScenarios(scenarios, { url: a.url });
  }, 180_000);
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
  });

  it("passes every scenario, skipping only those that need what the dialect lacks", () => {
    const failed = report.results.filter((r) => r.status !== "pass" && r.status !== "skipped");
    expect(
      failed.map((r) => r.name),
      renderTable({ ...report, results: failed }),
    ).toEqual([]);
    expect(report.results.filter((r) => r.status === "skipped").map((r) => r.name)).toEqual(skipped);
  });

  it("observes every server event and sends every client event of the catalogue through A", () => {
    expect(report.coverage.server.missing).toEqual([]);
    expect(report.coverage.client.missing).toEqual([]);
    expect(report.coverage.server.covered).toHaveLength(SERVER_EVENTS.length);
    expect(report.coverage.client.covered).toHaveLength(CLIENT_EVENTS.length);
  });
});
