import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient, type ServerEvent } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { startScriptedServer } from "../support/server.ts";

/**
 * `response.listen` (reference, "Server events": "Carries response_id when the decision terminates a precreated
 * response (a response.done with the same id follows); otherwise no response.created precedes it"; issue 33,
 * part 3): a client can tell which response was the listen decision. Over a real socket, the scripted runner
 * deciding to listen.
 */
describe("response.listen", () => {
  let server: Awaited<ReturnType<typeof startScriptedServer>>;
  beforeAll(async () => {
    server = await startScriptedServer([
      "name: listens",
      "when_exhausted: repeat_last",
      "turns:",
      "  - on: respond",
      "    actions: [{ listen: model_listen }]",
      "  - on: commit",
      "    actions: [{ listen: silence }]",
    ]);
  });
  afterAll(async () => {
    await server.stop();
  });

  const open = async (): Promise<{ client: RealtimeClient; sessionId: string }> => {
    const client = await RealtimeClient.connect(server.url);
    client.send({ type: "session.update", session: { turn_detection: null } });
    const created = await client.waitFor("session.created", { since: 0 });
    await client.waitFor("session.updated", { since: 0 });
    return { client, sessionId: String((created.session as { id: string }).id) };
  };
  const types = (client: RealtimeClient): string[] => client.received.map((r) => r.event.type);

  it("that ends a precreated response names it, with the epoch, and its response.done follows", async () => {
    const { client, sessionId } = await open();
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    const created = await client.waitFor("response.created", { since: 0 });
    const id = (created.response as { id: string }).id;
    const listen = await client.waitFor("response.listen", { since: 0 });
    const done = await client.waitFor("response.done", { since: 0 });
    expect(listen).toMatchObject({
      type: "response.listen",
      session_id: sessionId,
      response_id: id,
      epoch: 0,
      response: {
        object: "realtime.response",
        id,
        status: "listening",
        metadata: { type: "response.listen", session_id: sessionId, epoch: 0, reason: "model_listen" },
      },
    });
    expect((done.response as { id: string }).id).toBe(id);
    const order = types(client);
    expect(order.indexOf("response.created")).toBeLessThan(order.indexOf("response.listen"));
    expect(order.indexOf("response.listen")).toBeLessThan(order.indexOf("response.done"));
    client.close();
    const entries = await server.store.read(streamOf(sessionId));
    expect(replayEntries(entries).divergence).toBeNull();
  });

  it("with no response open names none, and no response.created precedes it", async () => {
    const { client, sessionId } = await open();
    client.appendSamples(new Int16Array(4800), { sampleRateHz: 24000 });
    client.send({ type: "input_audio_buffer.commit" });
    const listen: ServerEvent = await client.waitFor("response.listen", { since: 0 });
    expect(listen.type).toBe("response.listen");
    expect(listen.epoch).toBe(0);
    expect("response_id" in listen).toBe(false);
    expect("id" in (listen.response as object)).toBe(false);
    expect(types(client)).not.toContain("response.created");
    client.close();
    const entries = await server.store.read(streamOf(sessionId));
    expect(replayEntries(entries).divergence).toBeNull();
  });
});
