import { readdirSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { retagged, type StageOutput } from "../../src/domain/index.ts";
import type { RecordedEntry } from "../../src/engine/index.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import { createRecordedRunner } from "../../src/infra/runners/recorded.ts";
import { type EngineSession, openEngineSession } from "../support/engine-session.ts";
import { redriveThroughOwnRecording } from "../support/recorded-redrive.ts";

/**
 * The `recorded` runner (issue 35, part 2): a recorded session's model played back to a live session whose input
 * matches the recording. Every session of replays/ (the upstream chain's among them: a model behind another server,
 * recorded once) re-driven live through the recorded runner of itself behaves as recorded and is served the very
 * outputs its model gave; a live input that is not the recording's ends the session with `recording_diverged`,
 * naming where. The generated sessions of test/property are re-driven the same way, on every runner there.
 */
const FILES = readdirSync("replays").filter((f) => f.endsWith(".jsonl"));

const outputsOf = (entries: readonly RecordedEntry[]): StageOutput[] =>
  entries.filter((e) => e.type === "StageOutputReceived").map((e) => (e.data as { output: StageOutput }).output);

let session: EngineSession | null = null;
afterEach(async () => {
  await session?.close();
  session = null;
});

describe("the recorded runner", () => {
  it.each(FILES)(
    "plays %s back: the session re-driven through it behaves as recorded, served its outputs",
    async (file) => {
      const { entries } = await readSessionFile(`replays/${file}`);
      const { result, live } = await redriveThroughOwnRecording(entries);
      expect(result.divergence).toBeNull();
      expect(result.live.length).toBeGreaterThan(0);
      // Each output the recording's model gave, in order, naming the live session's items where it named the recorded's.
      const ids = [entries, live].map((e) => String((e[0]?.data as { sessionId?: string } | undefined)?.sessionId));
      const recorded = retagged(outputsOf(entries), String(ids[0]), String(ids[1]));
      expect(JSON.stringify(outputsOf(live))).toBe(JSON.stringify(recorded));
    },
    60_000,
  );

  it("ends a session whose input is not the recording's with recording_diverged, naming the call and both sides", async () => {
    const { entries } = await readSessionFile("replays/turn-lane-text.jsonl");
    session = await openEngineSession({ runner: createRecordedRunner(entries) });
    await session.send({ type: "session.update", session: { turn_detection: null } });
    await session.waitFor("session.updated");
    await session.send({
      type: "conversation.item.create",
      item: { type: "message", role: "user", content: [{ type: "input_text", text: "something else entirely" }] },
    });
    const error = await session.waitFor("error");
    expect(error.error).toMatchObject({
      type: "server_error",
      code: "recording_diverged",
      message: expect.stringMatching(
        /diverges from the recording at its runner call 1: it is text unit \(epoch 0, "something else entirely"\); the recording's is .+ at revision \d+ after its client input #\d+/,
      ),
    });
    expect(await session.waitFor("session.closed")).toMatchObject({ reason: "runner_failed" });
  });
});
