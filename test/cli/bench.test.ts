import { describe, expect, it } from "vitest";
import { runBench } from "../../src/cli/bench.ts";

describe("duplex bench", () => {
  it("prints one JSON figure per recorded session for the replay bench, with its ratio to real time", async () => {
    const lines: Record<string, unknown>[] = [];
    await runBench({ audioDir: "../shared/audio", sessions: 1, print: (line) => lines.push(line) }, ["replay"]);
    expect(lines.length).toBeGreaterThanOrEqual(1);
    for (const line of lines) {
      expect(line).toMatchObject({ bench: "replay", ok: true });
      expect(String(line.meaning)).toContain("higher is better");
      expect(Number(line.decisions)).toBeGreaterThan(0);
      expect(Number.isFinite(Number(line.x_real_time))).toBe(true);
    }
  });
});

describe("duplex bench --only soak (short setting; the 2-hour figure is in docs/benchmarks.md)", () => {
  it("streams a conversation of real speech into a server process and prints its memory, answers and log size", async () => {
    const lines: Record<string, unknown>[] = [];
    await runBench(
      {
        audioDir: "../shared/audio",
        sessions: 1,
        soakSeconds: 60,
        soakLane: "turn",
        soakPattern: "conversation",
        print: (line) => lines.push(line),
      },
      ["soak"],
    );
    expect(lines).toHaveLength(1);
    const soak = lines[0] ?? {};
    expect(soak).toMatchObject({ bench: "soak", lane: "turn", audio_s: 60, pattern: "conversation" });
    expect(Number(soak.rss_mib_start)).toBeGreaterThan(0);
    expect(Number(soak.rss_mib_peak)).toBeGreaterThanOrEqual(Number(soak.rss_mib_end));
    // Utterances with room tone between: server VAD hears several, and in the turn lane each is answered.
    expect(Number(soak.utterances)).toBeGreaterThan(1);
    expect(Number(soak.responses)).toBeGreaterThan(0);
    // The log's figures come from the checkpointed file: audio is a part of it, and entries were counted.
    expect(Number(soak.store_audio_mb_per_session_hour)).toBeGreaterThan(0);
    expect(Number(soak.store_audio_mb_per_session_hour)).toBeLessThan(Number(soak.store_mb_per_session_hour));
    expect(Number(soak.store_entries_per_session_hour)).toBeGreaterThan(36_000);
  }, 120_000);
});
