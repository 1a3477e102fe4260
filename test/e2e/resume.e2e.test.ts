import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RealtimeClient, type ServerEvent } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * BEHAVIOUR.md, "Resume": scenarios 11, 12 and 13, takeover and concurrent resumes, over real sockets. Resuming
 * sockets connect resume-only (`?autostart=0`), as the seed's client does; a resume on a plain connection, where a
 * session opened on connect comes first, is in connect.e2e.test.ts.
 */

/** Opens a session and returns its id and resume token. */
const open = async (client: RealtimeClient): Promise<{ id: string; token: string }> => {
  client.send({ type: "session.update", session: {} });
  const created = await client.waitFor("session.created", { since: 0 });
  await client.waitFor("session.updated", { since: 0 });
  return { id: String((created.session as { id: string }).id), token: String(created.resume_token) };
};

/** Streams question_16k.wav plus a second of silence as fast as possible, in 100 ms appends. */
const speak = async (client: RealtimeClient): Promise<void> => {
  const wav = await readWavFile(sharedAudio("question_16k.wav"));
  client.appendSamples(wav.samples, { sampleRateHz: 16000, tailMs: 1000 });
};

const seqOf = (e: ServerEvent): number => Number(e.server_event_seq);

describe("session resume", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let resumeOnly = "";
  beforeEach(async () => {
    server = await startTestServer();
    resumeOnly = `${server.url}?autostart=0`;
  });
  afterEach(async () => server.stop());

  it("scenario 11: a socket dropped mid-response resumes with the missed events in order, no duplicates, and the response ends", async () => {
    const first = await RealtimeClient.connect(server.url);
    const { id, token } = await open(first);
    await speak(first);
    await first.waitFor("response.output_audio.delta", { timeoutMs: 20_000 });
    const last = first.lastSeq();
    await first.terminate();

    const second = await RealtimeClient.connect(resumeOnly);
    second.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: last });
    const resumed = await second.waitFor("session.resumed");
    // The resume is told why its last socket was let go of: it dropped.
    expect(resumed).toMatchObject({ session_id: id, attachment_generation: 2, detach_reason: "disconnect" });
    // The session as it stands at the resume (the reference's newest revision): mid-response, open.
    expect(resumed.session).toMatchObject({
      object: "realtime.session",
      id,
      state: "open",
      turn_state: expect.stringMatching(/^assistant_(generating|playing)$/),
      active_response_id: expect.stringMatching(/^resp_/),
      epoch: resumed.epoch,
    });
    expect(resumed.resume_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(resumed.resume_token).not.toBe(token);
    await second.waitFor((e) => e.type === "response.done", { since: 0, timeoutMs: 20_000 });
    await second.waitFor("rate_limits.updated", { since: 0 });

    const events = second.received.map((r) => r.event);
    expect(events[0]?.type).toBe("session.resumed");
    expect(resumed.server_event_seq).toBeUndefined();
    // Everything after `last` arrives exactly once and in order, as received: the replay, then the live events.
    const seqs = events.slice(1).map(seqOf);
    expect(seqs).toEqual(seqs.map((_, i) => last + 1 + i));
    expect(events.filter((e) => e.type === "response.done")).toHaveLength(1);
    await second.close();
  });

  it("scenario 12: an old token, an unknown session and a malformed resume are refused with their codes", async () => {
    const first = await RealtimeClient.connect(server.url);
    const { id, token } = await open(first);
    await first.terminate();
    const second = await RealtimeClient.connect(resumeOnly);
    second.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: 1 });
    await second.waitFor("session.resumed");

    const stale = await RealtimeClient.connect(resumeOnly);
    stale.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: 1 });
    expect(await stale.waitFor("error")).toMatchObject({ code: "invalid_resume_token" });
    stale.send({ type: "session.resume", session_id: "sess_00000000000000000000000000000000", resume_token: token });
    expect(await stale.waitFor("error", { since: 1 })).toMatchObject({ code: "session_resume_expired" });
    stale.send({ type: "session.resume", session_id: id });
    expect(await stale.waitFor("error", { since: 2 })).toMatchObject({ code: "invalid_session_resume" });
    expect(stale.types()).toEqual(["error", "error", "error"]);
    // The token is checked before the journal: a stranger's resume from a seq never sent learns nothing of it.
    stale.send({
      type: "session.resume",
      session_id: id,
      resume_token: "x".repeat(43),
      last_received_server_event_seq: 999,
    });
    expect(await stale.waitFor("error", { since: 3 })).toMatchObject({ code: "invalid_resume_token" });
    expect(stale.types()).toEqual(["error", "error", "error", "error"]);
    // A client ahead of the server cannot be replayed to: resync required.
    stale.send({
      type: "session.resume",
      session_id: id,
      resume_token: String((await second.waitFor("session.resumed", { since: 0 })).resume_token),
      last_received_server_event_seq: 999,
    });
    expect(await stale.waitFor("session.resync_required")).toMatchObject({ session_id: id, reason: "journal_gap" });
    for (const client of [second, stale]) await client.close();
  });

  it("a resume while the old socket is attached sends it session.replaced, closes it, and ignores its later input", async () => {
    const first = await RealtimeClient.connect(server.url);
    const { id, token } = await open(first);
    const second = await RealtimeClient.connect(resumeOnly);
    second.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: 1 });
    const resumed = await second.waitFor("session.resumed");
    // Nothing was detached: the old socket was still attached, so no reason is given.
    expect("detach_reason" in resumed).toBe(false);
    const replaced = await first.waitFor("session.replaced", { since: 0 });
    expect(replaced).toMatchObject({ session_id: id, attachment_generation: 1 });
    await first.closed;
    const before = server.engine.get(id)?.current.input.bufferedBytes;
    expect(before).toBe(0);
    // The superseded socket is closed: nothing it could send reaches the session.
    second.send({ type: "session.heartbeat" });
    await second.waitFor("session.heartbeat_ack");
    expect(server.engine.get(id)?.current.attachmentGeneration).toBe(2);
    await second.close();
  });

  it("of two concurrent resumes with the same token exactly one wins", async () => {
    const first = await RealtimeClient.connect(server.url);
    const { id, token } = await open(first);
    await first.terminate();
    const [a, b] = await Promise.all([RealtimeClient.connect(resumeOnly), RealtimeClient.connect(resumeOnly)]);
    for (const c of [a, b])
      c.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: 1 });
    const outcomes = await Promise.all(
      [a, b].map((c) => c.waitFor((e) => e.type === "session.resumed" || e.type === "error").then((e) => e.type)),
    );
    expect(outcomes.sort()).toEqual(["error", "session.resumed"]);
    for (const c of [a, b]) await c.close();
  });

  it("replays identically after resumes, takeovers and detaches", async () => {
    const first = await RealtimeClient.connect(server.url);
    const { id, token } = await open(first);
    await speak(first);
    await first.waitFor("response.done", { timeoutMs: 20_000 });
    await first.terminate();
    const second = await RealtimeClient.connect(resumeOnly);
    second.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: 3 });
    await second.waitFor("session.resumed");
    second.send({ type: "session.close" });
    await second.waitFor("session.closed", { since: 0 });
    const result = replayEntries(await server.store.read(streamOf(id)));
    expect(result.divergence).toBeNull();
    expect(result.state.phase).toBe("closed");
  });
});

