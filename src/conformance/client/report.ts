import { readFileSync } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { RecordedEntry } from "../../engine/index.ts";
import { escapeMarkup } from "../../infra/escape-markup.ts";
import type { CaseResult } from "./harness.ts";

/**
 * The report of a graded client (issue 23): a table for the terminal, and in a folder a JSON file per case and an
 * index, a self-contained HTML matrix (one column per client graded into it), JUnit XML for CI, and each case's
 * session file with what the peer did (`<session>.case.json`), which `duplex conform --grade` grades again.
 */
export interface ClientReport {
  readonly agent: string;
  /** Whether the client declared itself duplex-aware: then the cases required of duplex clients count too. */
  readonly duplexAware: boolean;
  /** Profiles the client declared it does not do (kept with each session, for `--grade`). */
  readonly unsupported?: readonly string[];
  readonly results: readonly CaseResult[];
  /** When, by which server and with which command it was graded (absent in reports assembled by tests). */
  readonly run?: ReportRun;
}

/** When a client was graded, by which server, with which command (issue 33, part 5). */
export interface ReportRun {
  /** When grading ended: ISO 8601, UTC (`2025-01-31T12:00:00.000Z`). */
  readonly date: string;
  /** The grading server: `name` and `version` of its package.json. */
  readonly server: { readonly name: string; readonly version: string };
  /** The command line, its words as the shell split them (`["duplex", "conform", "--client", ...]`). */
  readonly command: readonly string[];
}

/**
 * The run of a report graded now (`at`, ms epoch) with `command`: the server's name and version from the package's
 * package.json. @throws the file system's error when package.json cannot be read.
 */
export const reportRunOf = (command: readonly string[], at: number = Date.now()): ReportRun => {
  const pkg = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as {
    name: string;
    version: string;
  };
  return { date: new Date(at).toISOString(), server: { name: pkg.name, version: pkg.version }, command };
};

/** `command` as one shell line: words with spaces or quotes single-quoted. */
export const commandLineOf = (command: readonly string[]): string =>
  command.map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", "'\\''")}'`)).join(" ");

/** Whether a case counts toward the exit code for this client. */
export const isRequired = (report: ClientReport, result: CaseResult): boolean =>
  result.required === "all" || report.duplexAware;

/**
 * Every required case passed (or is what the client declared it does not do). A required case that could not run
 * (harness-broken) is not counted against the client in the report, but it did not pass either: no exit 0 for it.
 */
export const requiredPassed = (report: ClientReport): boolean =>
  report.results.every(
    (r) => !isRequired(report, r) || ["pass", "non-strict", "informational", "unsupported"].includes(r.grade.verdict),
  );

const revisions = (r: CaseResult): string =>
  r.grade.evidence
    .map((e) => (e.revision === null ? `peer@${e.at_ms}ms` : `rev ${e.revision}`))
    .slice(0, 4)
    .join(", ");

/** The terminal table: case, required, verdict, why, the evidence's revisions. */
export const renderClientTable = (report: ClientReport): string => {
  const rows = report.results.map((r) => [
    r.id,
    isRequired(report, r) ? "required" : "optional",
    r.grade.verdict,
    r.grade.message,
    revisions(r),
  ]);
  rows.unshift(["case", "required", "verdict", "why", "log revisions"]);
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((row) => (row[i] ?? "").length), 8));
  const lines = rows.map((row) =>
    [...[0, 1, 2].map((i) => (row[i] ?? "").padEnd(widths[i] ?? 8)), `${row[3]} [${row[4]}]`].join("  "),
  );
  const verdict = requiredPassed(report)
    ? "every required case passed"
    : report.results.some((r) => isRequired(report, r) && r.grade.verdict === "fail")
      ? "a required case failed"
      : "a required case could not run";
  const run =
    report.run === undefined
      ? ""
      : `graded ${report.run.date} by ${report.run.server.name} ${report.run.server.version}: ${commandLineOf(report.run.command)}\n`;
  return `client: ${report.agent}${report.duplexAware ? " (duplex-aware)" : ""}\n${run}${lines.join("\n")}\n${verdict}\n`;
};

/**
 * JUnit XML: one test case per client case. A required case that failed is a failure, one that could not run
 * (harness-broken) an error, as the exit code counts them; unsupported cases and optional ones that could not run
 * are skipped; an optional case's failure is reported, not failed: CI goes red for required cases only.
 */
export const renderJUnit = (report: ClientReport): string => {
  const failed = (r: CaseResult) => r.grade.verdict === "fail" && isRequired(report, r);
  const errored = (r: CaseResult) => r.grade.verdict === "harness-broken" && isRequired(report, r);
  const failures = report.results.filter(failed).length;
  const errors = report.results.filter(errored).length;
  const skipped = report.results.filter(
    (r) => r.grade.verdict === "unsupported" || (r.grade.verdict === "harness-broken" && !errored(r)),
  ).length;
  const cases = report.results.map((r) => {
    const name = `name="${escapeMarkup(r.id)}" classname="duplex.conform.client.${escapeMarkup(report.agent)}"`;
    const body = failed(r)
      ? `<failure message="${escapeMarkup(r.grade.message)}">${escapeMarkup(revisions(r))}</failure>`
      : errored(r)
        ? `<error message="${escapeMarkup(`could not run: ${r.grade.message}`)}"/>`
        : r.grade.verdict === "unsupported" || r.grade.verdict === "harness-broken"
          ? `<skipped message="${escapeMarkup(`${r.grade.verdict}: ${r.grade.message}`)}"/>`
          : `<system-out>${escapeMarkup(`${r.grade.verdict}${isRequired(report, r) ? "" : " (optional)"}: ${r.grade.message}`)}</system-out>`;
    return `    <testcase ${name}>${body}</testcase>`;
  });
  return `<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="${escapeMarkup(report.agent)}" tests="${report.results.length}" failures="${failures}" errors="${errors}" skipped="${skipped}">\n${cases.join("\n")}\n</testsuite>\n`;
};

const COLOURS: Record<string, string> = {
  pass: "#cfc",
  "non-strict": "#efc",
  informational: "#def",
  unsupported: "#eee",
  fail: "#fcc",
  "harness-broken": "#ffd",
};

/** A self-contained HTML matrix of cases by clients (opens from disk: no script, no link). */
export const renderClientMatrix = (reports: readonly ClientReport[]): string => {
  const ids = [...new Set(reports.flatMap((r) => r.results.map((c) => c.id)))];
  const head = reports.map((r) => `<th>${escapeMarkup(r.agent)}</th>`).join("");
  const rows = ids.map((id) => {
    const rule = reports.flatMap((r) => r.results).find((c) => c.id === id)?.rule ?? "";
    const cells = reports
      .map((r) => {
        const c = r.results.find((one) => one.id === id);
        if (c === undefined) return "<td>-</td>";
        const required = isRequired(r, c) ? "" : " (optional)";
        return `<td style="background:${COLOURS[c.grade.verdict] ?? "#fff"}" title="${escapeMarkup(`${c.grade.message} [${revisions(c)}]`)}" data-verdict="${c.grade.verdict}">${c.grade.verdict}${required}<br><small>${escapeMarkup(c.grade.message)}</small></td>`;
      })
      .join("");
    return `<tr><th title="${escapeMarkup(rule)}">${escapeMarkup(id)}</th>${cells}</tr>`;
  });
  // The rules each client's sessions exercised, over every case.
  const exercised = reports
    .map((r) => `<td>${escapeMarkup([...new Set(r.results.flatMap((c) => c.grade.exercised))].join(", ") || "-")}</td>`)
    .join("");
  rows.push(`<tr id="exercised"><th>rules exercised</th>${exercised}</tr>`);
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>duplex client conformance</title><style>body{font:14px system-ui,sans-serif;margin:16px 20px}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left;max-width:320px}small{color:#444}</style></head><body><h1>client conformance</h1><table id="matrix"><tr><th>case</th>${head}</tr>${rows.join("")}</table></body></html>\n`;
};

