import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RealtimeClient, type ServerEvent } from "../../src/client/index.ts";
import { foldLog, streamOf } from "../../src/engine/index.ts";
import { readWavFile, resamplePcm16 } from "../../src/infra/audio/index.ts";
import { encodeAudio } from "../../src/protocol/index.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * BEHAVIOUR.md scenarios 1, 2, 3, 4 and 16 against a real server on port 0, with the project's client.
 */
describe("realtime endpoint", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let client: RealtimeClient;

  beforeEach(async () => {
    server = await startTestServer();
    client = await RealtimeClient.connect(server.url);
  });
  afterEach(async () => {
    await client.close();
    await server.stop();
  });

  /** Opens the session and returns its id. */
  const open = async (): Promise<string> => {
    client.send({ type: "session.update", session: {} });
    const created = await client.waitFor("session.created", { since: 0 });
    await client.waitFor("session.updated", { since: 0 });
    return String((created.session as { id: string }).id);
  };

  /** Sends a heartbeat and returns the events received between `since` and its ack, excluding the ack. */
  const until = async (since: number): Promise<ServerEvent[]> => {
    const id = client.send({ type: "session.heartbeat" });
    await client.waitFor("session.heartbeat_ack", { since });
    expect(id).toMatch(/^evt_client_/);
    return client.received.slice(since, -1).map((r) => r.event);
  };

  it("scenario 1: session.update with a client id opens a session with a server id, generation 1 and a resume token", async () => {
    client.send({ type: "session.update", event_id: "evt_1", session: { session_id: "mine" } });
    const created = await client.waitFor("session.created", { since: 0 });
    const updated = await client.waitFor("session.updated", { since: 0 });
    const session = created.session as { id: string };
    expect(session.id).not.toBe("mine");
    expect(session.id).toMatch(/^sess_[0-9a-f]{32}$/);
    expect(created.attachment_generation).toBe(1);
    expect(created.resume_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(created).not.toHaveProperty("server_event_seq");
    expect(updated.server_event_seq).toBe(1);
    expect(client.types().slice(0, 2)).toEqual(["session.created", "session.updated"]);
    // Only the token's SHA-256 is in the log.
    const entries = await server.store.read(`session-${session.id}`);
    expect(JSON.stringify(entries.map((e) => e.data))).not.toContain(String(created.resume_token));
  });

  it("scenario 2: bad frames get invalid_json, event_too_large, unknown_event and bad_event, echo the event_id, and change nothing", async () => {
    const id = await open();
    const before = server.engine.get(id)?.current;
    const since = client.received.length;
    client.sendRaw("not json");
    client.sendRaw(
      `{"event_id":"evt_big","type":"input_audio_buffer.append","audio":"${"A".repeat(16 * 1024 * 1024)}"}`,
    );
    client.send({ type: "nope", event_id: "evt_nope" });
    client.send({ type: "playback.ack", event_id: "evt_ack" });
    const events = await until(since);
    const errors = events.filter((e) => e.type === "error").map((e) => e.error as Record<string, unknown>);
    expect(errors.map((e) => e.code)).toEqual(["invalid_json", "event_too_large", "unknown_event", "bad_event"]);
    expect(errors.map((e) => e.event_id)).toEqual([null, "evt_big", "evt_nope", "evt_ack"]);
    expect(errors.every((e) => e.type === "invalid_request_error")).toBe(true);
    expect(errors[3]?.param).toBe("played_ms");
    expect(events.filter((e) => e.type !== "error")).toEqual([]);
    const after = server.engine.get(id)?.current;
    expect(after?.phase).toBe("open");
    expect(after?.epoch).toBe(before?.epoch);
    expect(after?.input).toEqual(before?.input);
    expect(after?.turnState).toBe(before?.turnState);
  });

  it("scenario 4: a commit with an empty buffer is input_audio_buffer_empty, with no item and no response", async () => {
    await open();
    const since = client.received.length;
    client.send({ type: "input_audio_buffer.commit", event_id: "evt_c" });
    const events = await until(since);
    expect(events.map((e) => e.type)).toEqual(["error"]);
    expect(events[0]?.error).toMatchObject({ code: "input_audio_buffer_empty", event_id: "evt_c" });
  });

  it("scenario 16: odd PCM16, sample_rate_hz 3 and audio/mpeg are bad_audio, bad_event and unsupported_audio_format, and nothing is buffered", async () => {
    const id = await open();
    const since = client.received.length;
    client.send({
      type: "input_audio_buffer.append",
      event_id: "a1",
      audio: Buffer.from([1, 2, 3]).toString("base64"),
    });
    client.send({ type: "input_audio_buffer.append", event_id: "a2", audio: "AAAA", sample_rate_hz: 3 });
    client.send({ type: "input_audio_buffer.append", event_id: "a3", audio: "AAAA", format: "audio/mpeg" });
    client.send({ type: "input_audio_buffer.commit", event_id: "c1" });
    const events = await until(since);
    expect(events.map((e) => (e.error as { code: string }).code)).toEqual([
      "bad_audio",
      "bad_event",
      "unsupported_audio_format",
      "input_audio_buffer_empty",
    ]);
    expect(events.map((e) => (e.error as { event_id: string }).event_id)).toEqual(["a1", "a2", "a3", "c1"]);
    expect(server.engine.get(id)?.current.input.bufferedBytes).toBe(0);
  });

  it("scenario 17: semantic_vad is unsupported_turn_detection and the session keeps its configuration", async () => {
    const id = await open();
    const before = server.engine.get(id)?.current.config;
    const since = client.received.length;
    client.send({ type: "session.update", event_id: "u1", session: { turn_detection: { type: "semantic_vad" } } });
    const events = await until(since);
    expect(events.map((e) => e.type)).toEqual(["error"]);
    expect(events[0]?.error).toMatchObject({
      code: "unsupported_turn_detection",
      event_id: "u1",
      param: "session.turn_detection.type",
    });
    expect(server.engine.get(id)?.current.config).toEqual(before);
  });

  it("a session declared g711_ulaw hears 8 kHz mu-law speech, and session.updated shows both spellings", async () => {
    // Server VAD (no response): speech events come from turn detection only.
    client.send({
      type: "session.update",
      session: { input_audio_format: "g711_ulaw", turn_detection: { type: "server_vad", create_response: false } },
    });
    const created = await client.waitFor("session.created", { since: 0 });
    const updated = await client.waitFor("session.updated", { since: 0 });
    const id = String((created.session as { id: string }).id);
    expect(updated.session).toMatchObject({
      input_audio_format: "g711_ulaw",
      input_sample_rate_hz: 8000,
      output_audio_format: "pcm16",
      audio: { input: { format: { type: "audio/pcmu" } }, output: { format: { type: "audio/pcm", rate: 24000 } } },
    });
    expect((updated.session as { audio: { input: { format: object } } }).audio.input.format).toEqual({
      type: "audio/pcmu",
    });

    const wav = await readWavFile(sharedAudio("question_16k.wav"));
    const speech = resamplePcm16(wav.samples, wav.sampleRate, 8000);
    const all = new Int16Array(speech.length + 8000 * 1.5);
    all.set(speech);
    const ulaw = encodeAudio({ encoding: "g711_ulaw", rate: 8000 }, all);
    const since = client.received.length;
    // 100 ms appends of 800 one-byte samples, with no format: the session's g711_ulaw applies.
    for (let offset = 0, i = 0; offset < ulaw.length; offset += 800, i += 1) {
      client.appendAudio(ulaw.subarray(offset, offset + 800));
      if (i % 20 === 19) await sleep(1);
    }
    const events = await until(since);
    expect(events.filter((e) => e.type === "error")).toEqual([]);
    const started = events.find((e) => e.type === "input_audio_buffer.speech_started");
    const stopped = await client.waitFor("input_audio_buffer.speech_stopped", { since, timeoutMs: 10_000 });
    const speechMs = (speech.length / 8000) * 1000;
    expect(started?.audio_start_ms).toBeGreaterThanOrEqual(0);
    expect(started?.audio_start_ms).toBeLessThan(speechMs);
    expect(stopped.audio_end_ms).toBeGreaterThan(Number(started?.audio_start_ms) + 500);
    expect(stopped.audio_end_ms).toBeLessThanOrEqual((all.length / 8000) * 1000);
    // One byte a sample at 8 kHz: read as pcm16 the same bytes would make half the audio.
    expect(server.engine.get(id)?.current.input.clockMs).toBeCloseTo((all.length / 8000) * 1000, -1);
  });

  it("session.close is answered with session.closed and the socket closes", async () => {
    await open();
    client.send({ type: "session.close" });
    const closed = await client.waitFor("session.closed", { since: 0 });
    expect(closed.reason).toBe("session_close");
    expect((await client.closed).code).toBe(1000);
  });
});

