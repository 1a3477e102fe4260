import { afterEach, describe, expect, inject, it } from "vitest";
import { freshDatabase } from "../../src/cli/postgres-temp.ts";
import { RealtimeClient, type ServerEvent } from "../../src/client/index.ts";
import {
  createEngine,
  type Engine,
  type EngineLog,
  type EventStore,
  type RecordedEntry,
  type SessionHost,
  streamOf,
} from "../../src/engine/index.ts";
import { NodeIdInUseError } from "../../src/engine/ports/index.ts";
import { createResampler, readWavFile } from "../../src/infra/audio/index.ts";
import { parseConfig } from "../../src/infra/config.ts";
import { createPostgresEventStore } from "../../src/infra/event-store/postgres.ts";
import { createEchoRunner } from "../../src/infra/runners/echo.ts";
import { replayEntries, reportOf } from "../../src/replay/index.ts";
import { type RunningServer, startServer } from "../../src/server/index.ts";
import { frame, leasesAlwaysHeld, type Sent, sinkInto, until } from "../support/engine-session.ts";
import { sharedAudio } from "../support/server.ts";

/**
 * Issue 33, part 2 (BEHAVIOUR.md, "Moves lose nothing"): a session moving between two nodes of one PostgreSQL.
 * Two servers in this process (node-1 and node-2, each on a port of its own), each with its own store instance and lease,
 * and real sockets: a resume on node 2 while the old socket is still attached to node 1 sends that socket
 * `session.replaced` and closes it at once, though it sends nothing; a resume on node 2 while node 1 still writes an
 * answer to the detached session wins after node 1's appends (node 1 is fenced), and is never refused as expired.
 * Then the node log: the "session closed" line of the node that took the session over counts the whole session.
 */
const url = inject("postgresUrl");

/** Each entry's type, from `after` (an index) on. */
const typesFrom = (entries: readonly RecordedEntry[], after: number): string[] =>
  entries.slice(after + 1).map((e) => e.type);

