import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { startScriptedServer } from "../support/server.ts";

/**
 * A stalled model ends its response (BEHAVIOUR.md, "Defaults and limits": response_timeout_ms): a runner that opens
 * a response and then produces nothing. The response ends failed with `response_timeout`, the runner's epoch is
 * aborted, and the next turn works. Over a real socket, with the scripted runner.
 */
describe("response_timeout_ms", () => {
  let server: Awaited<ReturnType<typeof startScriptedServer>>;
  beforeAll(async () => {
    server = await startScriptedServer([
      "name: stall",
      "turns:",
      "  - on: respond",
      '    actions: [{ speak: "I will now go quiet" }, { wait_ms: 60000 }, end_turn]',
      "  - on: respond",
      '    actions: [{ speak: "Back again." }, end_turn]',
    ]);
  });
  afterAll(async () => {
    await server.stop();
  });

  it("a response with no model output for the session's response_timeout_ms ends failed, and the next turn works", async () => {
    const client = await RealtimeClient.connect(server.url);
    client.send({ type: "session.update", session: { extra_body: { response_timeout_ms: 400 } } });
    const updated = await client.waitFor("session.updated", { since: 0 });
    expect(updated.session).toMatchObject({ extra_body: { response_timeout_ms: 400 } });
    client.send({ type: "response.create" });
    const done = await client.waitFor("response.done", { since: 0, timeoutMs: 5000 });
    expect(done.response).toMatchObject({
      status: "failed",
      status_details: { reason: "response_timeout", error: { code: "response_timeout" } },
    });
    const since = client.received.length;
    client.send({ type: "response.create" });
    const transcript = await client.waitFor("response.output_audio_transcript.done", { since, timeoutMs: 5000 });
    expect(transcript.transcript).toBe("Back again.");
    // Nothing of the stalled turn came after its end (its epoch was aborted).
    const second = await client.waitFor("response.done", { since });
    expect(second.response).toMatchObject({ status: "completed" });
    const id = String(((client.received[0]?.event.session ?? {}) as { id?: string }).id);
    await client.close();
    expect(replayEntries(await server.store.read(streamOf(id))).ok).toBe(true);
  });
});
