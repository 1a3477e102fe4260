import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { stepsOf } from "../../src/engine/index.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import { reportOf, timelineOf } from "../../src/replay/index.ts";

/**
 * One story per session (BEHAVIOUR.md, "The edges"; issue 33, part 3): what was played and heard of each response is
 * computed once (src/projections/playback-truth.ts), and the history, the playback ledger, the turn ledger and the
 * timeline (the session API and `duplex show` print the same report) agree on it, for clients that acknowledge
 * playback and for those that never do.
 */
const dir = join(process.cwd(), "replays");
const files = readdirSync(dir, { recursive: true, encoding: "utf8" })
  .filter((f) => f.endsWith(".jsonl"))
  .sort()
  .map((f) => join(dir, f));

describe("heard, in every view of a recorded session", () => {
  it.each(files.map((f) => [f.slice(dir.length + 1), f]))(
    "%s: history, playback, turns and timeline agree",
    async (_, file) => {
      const { entries } = await readSessionFile(file);
      const report = reportOf(entries);
      const timeline = timelineOf(entries);
      // History as kept (its last settlement of each item); the view drops an item heard too briefly for a word.
      const kept = new Map<string, { audioMs: number; text: string }>();
      for (const step of stepsOf(entries))
        for (const { envelope } of step.decisions)
          if (envelope.event.type === "HistoryCommitted")
            kept.set(envelope.event.data.item.id, envelope.event.data.item);
      for (const entry of report.playback) {
        const item = report.history.find((h) => h.id === entry.itemId);
        const heardInHistory = kept.get(entry.itemId)?.audioMs ?? 0;
        if (item === undefined) expect(kept.get(entry.itemId)?.text ?? "").toBe("");
        else expect(item.audioMs).toBe(heardInHistory);
        expect(entry.ledger.committedMs, `${entry.responseId}: playback ledger`).toBe(heardInHistory);
        const turn = report.turns.find((t) => t.responseId === entry.responseId);
        if (turn !== undefined) expect(turn.heardMs ?? 0, `${entry.responseId}: turn ledger`).toBe(heardInHistory);
        const drawn = timeline.responses.find((r) => r.id === entry.responseId);
        expect(drawn?.heard_ms ?? 0, `${entry.responseId}: timeline`).toBe(heardInHistory);
        expect(entry.ledger.playedMs, `${entry.responseId}: played covers heard`).toBeGreaterThanOrEqual(
          Math.min(heardInHistory, entry.ledger.sentMs),
        );
        expect(entry.ledger.playedMs).toBeLessThanOrEqual(entry.ledger.sentMs);
      }
    },
  );

  it("a client that never acks: the server's estimate is heard everywhere, not 0 ms beside a full transcript", async () => {
    const { entries } = await readSessionFile(join(dir, "turn-lane-two-responses.jsonl"));
    expect(entries.some((e) => (e.data as { command?: { type?: string } }).command?.type === "playback.ack")).toBe(
      false,
    );
    const report = reportOf(entries);
    const spoken = report.playback.filter((p) => p.ledger.sentMs > 0);
    expect(spoken.length).toBeGreaterThan(0);
    for (const p of spoken) {
      expect(p.source).toBe("estimated");
      expect(p.ledger.committedMs).toBeGreaterThan(0);
      const turn = report.turns.find((t) => t.responseId === p.responseId);
      expect(turn?.heardMs).toBe(p.ledger.committedMs);
      expect(report.history.find((h) => h.id === p.itemId)?.audioMs).toBe(p.ledger.committedMs);
    }
  });

  it("a client that acks: heard is its committed ms, played its played ms", async () => {
    const { entries } = await readSessionFile(join(dir, "question-echo.jsonl"));
    const report = reportOf(entries);
    const spoken = report.playback.filter((p) => p.ledger.sentMs > 0);
    expect(spoken.length).toBeGreaterThan(0);
    for (const p of spoken) expect(p.source).toBe("acked");
  });
});
