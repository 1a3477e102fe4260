import { readdir, readFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { parse } from "yaml";
import type { z } from "zod";
import { type RawStep, scenarioSchema, toStep } from "./scenario-schema.ts";

/**
 * Conformance scenarios (conformance/README.md): data, not code. A scenario file names the behaviour it checks,
 * what it needs of the server, and its steps; the runner (runner.ts) knows nothing about any particular scenario.
 * Files are validated strictly: an unknown key is an error that names the file and the path of the key.
 */

/** A partial JSON pattern (see pattern.ts). */
export type Pattern = unknown;

/** Audio streamed by `stream_audio`: a WAV of the audio folder, cut in `chunkMs` appends. Times in ms, rate in Hz. */
export interface AudioStream {
  readonly file: string;
  readonly chunkMs: number;
  /** `realtime`: one chunk every `chunkMs`; `fast`: as fast as the socket takes them. */
  readonly pace: "realtime" | "fast";
  /** Sample rate to send at (the file is resampled); absent: the file's own rate (8000 for G.711). */
  readonly rate: number | null;
  readonly format: "pcm16" | "g711_ulaw" | "g711_alaw" | "pcm_f32le";
  readonly silenceBeforeMs: number;
  readonly silenceAfterMs: number;
  /** Only the first `maxMs` of the file. */
  readonly maxMs: number | null;
  /** Extra fields of every append (templated); `type` replaces the event type (an alias such as `push_chunk`). */
  readonly fields: Readonly<Record<string, unknown>>;
}

/** One step of a scenario, on connection `conn` (default `main`). */
export type Step = { readonly conn: string; readonly line: string } & StepAction;

/** What a step does (conformance/README.md, "Steps"). Times in ms. */
export type StepAction =
  | { readonly kind: "connect"; readonly query: string | null }
  | { readonly kind: "send"; readonly event: Readonly<Record<string, unknown>> }
  | { readonly kind: "send_raw"; readonly text: string }
  | {
      readonly kind: "send_raw_generated";
      readonly prefix: string;
      readonly repeat: string;
      readonly bytes: number;
      readonly suffix: string;
    }
  | { readonly kind: "stream_audio"; readonly audio: AudioStream }
  | {
      readonly kind: "expect";
      readonly events: readonly Pattern[];
      readonly withinMs: number;
      /** The expected events are exactly the next events, in order. */
      readonly strict: boolean;
      /** The expected events may come in any order. */
      readonly anyOrder: boolean;
      /** None of these may come between the cursor and the last expected event. */
      readonly absent: readonly Pattern[];
    }
  | {
      readonly kind: "expect_absent";
      readonly events: readonly Pattern[];
      readonly forMs: number | null;
      readonly until: Pattern | null;
      readonly withinMs: number;
    }
  | {
      readonly kind: "expect_seq";
      readonly after: unknown;
      readonly until: Pattern;
      readonly withinMs: number;
      readonly unordered: readonly Pattern[];
    }
  | {
      readonly kind: "expect_cycle";
      readonly events: readonly Pattern[];
      readonly until: Pattern | null;
      readonly withinMs: number;
      readonly minCycles: number;
    }
  | { readonly kind: "capture"; readonly from: Pattern; readonly vars: Readonly<Record<string, string>> }
  | { readonly kind: "set"; readonly vars: Readonly<Record<string, unknown>> }
  | { readonly kind: "wait"; readonly ms: number }
  | { readonly kind: "drop_socket" }
  | { readonly kind: "reconnect"; readonly query: string | null }
  | { readonly kind: "repeat"; readonly times: unknown; readonly as: string; readonly steps: readonly Step[] };

/** A validated scenario. */
export interface Scenario {
  readonly name: string;
  readonly description: string;
  /** Where the behaviour is specified, e.g. "BEHAVIOUR.md scenario 7". */
  readonly behaviour: string | null;
  /** What the server must offer, else the scenario is skipped: patterns of session.created's session. */
  readonly requires: { readonly capabilities: Pattern | null; readonly session: Pattern | null };
  /** Variables and their defaults (overridable by the caller, e.g. `--var max_sessions=2`). */
  readonly vars: Readonly<Record<string, unknown>>;
  /** Known deviation of our server: the scenario is expected to fail, and the report says so. */
  readonly knownFailure: string | null;
  readonly timeoutMs: number;
  readonly steps: readonly Step[];
  /** The file it came from. */
  readonly file: string;
}

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
