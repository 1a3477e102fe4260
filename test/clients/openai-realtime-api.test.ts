import { type Realtime, RealtimeClient } from "openai-realtime-api";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { WebSocket as WsWebSocket } from "ws";
import { readWavFile, resamplePcm16 } from "../../src/infra/audio/index.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * A real third-party client against our server: the npm package `openai-realtime-api` (1.0.8, a port of OpenAI's
 * reference beta client). In Node 20 it has no native WebSocket, so it connects with `ws` and sends
 * `OpenAI-Beta: realtime=v1` plus `Authorization: Bearer <apiKey>` (dist/index.js:276-285);
 * `dangerouslyAllowAPIKeyInBrowser` matters only in a browser. `connect()` sends its whole default session
 * (pcm16 both ways, voice alloy, whisper-1 transcription, turn_detection null, tools [], ...) as the first
 * `session.update` (dist/index.js:689-709, 887-893).
 *
 * What the client surfaces: `realtime.event` (every event both ways), and its conversation model, fed by a fixed set
 * of beta server events (dist/index.js:797-839) through `RealtimeConversation.processEvent`, which asserts
 * `event_id` on every event it processes (dist/index.js:421-425; a failure there is an uncaught exception in the
 * socket's message handler). `conversation.updated` carries `delta.audio` / `delta.transcript` only from
 * `response.audio.delta` / `response.audio_transcript.delta` (dist/index.js:619-645, 835-838).
 *
 * Deviations are `it.fails` with a comment naming them; remove `.fails` when the server is fixed.
 */

const API_KEY = "sk-test-openai-realtime-api";
const RATE = 24000;
const CHUNK_SAMPLES = RATE / 10;

type Wire = { readonly type: string; readonly [key: string]: unknown };
type Update = { readonly itemId: string; readonly audio: number; readonly transcript: string | null };

/** Everything the client surfaces, recorded as it arrives (server events cloned: the client mutates them). */
const record = (client: RealtimeClient) => {
  const server: Wire[] = [];
  const sent: Wire[] = [];
  const updates: Update[] = [];
  const completed: string[] = [];
  client.on("realtime.event", (e) => {
    const copy = structuredClone(e.event) as unknown as Wire;
    (e.source === "server" ? server : sent).push(copy);
  });
  client.on("conversation.updated", (e) =>
    updates.push({
      itemId: e.item.id,
      audio: e.delta?.audio?.length ?? 0,
      transcript: e.delta?.transcript ?? null,
    }),
  );
  client.on("conversation.item.completed", (e) => completed.push(e.item.id));
  const of = (type: string, pred: (e: Wire) => boolean = () => true): Wire[] =>
    server.filter((e) => e.type === type && pred(e));
  const waitFor = (type: string, pred: (e: Wire) => boolean = () => true, timeout = 20_000): Promise<Wire> =>
    vi.waitFor(
      () => {
        const found = of(type, pred)[0];
        if (found === undefined) throw new Error(`no ${type} yet; received ${server.map((e) => e.type).join(", ")}`);
        return found;
      },
      { timeout, interval: 20 },
    );
  return { server, sent, updates, completed, of, waitFor };
};

type Recorder = ReturnType<typeof record>;

const samplesOf = (base64: unknown): number => Buffer.from(String(base64), "base64").byteLength / 2;

const session = (e: Wire): Record<string, unknown> => e.session as Record<string, unknown>;

describe("openai-realtime-api (beta RealtimeClient) against our server", () => {
  let question24k: Int16Array;
  const servers: Awaited<ReturnType<typeof startTestServer>>[] = [];
  const clients: RealtimeClient[] = [];

  beforeAll(async () => {
    const wav = await readWavFile(sharedAudio("question_16k.wav"));
    question24k = resamplePcm16(wav.samples, wav.sampleRate, RATE);
  });

  afterEach(async () => {
    vi.unstubAllGlobals();
    for (const client of clients.splice(0)) if (client.isConnected) client.disconnect();
    for (const server of servers.splice(0)) await server.stop();
  });

  /** Our server with API keys on (so the client's Authorization header is checked) and the echo runner. */
  const start = async (runner: Record<string, unknown> = {}) => {
    const server = await startTestServer({
      auth: { api_keys: [API_KEY] },
      runner: { kind: "echo", ...runner },
    });
    servers.push(server);
    return server;
  };

  /** Connects the package's client and waits for `session.created` (its own `waitForSessionCreated`). */
  const connect = async (url: string): Promise<{ client: RealtimeClient; rec: Recorder }> => {
    const client = new RealtimeClient({ url, apiKey: API_KEY });
    clients.push(client);
    const rec = record(client);
    await client.connect();
    await client.waitForSessionCreated();
    return { client, rec };
  };

  /**
   * The beta session of a server-VAD turn. `input_sample_rate_hz` is our extension (the client passes unknown
   * session keys through); without it beta `pcm16` is 24 kHz, as the client assumes (BEHAVIOUR.md, "Audio formats").
   */
  const serverVad = (declareRate: boolean): Realtime.SessionConfig =>
    ({
      input_audio_format: "pcm16",
      turn_detection: { type: "server_vad", threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 },
      ...(declareRate ? { input_sample_rate_hz: RATE } : {}),
    }) as Realtime.SessionConfig;

  /** Speech in 100 ms appends through `appendInputAudio` (copies: it base64s `.buffer`), then silence. */
  const speak = (client: RealtimeClient, pcm: Int16Array, silenceMs = 1000): void => {
    for (let i = 0; i < pcm.length; i += CHUNK_SAMPLES) client.appendInputAudio(pcm.slice(i, i + CHUNK_SAMPLES));
    const silence = new Int16Array((RATE * silenceMs) / 1000);
    for (let i = 0; i < silence.length; i += CHUNK_SAMPLES)
      client.appendInputAudio(silence.slice(i, i + CHUNK_SAMPLES));
  };

  /** One server-VAD turn: session update, speech, and the whole response. */
  const ask = async (declareRate = true) => {
    const server = await start();
    const { client, rec } = await connect(server.url);
    client.updateSession(serverVad(declareRate));
    await rec.waitFor(
      "session.updated",
      (e) => (session(e).turn_detection as { type?: string } | null)?.type === "server_vad",
    );
    speak(client, question24k);
    const created = await rec.waitFor("response.created");
    const responseId = String(created.response_id);
    const done = await rec.waitFor("response.done", (e) => e.response_id === responseId);
    const started = rec.of("input_audio_buffer.speech_started");
    const stopped = rec.of("input_audio_buffer.speech_stopped");
    const deltas = rec.of("response.audio.delta", (e) => e.response_id === responseId);
    const transcriptDeltas = rec.of("response.audio_transcript.delta", (e) => e.response_id === responseId);
    const transcriptDone = rec.of("response.audio_transcript.done", (e) => e.response_id === responseId)[0];
    return {
      server,
      client,
      rec,
      responseId,
      itemId: String(deltas[0]?.item_id ?? ""),
      done,
      started,
      stopped,
      deltas,
      samples: deltas.reduce((n, e) => n + samplesOf(e.delta), 0),
      transcriptDeltas,
      transcript: String(transcriptDone?.transcript ?? ""),
    };
  };

  it("connects with its headers and default session; every server event carries the event_id it asserts", async () => {
    const server = await start();
    const { client, rec } = await connect(server.url);
    const updated = await rec.waitFor("session.updated");

    // The client's first session.update (its whole default config) opened the session and was accepted.
    expect(rec.sent[0]?.type).toBe("session.update");
    expect(rec.server.map((e) => e.type).slice(0, 2)).toEqual(["session.created", "session.updated"]);
    expect(client.sessionCreated).toBe(true);
    const created = rec.of("session.created")[0] as Wire;
    expect(session(created).id).toMatch(/^sess_/);
    expect(session(updated)).toMatchObject({
      voice: "alloy",
      modalities: ["text", "audio"],
      input_audio_format: "pcm16",
      output_audio_format: "pcm16",
      turn_detection: null,
      temperature: 0.8,
    });
    expect(rec.of("error")).toEqual([]);
    expect(rec.server.every((e) => typeof e.event_id === "string" && e.event_id !== "")).toBe(true);
  });

  it("a wrong API key is refused at the handshake (HTTP 401, before any session) without crashing the client", async () => {
    const server = await start();
    const client = new RealtimeClient({ url: server.url, apiKey: "sk-wrong" });
    clients.push(client);
    await expect(client.connect()).rejects.toThrow(/Could not connect/);
    expect(client.sessionCreated).toBe(false);
    expect(server.engine.sessions()).toEqual([]);
  });

  it("browser-style connect (native WebSocket: subprotocols realtime, openai-insecure-api-key.<key>, openai-beta.realtime-v1)", async () => {
    // With a global WebSocket the client takes its browser path (dist/index.js:233-245): no headers, the API key
    // rides a subprotocol. `ws` stands in for the browser's WebSocket (same EventTarget API).
    vi.stubGlobal("WebSocket", WsWebSocket);
    const server = await start();
    const { client, rec } = await connect(server.url);
    await rec.waitFor("session.updated");
    expect((client.realtime.ws as unknown as WsWebSocket).protocol).toBe("realtime");
    expect(rec.of("error")).toEqual([]);
  });

  it("server VAD hears question_16k.wav (sent at 24 kHz) and the echo answers with 24 kHz audio and a transcript", async () => {
    const turn = await ask();
    const { rec, client } = turn;

    // One utterance: started, stopped, committed as the user item the VAD events named.
    expect(turn.started).toHaveLength(1);
    expect(turn.stopped).toHaveLength(1);
    const speechItem = String(turn.started[0]?.item_id);
    expect(turn.stopped[0]?.item_id).toBe(speechItem);
    const startMs = Number(turn.started[0]?.audio_start_ms);
    const endMs = Number(turn.stopped[0]?.audio_end_ms);
    // 2.6 s of speech, plus the 500 ms silence the stop includes; on the 24 kHz clock the client sent.
    expect(endMs).toBeGreaterThan(2600);
    expect(endMs).toBeLessThan(3500);
    const userCreated = rec.of("conversation.item.created", (e) => (e.item as { role?: string }).role === "user");
    expect(userCreated.map((e) => (e.item as { id: string }).id)).toEqual([speechItem]);
    expect(rec.of("input_audio_buffer.committed")[0]?.item_id).toBe(speechItem);

    // The client cut the user's audio out of what it sent by the server's ms, at 24 kHz: the clocks agree.
    const userItem = client.conversation.getItem(speechItem);
    expect(userItem?.role).toBe("user");
    expect(userItem?.status).toBe("completed");
    expect(userItem?.formatted.audio.length).toBe(
      Math.floor((endMs * RATE) / 1000) - Math.floor((startMs * RATE) / 1000),
    );

    // The response, as raw events: 24 kHz pcm16 audio as long as the utterance, one transcript delta per delta.
    expect(turn.deltas.length).toBeGreaterThan(1);
    expect(turn.deltas.every((e) => e.sample_rate_hz === RATE && e.format === "pcm16")).toBe(true);
    expect(turn.deltas.every((e) => e.item_id === turn.itemId)).toBe(true);
    expect(Math.abs((turn.samples * 1000) / RATE - (endMs - startMs))).toBeLessThan(40);
    expect(turn.transcriptDeltas).toHaveLength(turn.deltas.length);
    expect(turn.transcriptDeltas.map((e) => e.delta).join("")).toBe(turn.transcript);
    const heard = /^I heard (\d+\.\d) seconds of speech/.exec(turn.transcript);
    expect(Number(heard?.[1])).toBeCloseTo((endMs - startMs) / 1000, 0);
    expect((turn.done.response as { status: string }).status).toBe("completed");
    const limits = await rec.waitFor("rate_limits.updated");
    expect(rec.server.indexOf(limits)).toBe(rec.server.indexOf(turn.done) + 1);

    // What the client's conversation did understand: the assistant item, its audio part and its completion.
    const assistant = client.conversation.getItem(turn.itemId);
    expect(assistant?.role).toBe("assistant");
    expect(assistant?.status).toBe("completed");
    expect(assistant?.content.map((c) => c.type)).toEqual(["audio"]);
    expect(rec.completed).toEqual([speechItem, turn.itemId]);
    expect(client.conversation.responses.map((r) => r.id)).toEqual([turn.responseId]);

    expect(rec.of("error")).toEqual([]);
    expect(rec.server.every((e) => typeof e.event_id === "string")).toBe(true);
  });

  // This beta client listens only for response.audio.delta, response.audio_transcript.delta and response.text.delta
  // (dist/index.js:835-839, processors at 619-657). It announces `OpenAI-Beta: realtime=v1`, so the server renames
  // the GA output events at its socket (src/protocol/dialect.ts) and the client's conversation gets them.
  it("the client's conversation gets the response audio and transcript (beta delta names for a beta client)", async () => {
    const turn = await ask();
    const mine = turn.rec.updates.filter((u) => u.itemId === turn.itemId);
    expect(mine.reduce((n, u) => n + u.audio, 0)).toBe(turn.samples);
    expect(mine.map((u) => u.transcript ?? "").join("")).toBe(turn.transcript);
    const assistant = turn.client.conversation.getItem(turn.itemId);
    expect(assistant?.formatted.audio.length).toBe(turn.samples);
    expect(assistant?.formatted.transcript).toBe(turn.transcript);
  });

  // This client assumes beta pcm16 is 24 kHz (RealtimeConversation.defaultFrequency = 24e3, dist/index.js:377;
  // appendInputAudio sends no rate, dist/index.js:992-1004): heard at 16 kHz, its speech would end ~1.5x late.
  it("beta pcm16 without a declared rate is 24 kHz (OpenAI's default)", async () => {
    const turn = await ask(false);
    expect(Number(turn.stopped[0]?.audio_end_ms)).toBeLessThan(3500);
    expect(turn.transcript).toMatch(/^I heard (2\.\d|3\.[0-4]) seconds/);
    const updated = turn.rec.of("session.updated").at(-1) as Wire;
    expect(session(updated).input_sample_rate_hz).toBe(RATE);
    expect(session(updated).audio).toMatchObject({ input: { format: { type: "audio/pcm", rate: RATE } } });
  });

  it("the client's default turn_detection null: the echo answers when the VAD hears the end (model-native lane)", async () => {
    const server = await start();
    const { client, rec } = await connect(server.url);
    client.updateSession({ input_sample_rate_hz: RATE } as Realtime.SessionConfig);
    await rec.waitFor("session.updated", (e) => session(e).input_sample_rate_hz === RATE);
    speak(client, question24k);
    const done = await rec.waitFor("response.done");
    expect((done.response as { status: string }).status).toBe("completed");
    // Native lane: a VAD stop is no commit, so no user item; the model answered on its own.
    expect(rec.of("conversation.item.created", (e) => (e.item as { role?: string }).role === "user")).toEqual([]);
    expect(rec.of("response.audio.delta").length).toBeGreaterThan(1);
    expect(rec.of("error")).toEqual([]);
  });

  it("manual turn in the native lane: createResponse() (commit + response.create) gets one response", async () => {
    const server = await start();
    const { client, rec } = await connect(server.url);
    client.updateSession({ input_sample_rate_hz: RATE } as Realtime.SessionConfig);
    await rec.waitFor("session.updated", (e) => session(e).input_sample_rate_hz === RATE);
    speak(client, question24k, 0);
    client.createResponse();
    expect(rec.sent.slice(-2).map((e) => e.type)).toEqual(["input_audio_buffer.commit", "response.create"]);
    const done = await rec.waitFor("response.done");
    expect((done.response as { status: string }).status).toBe("completed");
    const user = rec.of("conversation.item.created", (e) => (e.item as { role?: string }).role === "user");
    expect(user).toHaveLength(1);
    // The client attached the audio it had sent to the committed user item.
    const userItemId = String((user[0]?.item as { id?: string } | undefined)?.id);
    const userItem = client.conversation.getItem(userItemId);
    expect(userItem?.formatted.audio.length).toBe(question24k.length);
    expect(rec.of("response.created")).toHaveLength(1);
    expect(rec.of("error")).toEqual([]);
  });

  // DEVIATION C: with turn_detection null and extra_body.auto_response false (the turn lane; the only lane of a
  // turn-based runner), an explicit input_audio_buffer.commit also starts a response
  // (src/domain/input-flow.ts commitInput: `createResponse ?? turnDetection?.createResponse ?? true`). OpenAI's rule,
  // which this client relies on, is commit => item only, response.create => exactly one response
  // (reference: "set auto_response=False in the config and call response.create when you want an answer"). The
  // client's createResponse() (commit + response.create, dist/index.js:1007-1015) therefore gets a response from the
  // commit and an error for its response.create: {"type":"error","error":{"type":"invalid_request_error",
  // "code":"response_already_active","message":"response resp_… is still active","event_id":"evt_…"}}.
  it("DEVIATION C: without auto response, commit makes an item only and response.create the one response", async () => {
    const server = await start();
    const { client, rec } = await connect(server.url);
    client.updateSession({
      input_sample_rate_hz: RATE,
      extra_body: { auto_response: false },
    } as Realtime.SessionConfig);
    await rec.waitFor("session.updated", (e) => session(e).input_sample_rate_hz === RATE);
    speak(client, question24k, 0);
    client.createResponse();
    const done = await rec.waitFor("response.done");
    expect((done.response as { status: string }).status).toBe("completed");
    await rec.waitFor("rate_limits.updated");
    expect(rec.of("response.created")).toHaveLength(1);
    expect(rec.of("error")).toEqual([]);
  });

  it("cancelResponse(item, samples) interrupts the response: cancelled, cleared, truncated, and the session goes on", async () => {
    // Real-time generation, so that there is a response left to interrupt.
    const server = await start({ speed_factor: 1 });
    const { client, rec } = await connect(server.url);
    client.updateSession(serverVad(true));
    await rec.waitFor(
      "session.updated",
      (e) => (session(e).turn_detection as { type?: string } | null)?.type === "server_vad",
    );
    speak(client, question24k);
    const created = await rec.waitFor("response.created");
    const responseId = String(created.response_id);
    const first = await rec.waitFor("response.audio.delta", (e) => e.response_id === responseId);
    const itemId = String(first.item_id);
    const heardSamples = () =>
      rec.of("response.audio.delta", (e) => e.response_id === responseId).reduce((n, e) => n + samplesOf(e.delta), 0);
    await vi.waitFor(() => expect(heardSamples()).toBeGreaterThanOrEqual(RATE / 2), { timeout: 10_000, interval: 10 });
    const played = heardSamples();
    const audioEndMs = Math.floor((played / RATE) * 1000);

    const cancelled = client.cancelResponse(itemId, played);
    expect((cancelled as { id?: string } | undefined)?.id).toBe(itemId);
    expect(rec.sent.slice(-2)).toMatchObject([
      { type: "response.cancel" },
      { type: "conversation.item.truncate", item_id: itemId, content_index: 0, audio_end_ms: audioEndMs },
    ]);

    const done = await rec.waitFor("response.done", (e) => e.response_id === responseId);
    const truncated = await rec.waitFor("conversation.item.truncated", (e) => e.item_id === itemId);
    expect(done.response).toMatchObject({
      status: "cancelled",
      status_details: { type: "cancelled", reason: "client_cancelled" },
    });
    expect(truncated).toMatchObject({ content_index: 0, audio_end_ms: audioEndMs });
    const doneAt = rec.server.indexOf(done);
    const clearedAt = rec.server.findIndex(
      (e) => e.type === "output_audio_buffer.cleared" && e.response_id === responseId,
    );
    expect(clearedAt).toBeGreaterThan(-1);
    expect(clearedAt).toBeLessThan(doneAt);
    // Nothing of the cancelled response after its response.done, and the epoch advanced.
    const later = rec.server.slice(doneAt + 1);
    expect(later.filter((e) => e.response_id === responseId && e.type !== "rate_limits.updated")).toEqual([]);
    expect(Number(done.epoch)).toBeGreaterThan(Number(first.epoch));
    const generated = rec
      .of("response.audio.delta", (e) => e.response_id === responseId)
      .reduce((n, e) => n + samplesOf(e.delta), 0);
    expect(generated).toBeLessThan(question24k.length);
    expect(rec.of("error")).toEqual([]);

    // The client's conversation: the assistant item ended incomplete and was never "completed".
    expect(client.conversation.getItem(itemId)?.status).toBe("incomplete");
    expect(rec.completed).not.toContain(itemId);

    // The session goes on: the next utterance gets a new, complete response.
    speak(client, question24k);
    const next = await rec.waitFor("response.created", (e) => e.response_id !== responseId);
    const nextDone = await rec.waitFor("response.done", (e) => e.response_id === next.response_id);
    expect((nextDone.response as { status: string }).status).toBe("completed");
    expect(rec.of("error")).toEqual([]);
  });

  it("disconnect() closes the socket; the server detaches the session (grace lease) instead of closing it", async () => {
    const server = await start();
    const { client, rec } = await connect(server.url);
    const sessionId = String(session(rec.of("session.created")[0] as Wire).id);
    await rec.waitFor("session.updated");
    const closed = client.realtime.waitForNext("close", { timeoutMs: 10_000 });
    client.disconnect();
    expect(client.isConnected).toBe(false);
    expect(client.conversation.getItems()).toEqual([]);
    expect(await closed).toMatchObject({ type: "close", error: false });
    await vi.waitFor(
      async () => {
        const entries = await server.store.read(`session-${sessionId}`);
        expect(entries.some((e) => /detach/i.test(e.type) || JSON.stringify(e.data).includes('"detached"'))).toBe(true);
      },
      { timeout: 5_000, interval: 20 },
    );
    expect(server.engine.get(sessionId)?.isClosed).toBe(false);
  });
});
