import { describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { stepsOf, streamOf } from "../../src/engine/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { startTestServer } from "../support/server.ts";

/** The model's audio is in the log once (issue 10, part 4), and the session still replays byte for byte. */
describe("the model's audio in the log", () => {
  it("is stored with the runner's output only; the decision takes it back on reading", async () => {
    const server = await startTestServer();
    try {
      const client = await RealtimeClient.connect(server.url);
      const created = await client.waitFor("session.created", { since: 0 });
      const id = String((created.session as { id: string }).id);
      client.send({ type: "response.create", response: { instructions: "Answer." } });
      await client.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
      await client.close();

      const entries = await server.store.read(streamOf(id));
      const delivered = entries.filter((e) => e.type === "AudioDelivered");
      expect(delivered.length).toBeGreaterThan(0);
      for (const entry of delivered) expect((entry.data as { audio: unknown }).audio).toBe("input");

      const steps = stepsOf(entries).filter((s) => s.decisions.some((d) => d.envelope.event.type === "AudioDelivered"));
      expect(steps).toHaveLength(delivered.length);
      for (const step of steps) {
        const input = step.input;
        if (input.type !== "StageOutputReceived" || input.data.output.kind !== "audio") throw new Error(input.type);
        const event = step.decisions.find((d) => d.envelope.event.type === "AudioDelivered")?.envelope.event;
        expect(event?.type === "AudioDelivered" && Buffer.from(event.data.audio)).toEqual(
          Buffer.from(input.data.output.audio),
        );
      }
      expect(replayEntries(entries).divergence).toBeNull();
    } finally {
      await server.stop();
    }
  });
});
