import { readdir, readFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { parse } from "yaml";
import type { z } from "zod";
import { type RawStep, scenarioSchema, toStep } from "./scenario-schema.ts";
import type { Scenario } from "./scenario-types.ts";

/**
 * Conformance scenarios (conformance/README.md): data, not code. A scenario file names the behaviour it checks,
 * what it needs of the server, and its steps; the runner (runner.ts) knows nothing about any particular scenario.
 * Files are validated strictly: an unknown key is an error that names the file and the path of the key.
 */

export type { AudioStream, Pattern, Scenario, Step, StepAction } from "./scenario-types.ts";

/** Thrown when a scenario file cannot be read or does not validate; `message` names the file and every bad key. */
export class ScenarioError extends Error {
  readonly code = "scenario_invalid";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ScenarioError";
  }
}

/** `steps.3.expect.events.0` -> `steps[3].expect.events[0]`. */
const formatPath = (path: readonly PropertyKey[]): string =>
  path.reduce<string>(
    (out, key) => (typeof key === "number" ? `${out}[${key}]` : out === "" ? String(key) : `${out}.${String(key)}`),
    "",
  );

const describeIssue = (issue: z.core.$ZodIssue): string => {
  const where = formatPath(issue.path);
  if (issue.code === "unrecognized_keys")
    return issue.keys.map((key) => `${where === "" ? key : `${where}.${key}`}: unknown key`).join("; ");
  return `${where === "" ? "(root)" : where}: ${issue.message}`;
};

/**
 * Validates a parsed scenario.
 * @param file what it came from, for messages; its base name without `.yaml` must be the scenario's name.
 * @throws ScenarioError naming the file and the path of every bad key (`steps[2].expect[0]: ...`).
 */
export const validateScenario = (value: unknown, file: string): Scenario => {
  const parsed = scenarioSchema.safeParse(value);
  if (!parsed.success) {
    throw new ScenarioError(`${file} is invalid: ${parsed.error.issues.map(describeIssue).join("; ")}`);
  }
  const raw = parsed.data;
  const stem = basename(file).replace(/\.ya?ml$/, "");
  if (file.endsWith(".yaml") && stem !== raw.name) {
    throw new ScenarioError(`${file} is invalid: name: "${raw.name}" differs from the file name "${stem}"`);
  }
  return {
    name: raw.name,
    description: raw.description,
    behaviour: raw.behaviour ?? null,
    requires: { capabilities: raw.requires?.capabilities ?? null, session: raw.requires?.session ?? null },
    vars: raw.vars ?? {},
    knownFailure: raw.known_failure ?? null,
    timeoutMs: raw.timeout_ms,
    steps: (raw.steps as RawStep[]).map((s, i) => toStep(s, String(i + 1))),
    file,
  };
};

/**
 * Parses and validates a scenario written in YAML.
 * @throws ScenarioError when the text is not YAML or the scenario does not validate.
 */
export const parseScenario = (text: string, file = "scenario"): Scenario => {
  let value: unknown;
  try {
    value = parse(text);
  } catch (error) {
    throw new ScenarioError(`${file} is not valid YAML: ${(error as Error).message}`, { cause: error });
  }
  return validateScenario(value, file);
};

/**
 * Reads every `*.yaml` of `dir`, sorted by file name.
 * @throws ScenarioError when the folder or a file cannot be read, a file is invalid, or two share a name.
 */
export const loadScenarios = async (dir: string): Promise<Scenario[]> => {
  let files: string[];
  try {
    files = (await readdir(dir)).filter((f) => f.endsWith(".yaml")).sort();
  } catch (error) {
    throw new ScenarioError(`cannot read the scenario folder ${dir}: ${(error as Error).message}`, { cause: error });
  }
  const scenarios: Scenario[] = [];
  for (const file of files) {
    const path = join(dir, file);
    let text: string;
    try {
      text = await readFile(path, "utf8");
    } catch (error) {
      throw new ScenarioError(`cannot read ${path}: ${(error as Error).message}`, { cause: error });
    }
    scenarios.push(parseScenario(text, path));
  }
  return scenarios;
};

/**
 * The scenarios named in `names` (each may be a comma-separated list), in catalogue order; all when empty.
 * @throws ScenarioError naming the unknown names.
 */
export const selectScenarios = (all: readonly Scenario[], names: readonly string[]): Scenario[] => {
  const wanted = names
    .flatMap((n) => n.split(","))
    .map((n) => n.trim())
    .filter((n) => n !== "");
  if (wanted.length === 0) return [...all];
  const unknown = wanted.filter((n) => !all.some((s) => s.name === n));
  if (unknown.length > 0) {
    throw new ScenarioError(`no scenario named ${unknown.join(", ")} (known: ${all.map((s) => s.name).join(", ")})`);
  }
  return all.filter((s) => wanted.includes(s.name));
};
