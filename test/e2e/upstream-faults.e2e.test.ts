import { connect, createServer, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocketServer, type WebSocket as WsSocket } from "ws";
import { RealtimeClient } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { startTestServer } from "../support/server.ts";

/**
 * The upstream runner against upstreams that misbehave in the ways a hostile review found (fake upstreams written
 * with `ws`, or this server behind a TCP proxy): a cancel that overtakes response.created, unusable audio, text
 * ahead of its audio, an upstream's own cancel, an idle TTL upstream, and a response.create lost with a drop.
 */
type Server = Awaited<ReturnType<typeof startTestServer>>;
type Frame = { type: string; event_id?: string; response_id?: string } & Record<string, unknown>;
type Peer = {
  send(event: Record<string, unknown>): void;
  sendRaw(text: string): void;
  readonly state: Record<string, unknown>;
};

const sessionIdOf = (client: RealtimeClient): string =>
  String(
    ((client.received.find((r) => r.event.type === "session.created")?.event.session ?? {}) as { id?: string }).id,
  );

const ask = async (client: RealtimeClient, event: { type: string } & Record<string, unknown>, type: string) => {
  const since = client.received.length;
  client.send(event);
  return client.waitFor(type, { since, timeoutMs: 15_000 });
};

const AUDIO = Buffer.alloc(4800).toString("base64");