describe("idle expiry", () => {
  it("scenario 13: idle TTL 1 s, 2 s pass -> session.expired{idle_ttl_expired}; a command afterwards -> unknown_session", async () => {
    const server = await startTestServer({ duplex_session: { idle_ttl_s: 1 } });
    try {
      const client = await RealtimeClient.connect(server.url);
      await open(client);
      const expired = await client.waitFor("session.expired", { timeoutMs: 5000 });
      expect(expired.reason).toBe("idle_ttl_expired");
      client.send({ type: "input_audio_buffer.commit", event_id: "late" });
      expect(await client.waitFor("error")).toMatchObject({ code: "unknown_session" });
      await client.close();
    } finally {
      await server.stop();
    }
  });
});

describe("disconnect grace", () => {
  it("a dropped session not resumed within disconnect_grace_s expires: the resume is session_resume_expired, the log says why", async () => {
    const server = await startTestServer({ duplex_session: { disconnect_grace_s: 1 } });
    try {
      const first = await RealtimeClient.connect(server.url);
      const { id, token } = await open(first);
      await first.terminate();
      await expect
        .poll(() => server.engine.sessions().some((s) => s.sessionId === id && !s.isClosed), {
          timeout: 5000,
        })
        .toBe(false);
      const late = await RealtimeClient.connect(`${server.url}?autostart=0`);
      late.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: 0 });
      expect(await late.waitFor("error", { since: 0 })).toMatchObject({ code: "session_resume_expired" });
      await late.close();
      const closed = (await server.store.read(streamOf(id))).filter((e) => e.type === "SessionClosed");
      expect(closed.map((e) => (e.data as { reason: string }).reason)).toEqual(["disconnect_grace_expired"]);
    } finally {
      await server.stop();
    }
  });
});

describe("a session's end is its log's last entry", () => {
  it("a runner output that reaches a session after it closed is not logged: SessionClosed stays the last entry", async () => {
    const server = await startTestServer({ duplex_session: { idle_ttl_s: 1 } });
    try {
      const client = await RealtimeClient.connect(server.url);
      const { id } = await open(client);
      const host = server.engine.get(id);
      await client.waitFor("session.expired", { timeoutMs: 5000 });
      // What a runner still had on its way when the session expired (it happened with the conformance peer).
      await host?.enqueue({
        type: "StageOutputReceived",
        at: Date.now(),
        data: { output: { kind: "audio", epoch: 0, audio: new Uint8Array(480), transcript: "late" } },
      });
      const entries = await server.store.read(streamOf(id));
      expect(entries.at(-1)?.type).toBe("SessionClosed");
      expect(entries.filter((e) => e.type === "StageOutputReceived")).toEqual([]);
      await client.close();
    } finally {
      await server.stop();
    }
  });
});

