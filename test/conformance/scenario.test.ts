import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  loadScenarios,
  parseScenario,
  SCENARIO_DIR,
  ScenarioError,
  selectScenarios,
} from "../../src/conformance/index.ts";

const FILE = "conformance/scenarios/x.yaml";

/** The message of the ScenarioError that parsing `yaml` throws. */
const refusal = (yaml: string): string => {
  try {
    parseScenario(yaml, FILE);
  } catch (error) {
    expect(error).toBeInstanceOf(ScenarioError);
    return (error as Error).message;
  }
  throw new Error("the scenario was accepted");
};

const head = "name: x\ndescription: d\nsteps:\n";

describe("scenario files", () => {
  it("read steps into their own spelling, with defaults, and short forms", () => {
    const scenario = parseScenario(
      `${head}  - send: { type: session.update }\n  - expect: [{ type: session.created }]\n  - conn: b\n    expect_absent: { events: [{ type: error }], for_ms: 100 }\n  - repeat: { times: 2, as: i, steps: [{ wait_ms: 1 }] }\n`,
      FILE,
    );
    expect(scenario).toMatchObject({ name: "x", behaviour: null, knownFailure: null, timeoutMs: 30_000, vars: {} });
    expect(scenario.steps).toEqual([
      { conn: "main", line: "1", kind: "send", event: { type: "session.update" } },
      {
        conn: "main",
        line: "2",
        kind: "expect",
        events: [{ type: "session.created" }],
        withinMs: 5000,
        strict: false,
        anyOrder: false,
        absent: [],
      },
      {
        conn: "b",
        line: "3",
        kind: "expect_absent",
        events: [{ type: "error" }],
        forMs: 100,
        until: null,
        withinMs: 5000,
      },
      {
        conn: "main",
        line: "4",
        kind: "repeat",
        times: 2,
        as: "i",
        steps: [{ conn: "main", line: "4.1", kind: "wait", ms: 1 }],
      },
    ]);
  });

  it("are refused with a message naming the file and the path of every bad key", () => {
    expect(refusal(`${head}  - expec: []\n`)).toContain(`${FILE} is invalid: steps[0].expec: unknown key`);
    expect(refusal(`${head}  - expect: { events: [{ type: a }], within: 3 }\n`)).toContain(
      "steps[0].expect.within: unknown key",
    );
    expect(refusal(`${head}  - expect: [3]\n`)).toContain("steps[0].expect.events[0]:");
    expect(refusal(`${head}  - send: { type: a }\n    expect: [{ type: b }]\n`)).toContain(
      "steps[0]: a step has exactly one of",
    );
    expect(refusal(`${head}  - repeat: { times: 2, as: i, steps: [{ sned: { type: a } }] }\n`)).toContain(
      "steps[0].repeat.steps[0].sned: unknown key",
    );
    expect(refusal(`${head}  - expect: [{ type: a, item: { id: { $exist: true } } }]\n`)).toContain(
      "steps[0].expect.events[0].item.id.$exist: unknown operator",
    );
    expect(refusal(`${head}  - expect_absent: { events: [{ type: a }] }\n`)).toContain(
      "steps[0].expect_absent: give exactly one of for_ms and until",
    );
    expect(refusal(`${head}  - stream_audio: { file: a.wav, pace: slow }\n`)).toContain("steps[0].stream_audio.pace:");
    expect(refusal(`${head}  - send: { event_id: a }\n`)).toContain(
      "steps[0].send: a client event needs a string `type`",
    );
    expect(refusal("name: y\ndescription: d\nsteps:\n  - wait_ms: 1\n")).toContain(
      'name: "y" differs from the file name "x"',
    );
    expect(refusal("name: x\nsteps: [\n")).toContain(`${FILE} is not valid YAML`);
  });

  it("load a folder sorted by name, and select by name or comma-separated lists", async () => {
    const dir = await mkdtemp(join(tmpdir(), "conform-"));
    try {
      for (const name of ["b", "a", "c"])
        await writeFile(join(dir, `${name}.yaml`), `name: ${name}\ndescription: d\nsteps:\n  - wait_ms: 1\n`);
      const all = await loadScenarios(dir);
      expect(all.map((s) => s.name)).toEqual(["a", "b", "c"]);
      expect(selectScenarios(all, ["c,a"]).map((s) => s.name)).toEqual(["a", "c"]);
      expect(selectScenarios(all, ["b", "a"]).map((s) => s.name)).toEqual(["a", "b"]);
      expect(selectScenarios(all, []).map((s) => s.name)).toEqual(["a", "b", "c"]);
      expect(() => selectScenarios(all, ["a,zz"])).toThrow(/no scenario named zz/);
      await writeFile(join(dir, "d.yaml"), "name: d\ndescription: d\nsteps: []\n");
      await expect(loadScenarios(dir)).rejects.toThrow(/d\.yaml is invalid: steps:/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("of the catalogue all validate", async () => {
    const all = await loadScenarios(SCENARIO_DIR);
    expect(all.length).toBeGreaterThanOrEqual(30);
  });
});
