import { describe, expect, it } from "vitest";
import {
  DuplexClient,
  type DuplexClientOptions,
  DuplexConnectionError,
  DuplexProtocolError,
  DuplexSessionClosedError,
  reconnectDelayMs,
} from "../../src/client/index.ts";
import { created, ev, type FakeConnection, fakeServer, until } from "./fake-server.ts";

/**
 * DuplexClient against a scripted server (reference/realtime-duplex-api.md, "Reconnect and resume"; BEHAVIOUR.md,
 * "Resume"): what it delivers, in order, across drops; what it sends on each connection; how it ends.
 */
const FAST = { attempts: 3, baseDelayMs: 1, maxDelayMs: 2, jitter: false };

const open = async (options: Partial<DuplexClientOptions> = {}, script = (_c: FakeConnection, _i: number) => {}) => {
  const server = fakeServer((connection, index) => {
    if (index === 0) connection.push(created());
    script(connection, index);
  });
  const client = await DuplexClient.connect("ws://fake/v1/realtime?model=m", {
    connect: server.connect,
    reconnect: FAST,
    heartbeatIntervalMs: null,
    ackIntervalMs: null,
    ...options,
  });
  return { client, server, first: server.connections[0] as FakeConnection };
};

const seqs = (client: DuplexClient) => client.events.events().map((e) => e.server_event_seq ?? null);