describe("admission", () => {
  it("scenario 3: beyond max_sessions one resource_exhausted error, the socket closes, and a session opens once one ends", async () => {
    const server = await startTestServer({ duplex_session: { max_sessions: 1 } });
    try {
      const first = await RealtimeClient.connect(server.url);
      first.send({ type: "session.update", session: {} });
      await first.waitFor("session.created", { since: 0 });
      const second = await RealtimeClient.connect(server.url);
      second.send({ type: "session.update", session: {} });
      const refused = await second.waitFor("error");
      expect(refused).toEqual({
        type: "error",
        code: "resource_exhausted",
        error: {
          type: "rate_limit_error",
          code: "resource_exhausted",
          message: "session capacity reached (max_sessions=1)",
          param: null,
          event_id: expect.stringMatching(/^evt_client_/),
        },
      });
      expect((await second.closed).code).toBe(1013);
      expect(second.types()).toEqual(["error"]);
      first.send({ type: "session.close" });
      await first.closed;
      const third = await RealtimeClient.connect(server.url);
      third.send({ type: "session.update", session: {} });
      const created = await third.waitFor("session.created", { since: 0 });
      expect(created.type).toBe("session.created");
      await third.close();
    } finally {
      await server.stop();
    }
  });

  it("a socket that sends nothing: session.created at once, then config_timeout, the socket closes and the unused session ends", async () => {
    const server = await startTestServer({}, { firstMessageTimeoutMs: 200 });
    try {
      const client = await RealtimeClient.connect(server.url);
      const created = await client.waitFor("session.created", { since: 0 });
      const error = await client.waitFor("error", { since: 0, timeoutMs: 5000 });
      expect(error).toMatchObject({ type: "error", error: { code: "config_timeout", type: "invalid_request_error" } });
      expect(typeof (error.error as { message?: unknown }).message).toBe("string");
      expect((await client.closed).code).toBe(1008);
      expect(client.types()).toEqual(["session.created", "error"]);
      const id = (created.session as { id: string }).id;
      await expect.poll(() => server.engine.sessions().some((h) => h.sessionId === id && !h.isClosed)).toBe(false);
      const log = foldLog(await server.store.read(streamOf(id)));
      expect(log.state.phase).toBe("closed");
    } finally {
      await server.stop();
    }
  });

  it("a store slower than the first message timeout: config_timeout still comes after session.created", async () => {
    // Every append takes 400 ms, twice the timeout: the session opened on connect exists before the client hears of
    // it, and the client must hear of it before it hears why it closes.
    const server = await startTestServer(
      {},
      {
        firstMessageTimeoutMs: 200,
        wrapStore: (store) => ({
          ...store,
          append: async (...args: Parameters<typeof store.append>) => {
            await sleep(400);
            return store.append(...args);
          },
        }),
      },
    );
    try {
      const client = await RealtimeClient.connect(server.url);
      await client.waitFor("error", { since: 0, timeoutMs: 10_000 });
      expect((await client.closed).code).toBe(1008);
      expect(client.types()).toEqual(["session.created", "error"]);
      expect(client.received[1]?.event).toMatchObject({ error: { code: "config_timeout" } });
    } finally {
      await server.stop();
    }
  });
});

