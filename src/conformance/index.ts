/**
 * The conformance suite (DESIGN.md, "Three consumers"): wire-contract scenarios written as data
 * (conformance/scenarios/*.yaml), a generic runner that plays them against any server, the report, and the
 * `duplex conform` command.
 */
export { registerConformCommand } from "./cli.ts";
export { type Coverage, type CoverageOf, coverageOf } from "./coverage.ts";
export { AUDIO_DIR, REFERENCE_PEER_SCRIPT, SCENARIO_DIR } from "./files.ts";
export { elide, fill, matches, mismatch, PatternError, unknownOperators, valueAt } from "./pattern.ts";
export { renderJson, renderList, renderTable, type Summary, summarize } from "./report.ts";
export {
  isOk,
  probeServer,
  type RunOptions,
  type RunReport,
  runScenario,
  runScenarios,
  type ScenarioResult,
  type ScenarioStatus,
  type ServerInfo,
} from "./runner.ts";
export {
  loadScenarios,
  parseScenario,
  type Scenario,
  ScenarioError,
  type Step,
  selectScenarios,
  validateScenario,
} from "./scenario.ts";