describe.skipIf(url === null)("a session moving between two nodes", () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step().catch(() => undefined);
  });

  /** Node `n` (1 or 2) on `dbUrl`, listening on its port; its echo runner's options. */
  const node = async (
    n: 1 | 2,
    dbUrl: string,
    echo: Parameters<typeof createEchoRunner>[0] = {},
  ): Promise<RunningServer> => {
    const config = parseConfig({
      log_level: "silent",
      listen: { host: "127.0.0.1", port: 0 },
      node: { id: `node-${n}`, lease_s: 10 },
      event_store: { kind: "postgres", url: dbUrl, poll_ms: 50 },
      duplex_session: { max_sessions: 8, disconnect_grace_s: 60 },
    });
    const server = await startServer(config, { runner: createEchoRunner(echo) });
    cleanup.push(() => server.close());
    return server;
  };

  const connect = async (server: RealtimeClient | RunningServer, query = ""): Promise<RealtimeClient> => {
    const client = await RealtimeClient.connect(`${(server as RunningServer).url}${query}`);
    cleanup.push(() => client.terminate());
    return client;
  };

  /** A session opened on node 1 (session.update sent, so it is in use): its id and resume token. */
  const openOn = async (client: RealtimeClient): Promise<{ id: string; token: string }> => {
    client.send({ type: "session.update", session: { input_sample_rate_hz: 16000 } });
    const created = await client.waitFor("session.created", { since: 0 });
    await client.waitFor("session.updated", { since: 0 });
    return { id: String((created.session as { id: string }).id), token: String(created.resume_token) };
  };

  const logOf = async (dbUrl: string, id: string): Promise<RecordedEntry[]> => {
    const store = await createPostgresEventStore({ url: dbUrl });
    try {
      return await store.read(streamOf(id));
    } finally {
      await store.close();
    }
  };

  it("a resume on node 2 while the old socket is attached to node 1: that socket gets session.replaced and closes, without sending anything", async () => {
    const dbUrl = await freshDatabase(url ?? "");
    const node1 = await node(1, dbUrl);
    const node2 = await node(2, dbUrl);
    const old = await connect(node1);
    const { id, token } = await openOn(old);
    const last = old.lastSeq();
    const heardBefore = old.received.length;

    // The same client reaches node 2 (another route) while its socket to node 1 stays open and silent.
    const next = await connect(node2, "?autostart=0");
    next.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: last });
    const resumed = await next.waitFor("session.resumed", { timeoutMs: 10_000 });
    expect(resumed).toMatchObject({ session_id: id, attachment_generation: 2 });

    // Node 1 learns of the takeover from the store, not from an append of its own.
    const closed = await Promise.race([
      old.closed,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the old socket stayed open")), 5_000)),
    ]);
    expect(closed.code).toBe(1000);
    const heard = old.received.slice(heardBefore).map((r) => r.event);
    expect(heard).toEqual([{ type: "session.replaced", session_id: id, attachment_generation: 1 }]);
    expect(node1.engine.get(id)).toBeUndefined();

    // The session goes on on node 2.
    next.send({ type: "session.close" });
    await next.waitFor("session.closed", { since: 0 });
    const entries = await logOf(dbUrl, id);
    expect(entries.map((e) => e.revision)).toEqual(entries.map((_, i) => i));
    const owned = entries.findIndex((e) => e.type === "SessionOwned");
    expect(entries[owned]?.data).toEqual({ node: "node-2", epoch: 2 });
    // After node 2's claim: its resume, then the close; nothing of node 1 (no detach, no refusal of node 1's).
    expect(typesFrom(entries, owned).filter((t) => t === "AttachmentChanged")).toHaveLength(1);
    expect(entries.filter((e) => e.type === "SessionOwned")).toHaveLength(1);
    const replay = replayEntries(entries);
    expect(replay.divergence).toBeNull();
    expect(replay.ok).toBe(true);
  });

  it("a resume on node 2 while node 1 still writes an answer to the detached session: the takeover wins after node 1's appends", async () => {
    const dbUrl = await freshDatabase(url ?? "");
    // Node 1's answer: question_16k spoken back in 20 ms chunks, one every 5 ms, each appended as it comes (about a
    // second of writing): a takeover that only retries its claim loses to every one of them.
    const node1 = await node(1, dbUrl, { chunkPeriodMs: 20, speedFactor: 4 });
    const node2 = await node(2, dbUrl);
    const old = await connect(node1);
    const { id, token } = await openOn(old);
    const wav = await readWavFile(sharedAudio("question_16k.wav"));
    old.appendSamples(wav.samples, { sampleRateHz: 16000, tailMs: 1000 });
    await old.waitFor("response.output_audio.delta", { timeoutMs: 30_000 });
    const last = old.lastSeq();
    await old.terminate();
    const host1 = node1.engine.get(id);
    expect(host1?.current.response).not.toBeNull();

    const next = await connect(node2, "?autostart=0");
    next.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: last });
    const first = await next.waitFor((e) => e.type === "session.resumed" || e.type === "error", { timeoutMs: 15_000 });
    expect(first.type).toBe("session.resumed");
    await next.waitFor("response.done", { since: 0, timeoutMs: 15_000 });
    // Node 1 gave the session up: its runner stopped, nothing of it is appended again.
    await until(() => node1.engine.get(id) === undefined, "node 1 to give the session up");
    await new Promise((r) => setTimeout(r, 300));
    next.send({ type: "session.close" });
    await next.waitFor("session.closed", { since: 0 });

    const entries = await logOf(dbUrl, id);
    expect(entries.map((e) => e.revision)).toEqual(entries.map((_, i) => i));
    const owned = entries.findIndex((e) => e.type === "SessionOwned");
    expect(entries[owned]?.data).toEqual({ node: "node-2", epoch: 2 });
    // Node 1 wrote part of its answer before the claim; after it, no model output at all: the answer ended
    // cancelled at the takeover, and node 1's later outputs were refused.
    const before = entries.slice(0, owned).filter((e) => e.type === "StageOutputReceived").length;
    expect(before).toBeGreaterThan(0);
    expect(typesFrom(entries, owned)).not.toContain("StageOutputReceived");
    const done = next.received.map((r) => r.event).filter((e: ServerEvent) => e.type === "response.done");
    expect(done).toHaveLength(1);
    expect(done[0]).toMatchObject({ response: { status: "cancelled" } });
    // The client got every event after `last` once, in order.
    const seqs = next.received
      .map((r) => r.event)
      .filter((e) => e.server_event_seq !== undefined)
      .map((e) => Number(e.server_event_seq));
    expect(seqs).toEqual(seqs.map((_, i) => last + 1 + i));
    const replay = replayEntries(entries);
    expect(replay.divergence).toBeNull();
    expect(replay.ok).toBe(true);
  });
});

