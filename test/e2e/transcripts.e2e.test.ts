import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { startScriptedServer } from "../support/server.ts";

/**
 * An input transcript lands on its own item (BEHAVIOUR.md, "Turn-taking"), over a real socket with the scripted
 * runner transcribing each commit 600 ms after it: two commits 300 ms apart get one transcript each, and a transcript
 * is not lost with a cancelled response's epoch.
 */
describe("input transcripts", () => {
  let server: Awaited<ReturnType<typeof startScriptedServer>>;
  beforeAll(async () => {
    server = await startScriptedServer([
      "name: transcripts",
      "when_exhausted: repeat_last",
      "turns:",
      "  - on: commit",
      '    actions: [{ wait_ms: 600 }, { input_transcript: "first words" }]',
      "  - on: commit",
      '    actions: [{ wait_ms: 600 }, { input_transcript: "second words" }]',
      "  - on: respond",
      '    actions: [{ speak: "An answer that takes a while to say." }, end_turn]',
    ]);
  });
  afterAll(async () => {
    await server.stop();
  });

  const open = async (): Promise<RealtimeClient> => {
    const client = await RealtimeClient.connect(`${server.url}?native_duplex=0`);
    client.send({ type: "session.update", session: { input_sample_rate_hz: 16000 } });
    await client.waitFor("session.updated", { since: 0 });
    return client;
  };
  const commit = async (client: RealtimeClient): Promise<string> => {
    const since = client.received.length;
    client.appendSamples(new Int16Array(3200), { sampleRateHz: 16000 });
    client.send({ type: "input_audio_buffer.commit" });
    return String((await client.waitFor("input_audio_buffer.committed", { since })).item_id);
  };
  const transcripts = (client: RealtimeClient) =>
    client.received
      .map((r) => r.event)
      .filter((e) => e.type === "conversation.item.input_audio_transcription.completed")
      .map((e) => [e.item_id, e.transcript]);

  it("two commits 300 ms apart each get their own transcript", async () => {
    const client = await open();
    const u1 = await commit(client);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const u2 = await commit(client);
    await expect.poll(() => transcripts(client).length, { timeout: 5000 }).toBe(2);
    expect(transcripts(client)).toEqual([
      [u1, "first words"],
      [u2, "second words"],
    ]);
    await client.close();
  });

  it("a transcript still arrives for its item after a response.create and a cancel 300 ms later", async () => {
    const client = await open();
    const u1 = await commit(client);
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    await new Promise((resolve) => setTimeout(resolve, 300));
    client.send({ type: "response.cancel" });
    await expect.poll(() => transcripts(client).length, { timeout: 5000 }).toBe(1);
    expect(transcripts(client)).toEqual([[u1, "first words"]]);
    await client.close();
  });
});