describe("query parameters", () => {
  it("?model= names the session's model, ?native_duplex=0 leaves the model-native lane, ?autostart=0 only resumes", async () => {
    const server = await startTestServer();
    try {
      const base = server.url;
      const a = await RealtimeClient.connect(`${base}?model=my-model&native_duplex=0&duplex=1`);
      a.send({ type: "session.update", session: {} });
      const created = await a.waitFor("session.created", { since: 0 });
      expect(created.session).toMatchObject({ model: "my-model", extra_body: { auto_response: false } });
      await a.close();
      const b = await RealtimeClient.connect(`${base}?autostart=0`);
      b.send({ type: "session.update", session: {} });
      expect(await b.waitFor("error")).toMatchObject({ code: "invalid_session_resume" });
      expect(b.types()).toEqual(["error"]);
      await b.close();
    } finally {
      await server.stop();
    }
  });
});

describe("HTTP routes", () => {
  it("GET /health, /v1/models and /metrics answer; /metrics counts decisions and appends of a real session", async () => {
    const server = await startTestServer();
    try {
      const http = server.url.replace("ws://", "http://").replace("/v1/realtime", "");
      const client = await RealtimeClient.connect(server.url);
      client.send({ type: "session.update", session: {} });
      await client.waitFor("session.updated");
      client.send({ type: "input_audio_buffer.commit" });
      await client.waitFor("error");
      const health = (await (await fetch(`${http}/health`)).json()) as { status: string; sessions: number };
      expect(health).toEqual({ status: "ok", sessions: 1 });
      const models = (await (await fetch(`${http}/v1/models`)).json()) as { data: { id: string }[] };
      expect(models.data.map((m) => m.id)).toEqual(["echo"]);
      const metrics = await (await fetch(`${http}/metrics`)).text();
      expect(metrics).toMatch(/duplex_sessions_live 1/);
      // The session's own state after its last committed step: a socket holds it, no one is speaking.
      expect(metrics).toMatch(/duplex_sessions\{attached="true",turn_state="idle"\} 1\n/);
      expect(metrics).not.toMatch(/duplex_sessions\{attached="false"/);
      expect(metrics).toMatch(/duplex_decisions_total\{type="SessionCreated"\} 1/);
      expect(metrics).toMatch(/duplex_rejections_total\{code="input_audio_buffer_empty"\} 1/);
      expect(metrics).toMatch(/duplex_log_append_seconds_count [1-9]/);
      expect(metrics).toMatch(/duplex_engine_added_seconds_count 0\n/);

      // Engine-added latency: every runner output whose events went to the socket is observed once.
      client.send({ type: "response.create", response: { instructions: "Answer." } });
      await client.waitFor("response.done", { timeoutMs: 20_000 });
      const deltas = client.types().filter((t) => t === "response.output_audio.delta").length;
      const created = await client.waitFor("session.created", { since: 0 });
      const id = String((created.session as { id: string }).id);
      const outputs = (await server.store.read(streamOf(id))).filter((e) => e.type === "StageOutputReceived").length;
      const after = await (await fetch(`${http}/metrics`)).text();
      const observed = Number(/duplex_engine_added_seconds_count (\d+)/.exec(after)?.[1]);
      expect(deltas).toBeGreaterThan(0);
      expect(observed).toBeGreaterThanOrEqual(deltas);
      expect(observed).toBeLessThanOrEqual(outputs);
      await client.close();
    } finally {
      await server.stop();
    }
  });
});

describe("arrival order", () => {
  it("an append right after a session.update that changes the input rate is decoded at the new rate", async () => {
    const server = await startTestServer();
    try {
      const client = await RealtimeClient.connect(server.url);
      client.send({
        type: "session.update",
        session: { audio: { input: { format: { type: "audio/pcm", rate: 16000 } } } },
      });
      const chunk = new Uint8Array(3200);
      for (let i = 0; i < 10; i += 1) client.appendAudio(chunk);
      client.send({
        type: "session.update",
        session: { audio: { input: { format: { type: "audio/pcm", rate: 24000 } } } },
      });
      for (let i = 0; i < 10; i += 1) client.appendAudio(chunk);
      client.send({ type: "input_audio_buffer.commit" });
      const committed = await client.waitFor("input_audio_buffer.committed");
      // 10 x 100 ms at 16 kHz, then 10 x 66.7 ms at 24 kHz: 1667 ms, not 2000.
      expect((committed.event as { audio_ms: number }).audio_ms).toBe(1667);
      await client.close();
    } finally {
      await server.stop();
    }
  });
});

describe("input backpressure", () => {
  it("refuses input beyond max_pending_input_bytes_per_session with input_backpressure, buffering nothing of it", async () => {
    const server = await startTestServer({ duplex_session: { max_pending_input_bytes_per_session: 20_000 } });
    try {
      const client = await RealtimeClient.connect(server.url);
      client.send({
        type: "session.update",
        session: { audio: { input: { format: { type: "audio/pcm", rate: 16000 } } } },
      });
      const created = await client.waitFor("session.created", { since: 0 });
      const id = String((created.session as { id: string }).id);
      client.appendAudio(new Uint8Array(24_000), { event_id: "too_big" });
      client.appendAudio(new Uint8Array(3_200), { event_id: "fine" });
      client.send({ type: "session.heartbeat" });
      await client.waitFor("session.heartbeat_ack", { since: 0 });
      const errors = client.received.map((r) => r.event).filter((e) => e.type === "error");
      expect(errors.map((e) => e.error)).toEqual([
        expect.objectContaining({ code: "input_backpressure", type: "rate_limit_error", event_id: "too_big" }),
      ]);
      // Only the accepted 100 ms are buffered.
      expect(server.engine.get(id)?.current.input.bufferedBytes).toBe(3_200);
      await client.close();
    } finally {
      await server.stop();
    }
  });
});

describe("session_mode", () => {
  it("turn starts sessions in the turn lane (auto_response false); ?native_duplex=1 still opts in", async () => {
    const server = await startTestServer({ session_mode: "turn" });
    try {
      const a = await RealtimeClient.connect(server.url);
      a.send({ type: "session.update", session: {} });
      expect((await a.waitFor("session.created", { since: 0 })).session).toMatchObject({
        extra_body: { auto_response: false },
      });
      await a.close();
      const b = await RealtimeClient.connect(`${server.url}?native_duplex=1`);
      b.send({ type: "session.update", session: {} });
      expect((await b.waitFor("session.created", { since: 0 })).session).toMatchObject({
        extra_body: { auto_response: true },
      });
      await b.close();
    } finally {
      await server.stop();
    }
  });
});
