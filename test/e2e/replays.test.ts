import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { evolve, initialState } from "../../src/domain/index.ts";
import { replayEntries, stepsOf } from "../../src/engine/index.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import { toHistory } from "../../src/projections/index.ts";

/** Every recorded session under replays/ replays offline to the same domain and wire events (BEHAVIOUR.md, 15). */
const dir = join(process.cwd(), "replays");
const files = readdirSync(dir).filter((f) => f.endsWith(".jsonl"));

describe("recorded sessions", () => {
  it("there is at least one recorded session to replay", () => {
    expect(files.length).toBeGreaterThanOrEqual(1);
  });

  it.each(files)("%s replays byte for byte", async (file) => {
    const { entries, header } = await readSessionFile(join(dir, file));
    expect(header.entries).toBe(entries.length);
    const result = replayEntries(entries);
    expect(result.divergence).toBeNull();
    expect(result.ok).toBe(true);
    expect(result.decisions).toBe(entries.length - stepsOf(entries).length);
    expect(result.state.phase).toBe("closed");
  });

  it.each(files)("%s: the projections fold to the state the replay reached", async (file) => {
    const { entries } = await readSessionFile(join(dir, file));
    const steps = stepsOf(entries);
    const folded = steps
      .flatMap((s) => s.decisions)
      .reduce((state, d) => evolve(state, d.envelope.event), initialState);
    const replayed = replayEntries(entries).state;
    expect(folded).toEqual(replayed);
    const assistant = toHistory(replayed).filter((h) => h.role === "assistant");
    expect(assistant.length).toBeGreaterThanOrEqual(1);
    const ended = steps.flatMap((s) => s.decisions).filter((d) => d.envelope.event.type === "ResponseEnded");
    const cancelled = ended.filter((d) => (d.envelope.event.data as { status: string }).status === "cancelled");
    // A completed answer whose playback was acknowledged is complete in history; a cancelled one is not.
    expect(assistant.filter((h) => h.status === "completed").length).toBe(ended.length - cancelled.length);
  });
});