describe("the upstream runner against a misbehaving upstream", () => {
  const servers: Server[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0).reverse()) await server.stop().catch(() => undefined);
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  /**
   * A fake upstream: it opens a session at a connection's first session.update, and `onFrame` answers each frame
   * through `peer` (`send` one event, `sendRaw` any text; `state` is the connection's own).
   */
  const fakeUpstream = async (onFrame: (frame: Frame, peer: Peer) => void) => {
    const fake = new WebSocketServer({ host: "127.0.0.1", port: 0 });
    cleanups.push(() => new Promise((resolve) => fake.close(() => resolve())));
    const received: Frame[] = [];
    fake.on("connection", (socket: WsSocket) => {
      const peer: Peer = {
        send: (e) => socket.send(JSON.stringify(e)),
        sendRaw: (text) => socket.send(text),
        state: {},
      };
      let opened = false;
      socket.on("message", (data) => {
        const frame = JSON.parse(data.toString()) as Frame;
        received.push(frame);
        if (frame.type === "session.update" && !opened) {
          opened = true;
          peer.send({ type: "session.created", session: { id: "sess_fake" } });
        }
        onFrame(frame, peer);
      });
    });
    await new Promise((resolve) => fake.once("listening", resolve));
    return { url: `ws://127.0.0.1:${(fake.address() as { port: number }).port}/v1/realtime`, received };
  };

  const front = async (url: string, extra: Record<string, unknown> = {}) => {
    const a = await startTestServer({ runner: { kind: "upstream", url, dialect: "duplex", ...extra } });
    servers.push(a);
    const client = await RealtimeClient.connect(a.url);
    client.send({ type: "session.update", session: {} });
    await client.waitFor("session.updated", { since: 0 });
    return { a, client };
  };

  const replays = async (a: Server, client: RealtimeClient) =>
    replayEntries(await a.store.read(streamOf(sessionIdOf(client)))).ok;

  it("a cancel before the upstream's response.created cancels that response there, and nothing of it follows", async () => {
    const upstream = await fakeUpstream((frame, { send }) => {
      if (frame.type !== "response.create") return;
      setTimeout(() => {
        send({ type: "response.created", response: { id: "resp_up_1" } });
        send({ type: "response.speak" });
        send({ type: "response.output_audio.delta", delta: AUDIO });
        send({ type: "response.output_audio_transcript.delta", delta: "Too late." });
        send({ type: "response.done", response: { id: "resp_up_1", status: "completed" } });
      }, 200);
    });
    const { a, client } = await front(upstream.url);
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    const done = await ask(client, { type: "response.cancel" }, "response.done");
    expect(done.response).toMatchObject({ status: "cancelled" });
    await expect.poll(() => upstream.received.map((f) => f.type)).toContain("response.cancel");
    expect(upstream.received.find((f) => f.type === "response.cancel")?.response_id).toBe("resp_up_1");
    await new Promise((resolve) => setTimeout(resolve, 300));
    const types = client.types();
    expect(types.filter((t) => t === "response.created")).toHaveLength(1);
    expect(types.slice(types.indexOf("response.done"))).not.toContain("response.output_audio.delta");
    expect(await replays(a, client)).toBe(true);
  });

  it("audio at an unusable rate fails only that session, with upstream_protocol_error; the server goes on", async () => {
    const upstream = await fakeUpstream((frame, { send }) => {
      if (frame.type !== "response.create") return;
      send({ type: "response.created", response: { id: "resp_up_1" } });
      send({ type: "response.output_audio.delta", delta: AUDIO, sample_rate_hz: 0 });
    });
    const { a, client } = await front(upstream.url);
    const error = await ask(client, { type: "response.create", response: { instructions: "Answer." } }, "error");
    expect(error.error).toMatchObject({
      code: "upstream_protocol_error",
      message: expect.stringContaining("sample_rate_hz 0"),
    });
    expect((await fetch(`http://127.0.0.1:${a.port}/health`)).status).toBe(200);
    expect(await replays(a, client)).toBe(true);
  });

  it("transcript text streamed ahead of its audio (as OpenAI does) is all kept; audio at 16 kHz is resampled whole", async () => {
    const upstream = await fakeUpstream((frame, { send }) => {
      if (frame.type !== "response.create") return;
      send({ type: "response.created", response: { id: "resp_up_1" } });
      send({ type: "response.audio_transcript.delta", delta: "Hello " });
      send({ type: "response.audio_transcript.delta", delta: "there, " });
      send({ type: "response.audio.delta", delta: Buffer.alloc(3200).toString("base64"), sample_rate_hz: 16000 });
      send({ type: "response.audio_transcript.delta", delta: "how " });
      send({ type: "response.audio_transcript.delta", delta: "are you?" });
      send({ type: "response.audio.delta", delta: Buffer.alloc(3201).toString("base64"), sample_rate_hz: 16000 });
      send({ type: "response.audio.done" });
      send({ type: "response.done", response: { id: "resp_up_1", status: "completed" } });
    });
    const { a, client } = await front(upstream.url);
    const transcript = await ask(
      client,
      { type: "response.create", response: { instructions: "Answer." } },
      "response.output_audio_transcript.done",
    );
    expect(transcript.transcript).toBe("Hello there, how are you?");
    const done = await client.waitFor("response.done", { since: 0 });
    expect(done.response).toMatchObject({ status: "completed" });
    // 100 ms + 100 ms (and half a sample) of 16 kHz audio: about 200 ms at 24 kHz, not a sample lost at a seam.
    const audioMs = client.received
      .filter((r) => r.event.type === "response.output_audio.delta")
      .reduce((ms, r) => ms + (Buffer.from(String(r.event.delta), "base64").byteLength / 2 / 24000) * 1000, 0);
    expect(audioMs).toBeGreaterThan(190);
    expect(audioMs).toBeLessThanOrEqual(200.1);
    expect(await replays(a, client)).toBe(true);
  });

  it("the upstream's own cancel (its VAD heard the user) ends our response cancelled, not completed", async () => {
    const upstream = await fakeUpstream((frame, { send }) => {
      if (frame.type !== "response.create") return;
      send({ type: "response.created", response: { id: "resp_up_1" } });
      send({ type: "response.speak" });
      send({ type: "response.output_audio.delta", delta: AUDIO });
      send({ type: "response.output_audio_transcript.delta", delta: "I was saying" });
      send({
        type: "response.done",
        response: {
          id: "resp_up_1",
          status: "cancelled",
          status_details: { type: "cancelled", reason: "turn_detected" },
        },
      });
    });
    const { a, client } = await front(upstream.url);
    const done = await ask(client, { type: "response.create", response: { instructions: "Answer." } }, "response.done");
    expect(done.response).toMatchObject({ status: "cancelled", status_details: { reason: "turn_detected" } });
    expect(client.types()).toContain("output_audio_buffer.cleared");
    // The next turn works.
    expect(upstream.received.map((f) => f.type)).not.toContain("response.cancel");
    expect(await replays(a, client)).toBe(true);
  });

  it("heartbeats keep an idle upstream session alive past its idle TTL", async () => {
    const b = await startTestServer({
      runner: { kind: "scripted", script: "deploy/scripts/greeting.yaml" },
      duplex_session: { idle_ttl_s: 1 },
    });
    servers.push(b);
    const { a, client } = await front(b.url, { heartbeat_ms: 300 });
    await new Promise((resolve) => setTimeout(resolve, 1800));
    expect(client.types()).not.toContain("error");
    client.send({
      type: "conversation.item.create",
      item: { type: "message", role: "user", content: [{ type: "input_text", text: "still there?" }] },
    });
    const transcript = await ask(
      client,
      { type: "response.create", response: { instructions: "Answer." } },
      "response.output_audio_transcript.done",
    );
    expect(transcript.transcript).toBe("Sure, here is my answer.");
    expect(await replays(a, client)).toBe(true);
  });

  it("a response.create lost with a dropped link is sent again after the resume, and the response completes", async () => {
    const b = await startTestServer({ runner: { kind: "scripted", script: "deploy/scripts/greeting.yaml" } });
    servers.push(b);
    // A TCP proxy that can swallow what A sends (a link that is already dead one way), then drop everything.
    let swallow = false;
    const links = new Set<Socket>();
    const proxy = createServer((inbound) => {
      const outbound = connect(b.port, "127.0.0.1");
      inbound.on("data", (chunk) => {
        if (!swallow) outbound.write(chunk);
      });
      outbound.pipe(inbound);
      for (const s of [inbound, outbound]) {
        links.add(s);
        s.on("close", () => links.delete(s));
        s.on("error", () => undefined);
      }
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => new Promise((resolve) => proxy.close(() => resolve())));
    const { a, client } = await front(`ws://127.0.0.1:${(proxy.address() as { port: number }).port}/v1/realtime`);
    // B's session is open (and its session.created on its way back) before the link starts swallowing.
    await expect.poll(() => b.engine.sessions().filter((h) => h.current.phase === "open").length).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    swallow = true;
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    await new Promise((resolve) => setTimeout(resolve, 100));
    for (const link of links) link.destroy();
    swallow = false;
    const done = await client.waitFor("response.done", { since: 0, timeoutMs: 10_000 });
    expect(done.response).toMatchObject({ status: "completed" });
    expect(client.types()).not.toContain("error");
    expect(await replays(a, client)).toBe(true);
  });

  it("fencing: late upstream audio of a cancelled response is dropped, and the drop is in the log", async () => {
    // A fake upstream that keeps talking after a cancel: two more deltas of the old response, then its done.
    const upstream = await fakeUpstream((frame, { send }) => {
      if (frame.type === "response.create") {
        send({ type: "response.created", response: { id: "resp_up_1" } });
        send({ type: "response.speak" });
        send({ type: "response.output_audio.delta", delta: AUDIO });
        send({ type: "response.output_audio_transcript.delta", delta: "Before " });
      }
      if (frame.type === "response.cancel") {
        for (const text of ["late ", "words."]) {
          send({ type: "response.output_audio.delta", delta: AUDIO });
          send({ type: "response.output_audio_transcript.delta", delta: text });
        }
        send({ type: "response.done", response: { id: "resp_up_1", status: "cancelled" } });
      }
    });
    const { a, client } = await front(upstream.url);
    await ask(
      client,
      { type: "response.create", response: { instructions: "Answer." } },
      "response.output_audio_transcript.delta",
    );
    const done = await ask(client, { type: "response.cancel" }, "response.done");
    expect(done.response).toMatchObject({ status: "cancelled" });
    // The late events reach A's log as inputs, and nothing of them reaches the client.
    const id = sessionIdOf(client);
    await expect
      .poll(async () =>
        (await a.store.read(streamOf(id))).filter(
          (e) => e.type === "StageOutputReceived" && (e.data as { output: { kind: string } }).output.kind === "audio",
        ),
      )
      .toHaveLength(3);
    const after = client.received.slice(client.received.findIndex((r) => r.event.type === "response.done"));
    expect(after.map((r) => r.event.type)).not.toContain("response.output_audio.delta");
    const deltas = client.received.filter((r) => r.event.type === "response.output_audio_transcript.delta");
    expect(deltas.map((r) => r.event.delta)).toEqual(["Before "]);
    const entries = await a.store.read(streamOf(id));
    expect(entries.filter((e) => e.type === "AudioDelivered")).toHaveLength(1);
    await client.close();
    expect(await replays(a, client)).toBe(true);
  });

  it("an upstream refusal of the response A asked for fails that response, and the session goes on", async () => {
    const upstream = await fakeUpstream((frame, { send }) => {
      if (frame.type !== "response.create") return;
      send({
        type: "error",
        error: {
          type: "invalid_request_error",
          code: "response_already_active",
          message: "busy",
          event_id: frame.event_id,
        },
      });
    });
    const { a, client } = await front(upstream.url);
    const done = await ask(client, { type: "response.create", response: { instructions: "Answer." } }, "response.done");
    expect(done.response).toMatchObject({
      status: "failed",
      status_details: {
        error: { message: expect.stringContaining("refused response.create: response_already_active") },
      },
    });
    const beat = await ask(client, { type: "session.heartbeat" }, "session.heartbeat_ack");
    expect(beat.type).toBe("session.heartbeat_ack");
    await client.close();
    expect(await replays(a, client)).toBe(true);
  });

  it("garbage: only the session whose upstream sent it fails, with upstream_protocol_error", async () => {
    // It answers response.create with a short spoken response, and for a session whose instructions say "garbage"
    // sends a frame that is not JSON instead.
    const upstream = await fakeUpstream((frame, { send, sendRaw, state }) => {
      if (frame.type === "session.update") {
        state.garbage ||= (frame.session as { instructions?: string } | undefined)?.instructions === "garbage";
      }
      if (frame.type !== "response.create") return;
      if (state.garbage === true) {
        sendRaw("{not json");
        return;
      }
      send({ type: "response.created", response: { id: "resp_up_1" } });
      send({ type: "response.speak" });
      send({ type: "response.output_audio.delta", delta: AUDIO, sample_rate_hz: 24000 });
      send({ type: "response.output_audio_transcript.delta", delta: "Fine." });
      send({ type: "response.done", response: { id: "resp_up_1", status: "completed" } });
    });
    const a = await startTestServer({ runner: { kind: "upstream", url: upstream.url, dialect: "duplex" } });
    servers.push(a);
    const open = async (instructions: string) => {
      const client = await RealtimeClient.connect(a.url);
      client.send({ type: "session.update", session: { instructions } });
      await client.waitFor("session.updated", { since: 0 });
      await ask(
        client,
        {
          type: "conversation.item.create",
          item: { type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] },
        },
        "conversation.item.done",
      );
      return client;
    };
    const bad = await open("garbage");
    const good = await open("be good");
    bad.send({ type: "response.create", response: { instructions: "Answer." } });
    good.send({ type: "response.create", response: { instructions: "Answer." } });
    const error = await bad.waitFor("error", { since: 0 });
    expect(error.error).toMatchObject({ code: "upstream_protocol_error" });
    await bad.waitFor("session.closed", { since: 0 });
    const done = await good.waitFor("response.done", { since: 0 });
    expect(done.response).toMatchObject({ status: "completed" });
    const transcript = await good.waitFor("response.output_audio_transcript.done", { since: 0 });
    expect(transcript.transcript).toBe("Fine.");
    expect(good.types()).not.toContain("error");
    await good.close();
    expect(await replays(a, bad)).toBe(true);
    expect(await replays(a, good)).toBe(true);
  });
});
