import type { CoverageOf } from "./coverage.ts";
import type { RunReport, ScenarioResult, ScenarioStatus } from "./runner.ts";
import { isOk } from "./runner.ts";
import type { Scenario } from "./scenario.ts";

/** Counts of a run by status. */
export interface Summary {
  readonly total: number;
  readonly passed: number;
  readonly failed: number;
  readonly known_failures: number;
  readonly unexpected_passes: number;
  readonly skipped: number;
  /** True when every scenario passed or was skipped for lack of a capability. */
  readonly ok: boolean;
}

/** The counts of a run. */
export const summarize = (results: readonly ScenarioResult[]): Summary => {
  const count = (status: ScenarioStatus) => results.filter((r) => r.status === status).length;
  return {
    total: results.length,
    passed: count("pass"),
    failed: count("fail"),
    known_failures: count("known_failure"),
    unexpected_passes: count("unexpected_pass"),
    skipped: count("skipped"),
    ok: results.every(isOk),
  };
};

/** The report for machines (`--json`): the run, its summary, every result with its failure, and the coverage. */
export const renderJson = (report: RunReport): string =>
  `${JSON.stringify(
    {
      url: report.url,
      server: { model: report.server.model, capabilities: report.server.session?.capabilities ?? null },
      summary: summarize(report.results),
      duration_ms: report.duration_ms,
      scenarios: report.results,
      coverage: report.coverage,
    },
    null,
    2,
  )}\n`;

const LABEL: Record<ScenarioStatus, string> = {
  pass: "PASS",
  fail: "FAIL",
  known_failure: "KNOWN",
  unexpected_pass: "FIXED?",
  skipped: "SKIP",
};

const coverageLine = (label: string, c: CoverageOf): string =>
  `  ${label}: ${c.covered.length}/${c.total}${c.missing.length === 0 ? "" : `; not covered: ${c.missing.join(", ")}`}`;

const indent = (text: string, by: string): string =>
  text
    .split("\n")
    .map((line) => `${by}${line}`)
    .join("\n");

/** Details of a failed (or known-failed) scenario: the step, why, what was expected and what was observed. */
const failureBlock = (result: ScenarioResult, n: number): string => {
  const f = result.failure;
  if (f === null) return "";
  const lines = [
    `${n}) ${result.name}${result.behaviour === null ? "" : ` (${result.behaviour})`}${result.status === "known_failure" ? ` [known failure: ${result.reason}]` : ""}`,
    `   step ${f.step} ${f.kind} on ${f.conn}: ${f.message}`,
  ];
  if (f.expected.length > 0) {
    lines.push("   expected:");
    for (const e of f.expected) lines.push(`     ${JSON.stringify(e)}`);
  }
  lines.push(`   observed (${f.observed.length} event(s)):`);
  const types = f.observed.map((o) => (o.seq === null ? o.type : `${o.type}#${o.seq}`));
  if (types.length > 0) lines.push(indent(wrap(types.join(", "), 110), "     "));
  for (const o of f.observed.filter((o) => o.json !== undefined)) lines.push(`     ${JSON.stringify(o.json)}`);
  return lines.join("\n");
};

/** Wraps a comma-separated list at `width` characters. */
const wrap = (text: string, width: number): string => {
  const out: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line.length + word.length + 1 > width && line !== "") {
      out.push(line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  if (line !== "") out.push(line);
  return out.join("\n");
};

/** The report for humans: a pass/fail table, each failure with expected and observed events, the coverage. */
export const renderTable = (report: RunReport): string => {
  const results = report.results;
  const nameWidth = Math.max(8, ...results.map((r) => r.name.length));
  const behaviourWidth = Math.max(9, ...results.map((r) => (r.behaviour ?? "").length));
  const out = [
    `duplex conform: ${report.url}${report.server.model === null ? "" : ` (model ${report.server.model})`}`,
    report.server.error === null ? "" : `probe session failed: ${report.server.error}`,
    "",
    `${"status".padEnd(7)} ${"scenario".padEnd(nameWidth)}  ${"behaviour".padEnd(behaviourWidth)}  ${"time".padStart(7)}  note`,
    ...results.map(
      (r) =>
        `${LABEL[r.status].padEnd(7)} ${r.name.padEnd(nameWidth)}  ${(r.behaviour ?? "").padEnd(behaviourWidth)}  ${`${r.duration_ms} ms`.padStart(7)}  ${r.reason ?? (r.failure === null ? "" : `step ${r.failure.step} ${r.failure.kind}`)}`,
    ),
  ].filter((line, i) => i !== 1 || line !== "");
  const failed = results.filter((r) => r.failure !== null);
  if (failed.length > 0) {
    out.push("", "Failures:");
    failed.forEach((r, i) => {
      out.push(failureBlock(r, i + 1));
    });
  }
  const c = report.coverage;
  out.push(
    "",
    "Coverage of the event catalogue:",
    coverageLine("server events observed", c.server),
    coverageLine("client events sent", c.client),
    coverageLine("client aliases sent", c.aliases),
  );
  if (c.unlisted.length > 0) out.push(`  server events not in the catalogue: ${c.unlisted.join(", ")}`);
  const s = summarize(results);
  if (s.skipped > 0)
    out.push(
      "",
      "Skipped scenarios need what this server lacks (a capability, or the reference peer's model); `duplex conform --serve` runs every one against our server with the reference peer.",
    );
  out.push(
    "",
    `${s.passed} passed, ${s.failed} failed, ${s.known_failures} known failure(s), ${s.unexpected_passes} unexpected pass(es), ${s.skipped} skipped, of ${s.total} (${(report.duration_ms / 1000).toFixed(1)} s)`,
  );
  return `${out.join("\n")}\n`;
};

/** The scenario list (`--list`, `--serve`): name, behaviour reference, requirements and description. */
export const renderList = (scenarios: readonly Scenario[]): string => {
  const nameWidth = Math.max(8, ...scenarios.map((s) => s.name.length));
  return `${scenarios
    .map((s) => {
      const tags = [
        s.behaviour,
        s.requires.capabilities === null ? null : `requires ${JSON.stringify(s.requires.capabilities)}`,
        s.requires.session === null ? null : `requires session ${JSON.stringify(s.requires.session)}`,
        s.knownFailure === null ? null : `known failure: ${s.knownFailure}`,
      ].filter((t) => t !== null);
      return `${s.name.padEnd(nameWidth)}  ${s.description}${tags.length === 0 ? "" : ` [${tags.join("; ")}]`}`;
    })
    .join("\n")}\n`;
};