describe("DuplexClient", () => {
  it("opens with the first session.update and resolves once it is answered", async () => {
    const server = fakeServer((c) => {
      c.push(created());
      setImmediate(() => c.push(ev(1, "session.updated")));
    });
    const client = await DuplexClient.connect("ws://fake/v1/realtime", {
      connect: server.connect,
      session: { instructions: "hi" },
      heartbeatIntervalMs: null,
      ackIntervalMs: null,
    });
    expect(server.connections[0]?.sent).toEqual([
      { type: "session.update", session: { instructions: "hi" }, event_id: "evt_client_1" },
    ]);
    expect(client.phase).toBe("open");
    expect(client.sessionId).toBe("sess_1");
    expect(client.resumeToken).toBe("token-1");
    expect(client.events.types()).toEqual(["session.created", "session.updated"]);
  });

  it("rejects connect with the server's code when it refuses the session", async () => {
    const server = fakeServer((c) =>
      c.push({ type: "error", error: "needs a voice clip", code: "ref_audio_required" }),
    );
    const failure = await DuplexClient.connect("ws://fake/v1/realtime", { connect: server.connect }).catch(
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(DuplexProtocolError);
    expect(failure).toMatchObject({ code: "ref_audio_required", message: "ref_audio_required: needs a voice clip" });
  });

  it("says what to do when nothing listens", async () => {
    const server = fakeServer();
    server.state.refuse = 1;
    const failure = await DuplexClient.connect("ws://127.0.0.1:1/v1/realtime", { connect: server.connect }).catch(
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(DuplexConnectionError);
    expect(failure).toMatchObject({
      code: "connect_failed",
      message: "nothing listens at 127.0.0.1:1: start the server (npm start) or pass --url",
    });
  });

  it("resumes after a drop with its token and highest seq, delivers one connection.resumed, and nothing twice", async () => {
    const { client, server, first } = await open({}, (c, i) => {
      if (i !== 1) return;
      c.push({
        type: "session.resumed",
        session_id: "sess_1",
        attachment_generation: 2,
        resume_token: "token-2",
        detach_reason: "output_backpressure",
      });
      // A replay that overlaps what the client holds (2, 3), then the missed events and a live one.
      for (const seq of [2, 3, 4, 5, 6]) c.push(ev(seq));
    });
    for (const seq of [1, 2, 3]) first.push(ev(seq));
    first.drop(1006);
    await until("the replay", () => client.lastReceivedSeq === 6);

    const second = server.connections[1] as FakeConnection;
    expect(second.url).toBe("ws://fake/v1/realtime?model=m&autostart=0");
    expect(second.sent[0]).toMatchObject({
      type: "session.resume",
      session_id: "sess_1",
      resume_token: "token-1",
      last_received_server_event_seq: 3,
    });
    expect(client.events.types()).toEqual([
      "session.created",
      "conversation.item.added",
      "conversation.item.added",
      "conversation.item.added",
      "connection.resumed",
      "conversation.item.added",
      "conversation.item.added",
      "conversation.item.added",
    ]);
    expect(seqs(client)).toEqual([null, 1, 2, 3, null, 4, 5, 6]);
    expect(client.events.events()[4]).toEqual({
      type: "connection.resumed",
      session_id: "sess_1",
      attachment_generation: 2,
      last_received_server_event_seq: 3,
      attempt: 1,
      close_code: 1006,
      detach_reason: "output_backpressure",
    });
    expect(client.events.count("session.resumed")).toBe(0);
    expect(client.duplicatesDropped).toBe(2);
    expect(client.resumeToken).toBe("token-2");
    expect(client.attachmentGeneration).toBe(2);
    expect(client.phase).toBe("open");
  });

  it("resumes a second drop with the rotated token, after retrying a server that is not back yet", async () => {
    const { client, server, first } = await open({}, (c, i) => {
      if (i === 0) return;
      c.push({ type: "session.resumed", session_id: "sess_1", attachment_generation: i + 1, resume_token: `t${i}` });
      c.push(ev(i + 10));
    });
    first.drop(1012);
    await until("the first resume", () => client.resumes === 1);
    server.state.refuse = 2;
    server.connections[1]?.drop(1006);
    await until("the second resume", () => client.resumes === 2);
    expect(server.state.attempts).toBe(5);
    expect(server.connections[2]?.sent[0]).toMatchObject({
      type: "session.resume",
      resume_token: "t1",
      last_received_server_event_seq: 11,
    });
    expect(client.events.events().filter((e) => e.type === "connection.resumed")).toMatchObject([
      { attempt: 1, close_code: 1012, attachment_generation: 2 },
      { attempt: 3, close_code: 1006, attachment_generation: 3 },
    ]);
  });

  it("keeps what is sent while reconnecting and sends it after session.resumed, in order", async () => {
    let release: (() => void) | null = null;
    const { client, server, first } = await open({}, (c, i) => {
      if (i === 1)
        release = () =>
          c.push({ type: "session.resumed", session_id: "sess_1", attachment_generation: 2, resume_token: "t2" });
    });
    first.drop(1006);
    await until("the reconnect", () => client.phase === "reconnecting");
    const a = client.send({ type: "input_audio_buffer.append", audio: "AAAA" });
    const b = client.commit({ createResponse: true });
    await until("the second connection", () => release !== null);
    expect(server.connections[1]?.sent.map((e) => e.type)).toEqual(["session.resume"]);
    (release as unknown as () => void)();
    expect(server.connections[1]?.sent.map((e) => [e.type, e.event_id])).toEqual([
      ["session.resume", expect.stringMatching(/^evt_client_resume_/)],
      ["input_audio_buffer.append", a],
      ["input_audio_buffer.commit", b],
    ]);
    expect(first.sent).toEqual([]);
  });

  it.each([
    [
      "session.resync_required",
      { type: "session.resync_required", session_id: "sess_1", reason: "journal_gap" },
      "resync_required",
    ],
    [
      "session_resume_expired",
      { type: "error", error: "unknown or expired session: sess_1", code: "session_resume_expired" },
      "session_resume_expired",
    ],
    [
      "invalid_resume_token",
      { type: "error", error: "the resume token is not the current one", code: "invalid_resume_token" },
      "invalid_resume_token",
    ],
  ])("ends in the closed phase when the resume is answered with %s, and tries no more", async (_what, answer, code) => {
    const { client, server, first } = await open({}, (c, i) => {
      if (i === 1) c.push(answer);
    });
    const pending = client.events.waitFor("response.done", { timeoutMs: 5000 });
    first.drop(1006);
    const end = await client.closed;
    expect(end).toBeInstanceOf(DuplexSessionClosedError);
    expect(end?.code).toBe(code);
    expect(client.phase).toBe("closed");
    await expect(pending).rejects.toBe(end);
    expect(() => client.send({ type: "session.heartbeat" })).toThrow(DuplexSessionClosedError);
    expect(server.state.attempts).toBe(2);
    expect(client.events.count("connection.resumed")).toBe(0);
  });

  it("gives up with reconnect_failed after the policy's attempts", async () => {
    const { client, server, first } = await open();
    server.state.refuse = 100;
    first.drop(1006);
    const end = await client.closed;
    expect(end).toBeInstanceOf(DuplexConnectionError);
    expect(end?.code).toBe("reconnect_failed");
    expect(end?.message).toContain("in 3 attempts; last: connect ECONNREFUSED");
    expect(server.state.attempts).toBe(1 + 3);
  });

  it.each([
    ["a close that is not a drop (1008)", FAST, 1008],
    ["a drop without a reconnect policy", null, 1006],
  ])("ends at %s with connection_lost and does not reconnect", async (_what, reconnect, code) => {
    const { client, server, first } = await open({ reconnect });
    first.drop(code);
    const end = await client.closed;
    expect(end).toMatchObject({ code: "connection_lost" });
    expect(end?.message).toContain(`(${code})`);
    expect(server.state.attempts).toBe(1);
  });

  it("ends with why when the server ends the session, naming the last error", async () => {
    const { client, first } = await open();
    first.push(ev(1, "error", { error: { code: "upstream_unavailable", message: "the upstream went away" } }));
    first.push(ev(2, "session.closed", { reason: "runner_failed" }));
    const end = await client.closed;
    expect(end).toMatchObject({
      code: "session_closed",
      message: "the server ended the session (runner_failed); upstream_unavailable: the upstream went away",
    });
    expect(client.events.types()).toEqual(["session.created", "error", "session.closed"]);
  });

  it("counts a heartbeat without an answer as a drop, and resumes", async () => {
    const { client, server, first } = await open({ heartbeatIntervalMs: 5, heartbeatTimeoutMs: 30 }, (c, i) => {
      if (i === 1)
        c.push({ type: "session.resumed", session_id: "sess_1", attachment_generation: 2, resume_token: "t2" });
    });
    await until("the resume", () => client.resumes === 1);
    expect(first.sent.map((e) => e.type)).toEqual(["session.heartbeat"]);
    expect(first.isClosed).toBe(true);
    expect(server.connections[1]?.sent[0]).toMatchObject({ type: "session.resume", last_received_server_event_seq: 0 });
    await client.close(10);
  });

  it("heartbeat() resolves on the answer, and rejects when the connection drops first", async () => {
    const { client, first } = await open({ heartbeatTimeoutMs: 10_000 });
    const answered = client.heartbeat();
    first.push(ev(1, "session.heartbeat_ack"));
    await expect(answered).resolves.toBeUndefined();
    const lost = client.heartbeat();
    first.drop(1006);
    await expect(lost).rejects.toMatchObject({ code: "connection_lost" });
  });

  it("acks the highest seq delivered, once per value", async () => {
    const { client, first } = await open({ ackIntervalMs: 5 });
    for (const seq of [1, 2, 3]) first.push(ev(seq));
    await until("the first ack", () => first.sent.length === 1);
    first.push(ev(4));
    await until("the second ack", () => first.sent.length === 2);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(first.sent.map((e) => [e.type, e.server_event_seq])).toEqual([
      ["session.event_ack", 3],
      ["session.event_ack", 4],
    ]);
    await client.close(10);
  });

  it("close() sends session.close and resolves closed with null once session.closed arrives", async () => {
    const { client, first } = await open();
    const closing = client.close();
    expect(client.phase).toBe("closing");
    expect(first.sent.map((e) => e.type)).toEqual(["session.close"]);
    first.push(ev(1, "session.closed", { reason: "session_close" }));
    await closing;
    expect(await client.closed).toBeNull();
    expect(client.phase).toBe("closed");
  });
});

describe("response handles", () => {
  const delta = (seq: number, bytes: number[]) =>
    ev(seq, "response.output_audio.delta", {
      response_id: "resp_1",
      delta: Buffer.from(bytes).toString("base64"),
      sample_rate_hz: 24000,
    });

  it("resolve with the response's audio bytes, transcript and status, with nothing twice across a resume", async () => {
    const { client, first } = await open({}, (c, i) => {
      if (i !== 1) return;
      c.push({ type: "session.resumed", session_id: "sess_1", attachment_generation: 2, resume_token: "t2" });
      c.push(delta(2, [1, 0, 2, 0]));
      c.push(delta(3, [3, 0, 4, 0]));
      c.push(ev(4, "response.output_audio_transcript.delta", { response_id: "resp_1", delta: "hel" }));
      c.push(ev(5, "response.output_audio_transcript.done", { response_id: "resp_1", transcript: "hello" }));
      c.push(ev(6, "response.done", { response_id: "resp_1", response: { id: "resp_1", status: "completed" } }));
    });
    const handle = client.createResponse({ instructions: "say hello" });
    expect(first.sent.at(-1)).toMatchObject({ type: "response.create", response: { instructions: "say hello" } });
    expect(handle.phase).toBe("pending");
    first.push(ev(1, "response.created", { response_id: "resp_1", response: { id: "resp_1" } }));
    first.push(delta(2, [1, 0, 2, 0]));
    first.drop(1006);
    const result = await handle.done;
    expect(handle.responseId).toBe("resp_1");
    expect(handle.phase).toBe("done");
    expect([...result.audio]).toEqual([1, 0, 2, 0, 3, 0, 4, 0]);
    expect(result).toMatchObject({ status: "completed", transcript: "hello", sampleRateHz: 24000 });
    // 8 bytes: 4 samples at 24 kHz.
    expect(result.audioMs).toBeCloseTo(4 / 24, 6);
    expect([...(await handle.audio())]).toEqual([...client.events.audioBytes("resp_1")]);
    expect(client.responses).toEqual([handle]);
  });

  it("reject with the server's code when it refuses the response.create", async () => {
    const { client, first } = await open();
    const handle = client.createResponse();
    const eventId = first.sent.at(-1)?.event_id;
    first.push(ev(1, "error", { error: { code: "response_already_active", message: "busy", event_id: eventId } }));
    await expect(handle.done).rejects.toMatchObject({ code: "response_already_active", eventId });
    expect(handle.phase).toBe("failed");
  });

  it("give each response the server starts on its own a handle, and reject what is open when the session ends", async () => {
    const { client, first } = await open();
    const seen: string[] = [];
    client.onResponse((h) => seen.push(String(h.responseId)));
    const next = client.nextResponse();
    first.push(ev(1, "response.created", { response_id: "resp_9", response: { id: "resp_9" } }));
    const handle = await next;
    expect(handle.responseId).toBe("resp_9");
    expect(seen).toEqual(["resp_9"]);
    first.push(ev(2, "session.expired", { reason: "idle_ttl_expired" }));
    await expect(handle.done).rejects.toMatchObject({ code: "session_expired" });
  });
});

describe("reconnect backoff", () => {
  it("doubles from the base delay up to the maximum; jitter scales each into [half, whole]", () => {
    const policy = { attempts: 7, baseDelayMs: 250, maxDelayMs: 4000, jitter: false };
    expect([1, 2, 3, 4, 5, 6].map((n) => reconnectDelayMs(policy, n))).toEqual([250, 500, 1000, 2000, 4000, 4000]);
    const jittered = { ...policy, jitter: true };
    expect(reconnectDelayMs(jittered, 3, () => 0)).toBe(500);
    expect(reconnectDelayMs(jittered, 3, () => 0.999999)).toBe(1000);
  });
});