describe.skipIf(url === null)("the node log after a takeover", () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step().catch(() => undefined);
  });

  const recordingLog = (lines: { level: string; obj: Record<string, unknown>; msg: string }[]): EngineLog => ({
    debug: (obj, msg) => lines.push({ level: "debug", obj: obj as Record<string, unknown>, msg }),
    info: (obj, msg) => lines.push({ level: "info", obj: obj as Record<string, unknown>, msg }),
    warn: (obj, msg) => lines.push({ level: "warn", obj: obj as Record<string, unknown>, msg }),
    error: (obj, msg) => lines.push({ level: "error", obj: obj as Record<string, unknown>, msg }),
  });
  const leasesOf = leasesAlwaysHeld;
  /** 500 ms of a 220 Hz tone, PCM16 at 16 kHz, base64. */
  const tone = (() => {
    const samples = new Int16Array(8_000);
    for (let i = 0; i < samples.length; i += 1)
      samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 220 * i) / 16_000));
    return Buffer.from(samples.buffer).toString("base64");
  })();

  it("the 'session closed' line of the node that took the session over counts the whole session's responses and duration", async () => {
    const dbUrl = await freshDatabase(url ?? "");
    const clock = { now: 1_700_000_000_000 };
    const engineOn = async (node: string, lines: Parameters<typeof recordingLog>[0]): Promise<Engine> => {
      const store: EventStore = await createPostgresEventStore({ url: dbUrl });
      const engine = createEngine({
        store,
        runner: createEchoRunner({ speedFactor: Number.POSITIVE_INFINITY }),
        vad: null,
        createResampler,
        sessionMode: "turn",
        now: () => clock.now,
        leases: leasesOf(node),
        log: recordingLog(lines),
      });
      cleanup.push(() => store.close());
      cleanup.push(() => engine.close());
      return engine;
    };
    /** One answered turn: 500 ms of tone, committed, answered. */
    const turn = async (host: SessionHost, sent: Sent[]): Promise<void> => {
      const answered = sent.filter((e) => e.type === "response.done").length;
      await host.submit(frame({ type: "input_audio_buffer.append", audio: tone }));
      clock.now += 500;
      await host.submit(frame({ type: "input_audio_buffer.commit" }));
      await host.submit(frame({ type: "response.create", response: { instructions: "Answer." } }));
      await until(() => sent.filter((e) => e.type === "response.done").length > answered, "response.done");
      await host.settled();
    };
    const lines1: Parameters<typeof recordingLog>[0] = [];
    const lines2: Parameters<typeof recordingLog>[0] = [];
    const first = await engineOn("node-1", lines1);
    const second = await engineOn("node-2", lines2);

    const host = first.open();
    if ("code" in host) throw new Error(host.message);
    const sentBefore: Sent[] = [];
    const sink = sinkInto(sentBefore);
    host.attach(sink);
    await host.submit(
      frame({ type: "session.update", session: { turn_detection: null, input_sample_rate_hz: 16000 } }),
    );
    await host.settled();
    const token = String(sentBefore.find((e) => e.type === "session.created")?.resume_token);
    await turn(host, sentBefore);
    await turn(host, sentBefore);
    first.detach(host, sink);
    await host.settled();

    clock.now += 4_000;
    const adopted = await second.adopt(host.sessionId, token);
    if ("code" in adopted) throw new Error(adopted.message);
    const sent: Sent[] = [];
    const lastSeq = Math.max(...sentBefore.map((e) => Number(e.server_event_seq ?? 0)));
    const resumed = second.resume(
      {
        type: "session.resume",
        eventId: null,
        sessionId: host.sessionId,
        resumeToken: token,
        lastReceivedSeq: lastSeq,
      },
      sinkInto(sent),
    );
    if ("code" in resumed) throw new Error(resumed.message);
    await until(() => sent.some((e) => e.type === "session.resumed"), "session.resumed");
    await turn(resumed, sent);
    clock.now += 1_000;
    await resumed.submit(frame({ type: "session.close" }));
    await resumed.settled();

    const closedLine = lines2.filter((l) => l.msg === "session closed");
    expect(closedLine).toHaveLength(1);
    // Two responses on node 1, one on node 2; from node 1's session.created to node 2's close, less the 4 s between
    // node 1's last entry and node 2's claim (a move's gap, as every view counts it): 0.5 + 0.5 + 0.5 + 1 s.
    expect(closedLine[0]?.obj).toMatchObject({ sessionId: host.sessionId, reason: "session_close", responses: 3 });
    expect(closedLine[0]?.obj.durationS).toBe(2.5);
    const reader = await createPostgresEventStore({ url: dbUrl });
    cleanup.push(() => reader.close());
    expect(reportOf(await reader.read(streamOf(host.sessionId))).duration_s).toBe(2.5);
    expect(closedLine[0]?.obj.firstAudioP50Ms).toBe(0);
    // Node 1 logs no end of a session it gave up, and node 2 logs nothing of node 1's past again.
    expect(lines1.filter((l) => l.msg === "session closed" || l.msg === "session expired")).toEqual([]);
    expect(lines2.filter((l) => l.msg === "session resumed")).toHaveLength(1);
  });

  it("a second process with a node id another live process holds is refused; after a crash it waits the lease out", async () => {
    const dbUrl = await freshDatabase(url ?? "");
    const { createPostgresNodeLeases } = await import("../../src/infra/event-store/postgres.ts");
    const lease = (leaseMs: number) => createPostgresNodeLeases({ url: dbUrl, nodeId: "node-b", leaseMs });
    // The live one renews its lease every third of it, as a node does.
    const live = await lease(600);
    await live.claim();
    const renewing = setInterval(() => void live.renew(), 200);
    cleanup.push(async () => clearInterval(renewing));
    const twin = await lease(600);
    await expect(twin.claim()).rejects.toBeInstanceOf(NodeIdInUseError);
    // Nor can it renew what the live one holds.
    await expect(twin.renew()).rejects.toBeInstanceOf(NodeIdInUseError);
    // The live one dies (stops renewing): a restart of node-b takes the lease once it ran out, not before.
    clearInterval(renewing);
    const restarted = await lease(600);
    await restarted.claim();
    expect(await restarted.renew()).toBe(true);
    // The old process, were it only paused, finds its id taken: it may serve nothing as node-b again.
    await expect(live.renew()).rejects.toBeInstanceOf(NodeIdInUseError);
    await restarted.release();
  });

  it("a node whose id another process took is unhealthy, gives its sessions up and opens none", async () => {
    const dbUrl = await freshDatabase(url ?? "");
    const config = parseConfig({
      log_level: "silent",
      listen: { host: "127.0.0.1", port: 0 },
      node: { id: "node-b", lease_s: 1 },
      event_store: { kind: "postgres", url: dbUrl, poll_ms: 50 },
    });
    const server = await startServer(config, { runner: createEchoRunner() });
    cleanup.push(() => server.close());
    const client = await RealtimeClient.connect(server.url);
    cleanup.push(async () => client.terminate());
    client.send({ type: "session.update", session: {} });
    await client.waitFor("session.updated", { since: 0 });
    expect((await fetch(`http://127.0.0.1:${server.port}/health`)).status).toBe(200);
    // Another process holds node-b's lease now (as after this one was paused past its lease).
    const { Pool } = (await import("pg")).default;
    const pool = new Pool({ connectionString: dbUrl });
    await pool.query("UPDATE duplex_nodes SET instance = 'another', expires_at = now() + interval '1 hour'");
    await pool.end();
    await until(() => client.received.some((r) => r.event.type === "error"), "the session given up", 10_000);
    expect(client.received.at(-1)?.event).toMatchObject({ error: { code: "runtime_append_failed" } });
    expect((await fetch(`http://127.0.0.1:${server.port}/health`)).status).toBe(503);
    const late = await RealtimeClient.connect(server.url);
    cleanup.push(async () => late.terminate());
    // Its first event is answered with the refusal (a socket at a refusing server may still resume a session).
    late.send({ type: "session.update", session: {} });
    const refused = await late.waitFor("error", { since: 0 });
    expect(refused).toMatchObject({ error: { code: "resource_exhausted" } });
    expect((refused.error as { message: string }).message).toContain("no longer holds node id node-b");
  });
});
