import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { startTestServer } from "../support/server.ts";

/**
 * A session opens when the socket opens (BEHAVIOUR.md, "Identity", ours): `session.created` is sent at once, as
 * OpenAI's servers do, so a client that waits for it before its first `session.update` (Pipecat's OpenAI realtime
 * service does) is served; a first `session.resume` still resumes, and the session opened on connect ends unused.
 */
describe("a session opened on connect", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  beforeAll(async () => {
    server = await startTestServer({ duplex_session: { max_sessions: 8 } });
  });
  afterAll(async () => server.stop());

  const isOpen = (id: string) => server.engine.sessions().some((s) => s.sessionId === id && !s.isClosed);

  it("sends session.created before the client says anything; the first session.update is answered with session.updated", async () => {
    const client = await RealtimeClient.connect(server.url);
    const created = await client.waitFor("session.created", { since: 0 });
    expect(client.types()).toEqual(["session.created"]);
    expect(created.session).toMatchObject({ id: expect.stringMatching(/^sess_/), object: "realtime.session" });
    client.send({ type: "session.update", session: { instructions: "Be brief." } });
    const updated = await client.waitFor("session.updated", { since: 0 });
    expect(updated.session).toMatchObject({ id: (created.session as { id: string }).id, instructions: "Be brief." });
    expect(client.types()).toEqual(["session.created", "session.updated"]);
    client.send({ type: "session.close" });
    await client.closed;
  });

  it("resumes on a first session.resume: the session opened on connect ends unused and holds no capacity", async () => {
    const first = await RealtimeClient.connect(server.url);
    const created = await first.waitFor("session.created", { since: 0 });
    const id = (created.session as { id: string }).id;
    first.send({ type: "session.update", session: {} });
    await first.waitFor("session.updated", { since: 0 });
    await first.terminate();
    const again = await RealtimeClient.connect(server.url);
    const fresh = await again.waitFor("session.created", { since: 0 });
    const freshId = (fresh.session as { id: string }).id;
    expect(freshId).not.toBe(id);
    again.send({
      type: "session.resume",
      session_id: id,
      resume_token: created.resume_token,
      last_received_server_event_seq: again.lastSeq(),
    });
    const resumed = await again.waitFor("session.resumed", { since: 0 });
    expect(resumed).toMatchObject({ session_id: id, attachment_generation: 2 });
    await expect.poll(() => isOpen(freshId)).toBe(false);
    expect(isOpen(id)).toBe(true);
    // The socket carries the resumed session.
    again.send({ type: "session.heartbeat" });
    expect(await again.waitFor("session.heartbeat_ack")).toMatchObject({ session_id: id });
    again.send({ type: "session.close" });
    await again.closed;
  });

  it("closes a session whose socket went away before saying anything: nothing to resume, no capacity held", async () => {
    const client = await RealtimeClient.connect(server.url);
    const id = ((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id;
    await client.close();
    await expect.poll(() => isOpen(id)).toBe(false);
  });

  it("at capacity sends no session.created: a first session.resume still resumes, anything else is resource_exhausted", async () => {
    const small = await startTestServer({ duplex_session: { max_sessions: 2 } });
    const holders = [await RealtimeClient.connect(small.url), await RealtimeClient.connect(small.url)];
    const tokens: { id: string; token: string }[] = [];
    for (const h of holders) {
      const created = await h.waitFor("session.created", { since: 0 });
      tokens.push({ id: (created.session as { id: string }).id, token: String(created.resume_token) });
      h.send({ type: "session.update", session: {} });
      await h.waitFor("session.updated", { since: 0 });
    }
    await holders[0]?.terminate();
    const over = await RealtimeClient.connect(small.url);
    over.send({ type: "session.update", session: {} });
    expect(await over.waitFor("error", { since: 0 })).toMatchObject({ code: "resource_exhausted" });
    expect(over.types()).toEqual(["error"]);
    expect((await over.closed).code).toBe(1013);
    const back = await RealtimeClient.connect(small.url);
    back.send({
      type: "session.resume",
      session_id: tokens[0]?.id,
      resume_token: tokens[0]?.token,
      last_received_server_event_seq: 0,
    });
    expect(await back.waitFor("session.resumed", { since: 0 })).toMatchObject({ session_id: tokens[0]?.id });
    for (const c of [back, holders[1]]) {
      c?.send({ type: "session.close" });
      await c?.closed;
    }
    await small.stop();
  });

  it("answers a plain GET of the endpoint with 426 Upgrade Required and what to do", async () => {
    const response = await fetch(server.url.replace("ws://", "http://"));
    expect(response.status).toBe(426);
    expect(response.headers.get("upgrade")).toBe("websocket");
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("upgrade_required");
    expect(body.error.message).toContain("WebSocket");
  });
});