/**
 * Writes `report` into `dir`: `index.json` (with the run's `date`, `server` {name, version}, `command` and
 * `command_line` when the report has its run), `cases/<id>.json`, `report.html`, `junit.xml`, and `sessions/` (each
 * case's session file and its `.case.json`). @throws the file system's error.
 */
export const writeClientReport = async (
  dir: string,
  report: ClientReport,
  logs: ReadonlyMap<string, readonly RecordedEntry[]>,
): Promise<void> => {
  const { renderSessionFile } = await import("../../infra/event-store/index.ts");
  const { streamOf } = await import("../../engine/index.ts");
  // A report folder used again holds this run only: an earlier run's cases and sessions go first.
  await rm(join(dir, "cases"), { recursive: true, force: true });
  await rm(join(dir, "sessions"), { recursive: true, force: true });
  await mkdir(join(dir, "cases"), { recursive: true });
  await mkdir(join(dir, "sessions"), { recursive: true });
  for (const r of report.results) {
    await writeFile(join(dir, "cases", `${r.id}.json`), `${JSON.stringify(r, null, 2)}\n`);
    const entries = r.session_id === null ? undefined : logs.get(r.session_id);
    if (r.session_id !== null && entries !== undefined && entries.length > 0) {
      await writeFile(
        join(dir, "sessions", `${r.session_id}.jsonl`),
        renderSessionFile(streamOf(r.session_id), entries),
      );
      await writeFile(
        join(dir, "sessions", `${r.session_id}.case.json`),
        `${JSON.stringify({ case: r.id, actions: r.actions, unsupported: report.unsupported ?? [] }, null, 2)}\n`,
      );
    }
  }
  const index = {
    agent: report.agent,
    ...(report.run === undefined
      ? {}
      : {
          date: report.run.date,
          server: report.run.server,
          command: report.run.command,
          command_line: commandLineOf(report.run.command),
        }),
    duplex_aware: report.duplexAware,
    required_passed: requiredPassed(report),
    cases: report.results.map((r) => ({
      id: r.id,
      profile: r.profile,
      required: isRequired(report, r),
      verdict: r.grade.verdict,
      message: r.grade.message,
      exercised: r.grade.exercised,
      session_id: r.session_id,
    })),
  };
  await writeFile(join(dir, "index.json"), `${JSON.stringify(index, null, 2)}\n`);
  await writeFile(join(dir, "report.html"), renderClientMatrix([report]));
  await writeFile(join(dir, "junit.xml"), renderJUnit(report));
};
