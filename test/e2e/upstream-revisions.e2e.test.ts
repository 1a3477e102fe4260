import { afterEach, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { type ModelServerStub, startModelServerStub } from "../support/model-server-stub.ts";
import { startTestServer } from "../support/server.ts";

/**
 * The upstream runner against both revisions of the duplex dialect (issue 35, part 1): the one
 * reference/realtime-duplex-api.md describes as copied here (`incarnation` beside the resume token, sent back on
 * `session.resume`) and vLLM-Omni's newest (server-allocated ids, no incarnation, `turn.event`, the closed reasons
 * `client_close`, `disconnect`, `timeout`, `transport_error`, `shutdown`). The runner tells them apart from the model
 * server's `session.created` and records which it met; the model server is test/support's stub speaking each.
 */
type Server = Awaited<ReturnType<typeof startTestServer>>;
type Revision = "incarnation" | "server_ids";

const sessionIdOf = (client: RealtimeClient): string =>
  String(
    ((client.received.find((r) => r.event.type === "session.created")?.event.session ?? {}) as { id?: string }).id,
  );

/** 100 ms of 16 kHz PCM16 whose samples say which append it is (`n`), base64. */
const chunk = (n: number): string => Buffer.alloc(3200, n % 251).toString("base64");

const RESUME = { grace_ms: 5000, initial_delay_ms: 50, max_delay_ms: 200 };

describe("the upstream runner against each revision of the duplex dialect", () => {
  const servers: Server[] = [];
  const stubs: ModelServerStub[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await server.stop().catch(() => undefined);
    for (const stub of stubs.splice(0)) await stub.close();
  });

  /** A model server speaking `revision`, and server A with the upstream runner in front of it, with one client. */
  const chain = async (revision: Revision, respondDelayMs = 0) => {
    const model = await startModelServerStub({ dialect: "duplex", revision, respondDelayMs });
    stubs.push(model);
    const a = await startTestServer({
      runner: { kind: "upstream", url: model.url, dialect: "duplex", resume: RESUME },
    });
    servers.push(a);
    const client = await RealtimeClient.connect(a.url);
    client.send({
      type: "session.update",
      session: { input_audio_format: "pcm16", input_sample_rate_hz: 16000, extra_body: { auto_response: false } },
    });
    await client.waitFor("session.updated", { since: 0 });
    return { model, a, client };
  };

  const log = async (a: Server, client: RealtimeClient) => a.store.read(streamOf(sessionIdOf(client)));
  /** The `upstream_session` outputs in A's log: one each time the upstream session was created or resumed. */
  const upstreamSessions = async (a: Server, client: RealtimeClient) =>
    (await log(a, client))
      .filter((e) => e.type === "StageOutputReceived")
      .map((e) => (e.data as { output: Record<string, unknown> }).output)
      .filter((o) => o.kind === "upstream_session");

  const answered = async (client: RealtimeClient) => {
    const since = client.received.length;
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    return client.waitFor("response.done", { since, timeoutMs: 10_000 });
  };

  it.each([
    ["incarnation", { incarnation: 0 }],
    ["server_ids", {}],
  ] as const)(
    "%s: told apart at session.created, and a drop resumes the session by what that revision names it",
    async (revision, named) => {
      const { model, a, client } = await chain(revision);
      await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
      const [created] = await upstreamSessions(a, client);
      expect(created).toMatchObject({ sessionId: model.sessions[0]?.id, revision });
      if (revision === "server_ids") expect(model.sessions[0]?.id).toMatch(/^duplex-[0-9a-f]{32}$/);
      for (let n = 0; n < 3; n++) client.send({ type: "input_audio_buffer.append", audio: chunk(n) });
      await expect.poll(() => model.sessions[0]?.appendedBytes).toBe(3 * 3200);
      model.drop();
      for (let n = 3; n < 6; n++) client.send({ type: "input_audio_buffer.append", audio: chunk(n) });
      expect((await answered(client)).response).toMatchObject({ status: "completed" });
      // One upstream session, resumed with the incarnation only where the revision has one; every append once.
      expect(model.sessions).toHaveLength(1);
      expect(model.sessions[0]?.appendedBytes).toBe(6 * 3200);
      const resumes = model.sessions[0]?.frames.filter((f) => f.type === "session.resume") ?? [];
      expect(resumes.length).toBeGreaterThanOrEqual(1);
      for (const resume of resumes) {
        const { type: _type, resume_token: _token, last_received_server_event_seq: _seq, ...rest } = resume;
        expect(rest).toEqual({ session_id: model.sessions[0]?.id, ...named });
      }
      expect((await upstreamSessions(a, client)).map((o) => o.revision)).toEqual([revision, revision]);
      expect(client.types()).not.toContain("error");
      await client.close();
      expect(replayEntries(await log(a, client)).ok).toBe(true);
    },
  );

  it("server_ids: a turn.event after a cancel is taken in stride, and the next response is answered", async () => {
    // Each response keeps the turn for 1 s, so the cancel finds it active.
    const { model, a, client } = await chain("server_ids", 1000);
    await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
    const since = client.received.length;
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    await client.waitFor("response.created", { since, timeoutMs: 10_000 });
    client.send({ type: "response.cancel" });
    const cancelled = await client.waitFor("response.done", { since, timeoutMs: 10_000 });
    expect(cancelled.response).toMatchObject({ status: "cancelled" });
    // The model server said turn.event after its cancel (its own record of the barge-in): nothing of it is an error.
    await expect.poll(() => model.sessions[0]?.frames.filter((f) => f.type === "response.cancel").length).toBe(1);
    expect((await answered(client)).response).toMatchObject({ status: "completed" });
    expect(client.types()).not.toContain("error");
    await client.close();
    expect(replayEntries(await log(a, client)).ok).toBe(true);
  });

  it.each(["disconnect", "transport_error"])(
    "server_ids: session.closed %s is a lost attachment: the session is resumed and goes on",
    async (reason) => {
      const { model, a, client } = await chain("server_ids");
      await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
      model.end(reason);
      await expect.poll(async () => (await upstreamSessions(a, client)).length, { timeout: 5000 }).toBe(2);
      expect((await answered(client)).response).toMatchObject({ status: "completed" });
      expect(model.sessions).toHaveLength(1);
      expect(client.types()).not.toContain("error");
      await client.close();
      expect(replayEntries(await log(a, client)).ok).toBe(true);
    },
  );

  it.each(["timeout", "shutdown"])(
    "server_ids: session.closed %s ends the session with upstream_unavailable naming the reason",
    async (reason) => {
      const { model, a, client } = await chain("server_ids");
      await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
      model.end(reason);
      const error = await client.waitFor("error", { since: 0, timeoutMs: 10_000 });
      expect(error.error).toMatchObject({
        code: "upstream_unavailable",
        message: expect.stringContaining(`(${reason})`),
      });
      expect(await client.waitFor("session.closed", { since: 0 })).toMatchObject({ reason: "runner_failed" });
      // Not resumed: the model server ended the session.
      expect(model.sessions[0]?.frames.filter((f) => f.type === "session.resume")).toEqual([]);
      expect(replayEntries(await log(a, client)).ok).toBe(true);
    },
  );

  it.each(["incarnation", "server_ids"] as const)(
    "%s: a client's close reaches the model server as session.close, and the stage is not lost",
    async (revision) => {
      const { model, a, client } = await chain(revision);
      await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
      client.send({ type: "session.close" });
      await client.waitFor("session.closed", { since: 0 });
      await expect.poll(() => model.sessions[0]?.closed).toBe(true);
      expect(model.sessions[0]?.frames.map((f) => f.type)).toContain("session.close");
      const outputs = (await log(a, client))
        .filter((e) => e.type === "StageOutputReceived")
        .map((e) => (e.data as { output: { kind: string } }).output.kind);
      expect(outputs).not.toContain("stage_lost");
      expect(replayEntries(await log(a, client)).ok).toBe(true);
    },
  );
});
