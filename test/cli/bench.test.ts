import { describe, expect, it } from "vitest";
import { runBench } from "../../src/cli/bench.ts";

describe("duplex bench", () => {
  it("prints one JSON figure per recorded session for the replay bench, with its ratio to real time", async () => {
    const lines: Record<string, unknown>[] = [];
    await runBench({ audioDir: "../shared/audio", sessions: 1, print: (line) => lines.push(line) }, ["replay"]);
    expect(lines.length).toBeGreaterThanOrEqual(1);
    for (const line of lines) {
      expect(line).toMatchObject({ bench: "replay", ok: true });
      expect(Number(line.decisions)).toBeGreaterThan(0);
      expect(Number.isFinite(Number(line.x_real_time))).toBe(true);
    }
  });
});