describe("how a socket ends decides the session's end (BEHAVIOUR.md, Resume)", () => {
  it("a client's close 1000 ends the session as client_closed at once: its slot is free, its token resumes nothing", async () => {
    const server = await startTestServer({ duplex_session: { max_sessions: 1 } });
    try {
      const first = await RealtimeClient.connect(server.url);
      const { id, token } = await open(first);
      await first.close(1000, "done");
      // The only slot is free at once: no grace is held for a client that said it is done.
      const second = await RealtimeClient.connect(server.url);
      await open(second);
      await second.close(1000);
      const late = await RealtimeClient.connect(`${server.url}?autostart=0`);
      late.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: 0 });
      expect(await late.waitFor("error", { since: 0 })).toMatchObject({ code: "session_resume_expired" });
      await late.close();
      const log = await server.store.read(streamOf(id));
      expect(log.filter((e) => e.type === "SessionClosed").map((e) => (e.data as { reason: string }).reason)).toEqual([
        "client_closed",
      ]);
      expect(
        log.some((e) => e.type === "AttachmentChanged" && (e.data as { change: string }).change === "detached"),
      ).toBe(false);
    } finally {
      await server.stop();
    }
  });

  it.each([
    ["1001 (going away)", 1001],
    ["4000 (an application code)", 4000],
    ["no status (1005)", undefined],
  ])("a close frame with %s detaches the session, which resumes", async (_name, code) => {
    const server = await startTestServer();
    try {
      const first = await RealtimeClient.connect(server.url);
      const { id, token } = await open(first);
      await first.close(code);
      const second = await RealtimeClient.connect(`${server.url}?autostart=0`);
      second.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: 0 });
      expect(await second.waitFor("session.resumed", { since: 0 })).toMatchObject({
        session_id: id,
        attachment_generation: 2,
      });
      await second.close(1000);
      await expect
        .poll(async () =>
          (await server.store.read(streamOf(id)))
            .filter((e) => e.type === "SessionClosed")
            .map((e) => (e.data as { reason: string }).reason),
        )
        .toEqual(["client_closed"]);
    } finally {
      await server.stop();
    }
  });
});

describe("the resume journal's limits", () => {
  /** A session with an answer, dropped: its id, token, and the head seq (everything was received). */
  const answeredThenDropped = async (url: string) => {
    const client = await RealtimeClient.connect(url);
    const { id, token } = await open(client);
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    await client.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
    await client.waitFor("rate_limits.updated", { since: 0 });
    const head = client.lastSeq();
    await client.terminate();
    return { id, token, head };
  };

  it("resume_replay_ttl_s: after it, missed events are journal_gap (token checked first); nothing missed still resumes", async () => {
    const server = await startTestServer({ duplex_session: { resume_replay_ttl_s: 0.3 } });
    try {
      const { id, token, head } = await answeredThenDropped(server.url);
      await new Promise((resolve) => setTimeout(resolve, 600));
      const client = await RealtimeClient.connect(`${server.url}?autostart=0`);
      client.send({
        type: "session.resume",
        session_id: id,
        resume_token: "x".repeat(43),
        last_received_server_event_seq: 1,
      });
      expect(await client.waitFor("error")).toMatchObject({ code: "invalid_resume_token" });
      client.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: 1 });
      expect(await client.waitFor("session.resync_required")).toMatchObject({ session_id: id, reason: "journal_gap" });
      client.send({
        type: "session.resume",
        session_id: id,
        resume_token: token,
        last_received_server_event_seq: head,
      });
      const resumed = await client.waitFor("session.resumed");
      expect(client.types()).toEqual(["error", "session.resync_required", "session.resumed"]);
      expect(resumed).toMatchObject({ session_id: id, attachment_generation: 2 });
      await client.close();
    } finally {
      await server.stop();
    }
  });

  it("resume_replay_max_bytes: a replay larger than it is journal_overflow; a smaller one resumes", async () => {
    const server = await startTestServer({ duplex_session: { resume_replay_max_bytes: 4096 } });
    try {
      const { id, token, head } = await answeredThenDropped(server.url);
      const client = await RealtimeClient.connect(`${server.url}?autostart=0`);
      // The answer's audio is far more than 4 KiB of JSON.
      client.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: 1 });
      expect(await client.waitFor("session.resync_required")).toMatchObject({
        session_id: id,
        reason: "journal_overflow",
      });
      client.send({
        type: "session.resume",
        session_id: id,
        resume_token: token,
        last_received_server_event_seq: head - 1,
      });
      await client.waitFor("session.resumed");
      const replayed = client.received.map((r) => r.event).slice(2);
      expect(replayed.map(seqOf)).toEqual([head]);
      await client.close();
    } finally {
      await server.stop();
    }
  });
});
