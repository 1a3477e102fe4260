import { get } from "node:https";
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { OpenAIRealtimeWS as BetaRealtimeWS } from "openai/beta/realtime/ws";
import { OpenAIRealtimeWS } from "openai/realtime/ws";
import type { SessionUpdateEvent as BetaSessionUpdateEvent } from "openai/resources/beta/realtime/realtime";
import type {
  RealtimeClientEvent,
  ResponseAudioDeltaEvent,
  ResponseAudioTranscriptDeltaEvent,
  ResponseAudioTranscriptDoneEvent,
  ResponseDoneEvent,
} from "openai/resources/realtime/realtime";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { pcm16FromBytes, pcm16ToBytes, readWavFile, resamplePcm16, rms } from "../../src/infra/audio/index.ts";
import { parseConfig } from "../../src/infra/config.ts";
import { startServer } from "../../src/server/index.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";
import { createTestCertificate, type TestCertificate } from "../support/tls.ts";

/**
 * The official `openai` npm SDK (v7) against our server, through what the SDK surfaces: its typed event emitter
 * (`rt.on(type)`), the catch-all `event` listener and the `error` listener.
 *
 * Transport: both SDK clients (`openai/realtime/ws`, `openai/beta/realtime/ws`) build their URL from the client's
 * `baseURL` and force `wss:` (realtime/internal-base.mjs `buildRealtimeURL`: `url.protocol = 'wss'`), then hand
 * `props.options` to `new WS.WebSocket(url, options)` unchanged except headers/maxPayload/perMessageDeflate
 * (realtime/ws.mjs, `socketOptions`). So every `ws` ClientOption works: these tests serve TLS (`listen.tls`) with a
 * self-signed certificate trusted through `options.ca`; the `createConnection` option reaches a plain `ws:` server
 * (DESIGN.md, "Known hard parts"), shown once below.
 *
 * Audio goes in as 100 ms appends paced at 4x real time (Silero VAD follows the audio clock, not the wall clock),
 * followed by 1 s of silence so server VAD hears the end of the utterance; the `echo` runner then speaks the
 * utterance back as 24 kHz pcm16 with a transcript.
 */

/** A server event as it came off the wire. */
type Wire = { readonly type: string; readonly [key: string]: unknown };
/** What the SDKs' `error` listener receives (`OpenAIRealtimeError`, realtime/internal-base.mjs). */
type SdkError = { readonly message: string; readonly error?: unknown; readonly cause?: unknown };

const OUTPUT_RATE_HZ = 24000;
const CHUNK_MS = 100;
const PACE_MS = 25;

/** Everything one SDK connection surfaced, in order, and a way to wait for what comes next. */
interface Recorder {
  readonly events: Wire[];
  readonly errors: SdkError[];
  /**
   * The first event at index >= `since` (default 0) of `type` for which `where` holds; rejects after `timeoutMs`
   * (default 20 s) naming what was awaited and the types seen.
   */
  next(type: string, where?: (event: Wire) => boolean, options?: { since?: number; timeoutMs?: number }): Promise<Wire>;
}

/** Records every event the SDK emits on `event` and every `error`, from now on. */
const record = (rt: OpenAIRealtimeWS | BetaRealtimeWS): Recorder => {
  const events: Wire[] = [];
  const errors: SdkError[] = [];
  const waiters = new Set<() => void>();
  (rt as OpenAIRealtimeWS).on("event", (event) => {
    events.push(event as unknown as Wire);
    for (const wake of waiters) wake();
  });
  (rt as OpenAIRealtimeWS).on("error", (error) => {
    errors.push(error);
  });
  return {
    events,
    errors,
    next: (type, where = () => true, { since = 0, timeoutMs = 20_000 } = {}) =>
      new Promise((resolve, reject) => {
        const check = () => {
          const found = events.slice(since).find((e) => e.type === type && where(e));
          if (found === undefined) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          const seen = [...new Set(events.slice(since).map((e) => e.type))].join(", ");
          reject(
            new Error(`no ${type} within ${timeoutMs} ms; seen: ${seen}; errors: ${errors.map((e) => e.message)}`),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
  };
};

/** Resolves when the SDK's socket is open (the SDK does not queue events sent before that). */
const opened = (rt: OpenAIRealtimeWS | BetaRealtimeWS): Promise<void> =>
  new Promise((resolve, reject) => {
    rt.socket.once("open", () => resolve());
    rt.socket.once("error", reject);
  });

/** Mono PCM16 samples of a shared test file, at `rate` Hz. */
const speech = async (name: string, rate: number): Promise<Int16Array> => {
  const wav = await readWavFile(sharedAudio(name));
  expect(wav.channels).toBe(1);
  return wav.sampleRate === rate ? wav.samples : resamplePcm16(wav.samples, wav.sampleRate, rate);
};

/** Sends `samples` (PCM16 at `rate` Hz) then 1 s of silence as 100 ms `input_audio_buffer.append`s, paced. */
const say = async (send: (audio: string) => void, samples: Int16Array, rate: number): Promise<void> => {
  const padded = new Int16Array(samples.length + rate);
  padded.set(samples);
  const step = (rate * CHUNK_MS) / 1000;
  for (let at = 0; at < padded.length; at += step) {
    send(Buffer.from(pcm16ToBytes(padded.subarray(at, at + step))).toString("base64"));
    await sleep(PACE_MS);
  }
};

/** Decodes base64 PCM16 deltas, in order, into samples. */
const decode = (deltas: readonly string[]): Int16Array =>
  pcm16FromBytes(Uint8Array.from(Buffer.concat(deltas.map((d) => Buffer.from(d, "base64")))));

/** Whether a server event belongs to the response `id` (its assistant item is `item_<id>`, BEHAVIOUR "Identity"). */
const belongsTo = (event: Wire, id: string): boolean => {
  const nested = (key: string) => (event[key] as { id?: unknown } | undefined)?.id;
  return (
    event.response_id === id ||
    event.item_id === `item_${id}` ||
    nested("response") === id ||
    nested("item") === `item_${id}`
  );
};

/**
 * GA `session.update` declaring PCM16 input at `rate` Hz. The SDK types the GA pcm rate as the literal `24000`
 * (resources/realtime/realtime.d.ts, `RealtimeAudioFormats.AudioPCM.rate?: 24000`); our server also takes 8, 16 and
 * 48 kHz, so other rates need this one cast.
 */
const gaSessionUpdate = (rate: number, turnDetection?: { type: "server_vad" }): RealtimeClientEvent =>
  ({
    type: "session.update",
    session: {
      type: "realtime",
      audio: {
        input: { format: { type: "audio/pcm", rate }, ...(turnDetection ? { turn_detection: turnDetection } : {}) },
      },
    },
  }) as RealtimeClientEvent;

describe("openai SDK, GA client (openai/realtime/ws), over TLS", () => {
  let cert: TestCertificate;
  let server: Awaited<ReturnType<typeof startTestServer>> | undefined;
  let rt: OpenAIRealtimeWS | undefined;

  beforeAll(async () => {
    cert = await createTestCertificate();
  });
  afterAll(async () => {
    await cert.remove();
  });
  afterEach(async () => {
    rt?.close();
    rt = undefined;
    await server?.stop();
    server = undefined;
  });

  /** Starts a TLS server (with `overrides` merged into the deploy config) and connects the GA client to it. */
  const connectGa = async (overrides: Record<string, unknown> = {}) => {
    server = await startTestServer({ listen: { host: "127.0.0.1", port: 0, tls: cert.files }, ...overrides });
    expect(server.url).toMatch(/^wss:\/\/127\.0\.0\.1:\d+\/v1\/realtime$/);
    const client = new OpenAI({ apiKey: "test", baseURL: `https://127.0.0.1:${server.port}/v1` });
    const ga = new OpenAIRealtimeWS({ model: "echo", options: { ca: cert.ca } }, client);
    rt = ga;
    const recorder = record(ga);
    await opened(ga);
    return { rt: ga, recorder, append: (audio: string) => ga.send({ type: "input_audio_buffer.append", audio }) };
  };

  // OpenAI's servers send session.created when the socket opens; clients such as Pipecat's OpenAI realtime service
  // send their first session.update only after it (BEHAVIOUR.md, "Identity", ours).
  it("serves a client that waits for session.created before its first session.update", async () => {
    const { rt, recorder } = await connectGa();
    const created = await recorder.next("session.created", undefined, { timeoutMs: 5000 });
    expect(recorder.events.map((e) => e.type)).toEqual(["session.created"]);
    const id = (created.session as { id: string }).id;
    rt.send(gaSessionUpdate(24000));
    const updated = await recorder.next("session.updated");
    expect(updated.session).toMatchObject({ id, audio: { input: { format: { type: "audio/pcm", rate: 24000 } } } });
    expect(recorder.errors).toEqual([]);
  });

  it.each([16000, 24000])(
    "answers a spoken question sent at %i Hz: audio deltas decode to over a second of speech, the transcript deltas add up to the done transcript, and response.done is completed",
    async (rate) => {
      const { rt, recorder, append } = await connectGa();
      const audio: ResponseAudioDeltaEvent[] = [];
      const transcript: ResponseAudioTranscriptDeltaEvent[] = [];
      const transcriptDone: ResponseAudioTranscriptDoneEvent[] = [];
      const done: ResponseDoneEvent[] = [];
      rt.on("response.output_audio.delta", (e) => audio.push(e));
      rt.on("response.output_audio_transcript.delta", (e) => transcript.push(e));
      rt.on("response.output_audio_transcript.done", (e) => transcriptDone.push(e));
      rt.on("response.done", (e) => done.push(e));

      rt.send(gaSessionUpdate(rate));
      const updated = await recorder.next("session.updated");
      expect(updated.session).toMatchObject({
        type: "realtime",
        audio: { input: { format: { type: "audio/pcm", rate } }, output: { format: { rate: OUTPUT_RATE_HZ } } },
      });
      const question = await speech("question_16k.wav", rate);
      await say(append, question, rate);
      const finished = await recorder.next("response.done");

      expect(recorder.errors.map((e) => e.message)).toEqual([]);
      const created = await recorder.next("response.created");
      const id = (created.response as { id: string }).id;
      expect(done.map((e) => [e.response.id, e.response.status])).toEqual([[id, "completed"]]);
      expect(audio.length).toBeGreaterThan(0);
      for (const delta of audio) {
        expect(delta).toMatchObject({ response_id: id, item_id: `item_${id}`, output_index: 0, content_index: 0 });
        expect(delta.event_id).toEqual(expect.any(String));
      }
      const samples = decode(audio.map((d) => d.delta));
      const ms = (samples.length * 1000) / OUTPUT_RATE_HZ;
      expect(ms).toBeGreaterThanOrEqual(1000);
      expect(ms).toBeLessThanOrEqual((question.length * 1000) / rate + 1000);
      expect(rms(samples)).toBeGreaterThan(0.01);

      expect(transcript.length).toBe(audio.length);
      expect(transcriptDone).toHaveLength(1);
      const text = transcriptDone[0]?.transcript ?? "";
      expect(text.length).toBeGreaterThan(0);
      expect(transcript.map((d) => d.delta).join("")).toBe(text);
      expect(done[0]?.response.output?.[0]).toMatchObject({
        id: `item_${id}`,
        type: "message",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_audio", transcript: text }],
      });
      // response.done comes after every delta of its response.
      const types = recorder.events.map((e) => e.type);
      expect(types.lastIndexOf("response.output_audio.delta")).toBeLessThan(recorder.events.indexOf(finished));
    },
  );

  it("a response.cancel while the answer streams ends it with response.done cancelled (client_cancelled) and nothing of it afterwards; the next utterance is answered", async () => {
    const { rt, recorder, append } = await connectGa();
    rt.send(gaSessionUpdate(16000));
    await recorder.next("session.updated");
    let cancelled = false;
    rt.on("response.output_audio.delta", (e) => {
      if (cancelled) return;
      cancelled = true;
      rt.send({ type: "response.cancel", event_id: "evt_cancel" });
      expect(e.response_id).toMatch(/^resp_/);
    });
    await say(append, await speech("question_16k.wav", 16000), 16000);
    const first = String(((await recorder.next("response.created")).response as { id: string }).id);
    const done = await recorder.next("response.done", (e) => belongsTo(e, first));
    expect(done.response).toMatchObject({
      id: first,
      status: "cancelled",
      status_details: { type: "cancelled", reason: "client_cancelled" },
    });
    const doneAt = recorder.events.indexOf(done);
    const cleared = recorder.events.findIndex((e) => e.type === "output_audio_buffer.cleared" && belongsTo(e, first));
    expect(cleared).toBeGreaterThanOrEqual(0);
    expect(cleared).toBeLessThan(doneAt);

    // The session goes on: a second utterance gets a new, completed response.
    await say(append, await speech("interrupt_16k.wav", 16000), 16000);
    const second = await recorder.next("response.done", (e) => !belongsTo(e, first), { since: doneAt });
    expect(second.response).toMatchObject({ status: "completed" });
    expect(recorder.events.slice(doneAt + 1).filter((e) => belongsTo(e, first))).toEqual([]);

    // A cancel with nothing active reaches the SDK's error listener, and is harmless.
    rt.send({ type: "response.cancel", event_id: "evt_idle_cancel" });
    await recorder.next("error", () => true, { since: recorder.events.indexOf(second) });
    expect(recorder.errors).toHaveLength(1);
    expect(recorder.errors[0]?.error).toMatchObject({
      type: "invalid_request_error",
      code: "response_not_active",
      event_id: "evt_idle_cancel",
    });
    expect(recorder.errors[0]?.message).toContain("code=response_not_active");
    expect(rt.socket.readyState).toBe(rt.socket.OPEN);
  });

  it("a second utterance while the first is answered barges in: response.done cancelled (turn_detected), nothing of it afterwards, and the second is answered", async () => {
    // Real-time-ish runner so that the first answer is still streaming when the second utterance starts.
    const { rt, recorder, append } = await connectGa({
      runner: { kind: "echo", chunk_period_ms: 200, speed_factor: 2 },
    });
    rt.send(gaSessionUpdate(16000, { type: "server_vad" }));
    await recorder.next("session.updated");
    await say(append, await speech("question_16k.wav", 16000), 16000);
    const firstDelta = await recorder.next("response.output_audio.delta");
    const first = String(firstDelta.response_id);
    await say(append, await speech("interrupt_16k.wav", 16000), 16000);

    const done = await recorder.next("response.done", (e) => belongsTo(e, first));
    expect(done.response).toMatchObject({
      id: first,
      status: "cancelled",
      status_details: { type: "cancelled", reason: "turn_detected" },
    });
    const doneAt = recorder.events.indexOf(done);
    const second = await recorder.next("response.done", (e) => !belongsTo(e, first), { since: doneAt });
    expect(second.response).toMatchObject({ status: "completed" });
    expect(recorder.events.slice(doneAt + 1).filter((e) => belongsTo(e, first))).toEqual([]);
    expect(recorder.errors.map((e) => e.message)).toEqual([]);
  });

  // DEVIATION (contract, "Message examples": conversation.item.done carries the item's previous_item_id): with
  // server VAD, the assistant item's conversation.item.added says previous_item_id = the user item, and its
  // conversation.item.done says previous_item_id: null. A client that orders its history by previous_item_id (the
  // GA type has `ConversationItemDone.previous_item_id?: string | null`) loses the link when it applies `done`.
  it("conversation.item.done of the answer repeats the previous_item_id of its conversation.item.added", async () => {
    const { rt, recorder, append } = await connectGa();
    rt.send(gaSessionUpdate(16000, { type: "server_vad" }));
    await recorder.next("session.updated");
    await say(append, await speech("question_16k.wav", 16000), 16000);
    const finished = await recorder.next("response.done");
    const id = String((finished.response as { id: string }).id);
    const ofAnswer = (e: Wire) => belongsTo(e, id);
    const added = await recorder.next("conversation.item.added", ofAnswer);
    const itemDone = await recorder.next("conversation.item.done", ofAnswer);
    expect(added.previous_item_id).toMatch(/^item_/);
    expect(itemDone.previous_item_id).toBe(added.previous_item_id);
  });

  it("accepts the SDK's Bearer key when auth.api_keys is set", async () => {
    const { rt, recorder } = await connectGa({ auth: { api_keys: ["test"] } });
    rt.send(gaSessionUpdate(16000));
    await recorder.next("session.updated");
    expect(recorder.errors).toEqual([]);
  });

  // DEVIATION (BEHAVIOUR.md "Errors": before a session exists, handshake errors use the flat shape
  // `{type: "error", error: "message", code}`; the server sends
  // `{"type":"error","error":"missing or invalid API key","code":"unauthorized"}` and closes with 1008). The SDK reads
  // `event.error.message` / `.code` (realtime/internal-base.mjs `_onError`), so it reports
  // "undefined code=undefined param=undefined type=undefined event_id=undefined" and `error.error` is a bare string.
  it("refuses a wrong API key at the upgrade with HTTP 401, which the SDK reports", async () => {
    server = await startTestServer({
      listen: { host: "127.0.0.1", port: 0, tls: cert.files },
      auth: { api_keys: ["right"] },
    });
    const client = new OpenAI({ apiKey: "wrong", baseURL: `https://127.0.0.1:${server.port}/v1` });
    const ga = new OpenAIRealtimeWS({ model: "echo", options: { ca: cert.ca } }, client);
    rt = ga;
    const recorder = record(ga);
    const closed = new Promise<number>((resolve) => ga.socket.once("close", (code) => resolve(code)));
    expect(await closed).toBe(1006);
    expect(recorder.errors.length).toBeGreaterThanOrEqual(1);
    expect(recorder.errors.map((e) => e.message).join(" ")).toContain("401");
    expect(server.engine.sessions()).toEqual([]);
  });
});

describe("openai SDK, beta client (openai/beta/realtime/ws), over TLS", () => {
  let cert: TestCertificate;
  let server: Awaited<ReturnType<typeof startTestServer>> | undefined;
  let rt: BetaRealtimeWS | undefined;

  beforeAll(async () => {
    cert = await createTestCertificate();
  });
  afterAll(async () => {
    await cert.remove();
  });
  afterEach(async () => {
    rt?.close();
    rt = undefined;
    await server?.stop();
    server = undefined;
  });

  /**
   * Beta `session.update`. Beta `pcm16` has no rate field; our server reads it at the session's input rate, 16 kHz
   * by default (reference "Using DuplexClient": 16 kHz pcm16 in), and `input_sample_rate_hz` (our extension) says so.
   */
  const betaSessionUpdate: BetaSessionUpdateEvent & { session: { input_sample_rate_hz: number } } = {
    type: "session.update",
    session: {
      modalities: ["audio", "text"],
      input_audio_format: "pcm16",
      output_audio_format: "pcm16",
      input_sample_rate_hz: 16000,
      turn_detection: { type: "server_vad" },
    },
  };

  const connectBeta = async () => {
    server = await startTestServer({ listen: { host: "127.0.0.1", port: 0, tls: cert.files } });
    const client = new OpenAI({ apiKey: "test", baseURL: `https://127.0.0.1:${server.port}/v1` });
    const beta = new BetaRealtimeWS({ model: "echo", options: { ca: cert.ca } }, client);
    rt = beta;
    const recorder = record(beta);
    await opened(beta);
    return { rt: beta, recorder, append: (audio: string) => beta.send({ type: "input_audio_buffer.append", audio }) };
  };

  it("with beta spellings: the session, items, audio and transcript arrive under beta names, and response.done is completed", async () => {
    const { rt, recorder, append } = await connectBeta();
    const itemsCreated: string[] = [];
    const betaAudio: unknown[] = [];
    const done: string[] = [];
    rt.on("conversation.item.created", (e) => itemsCreated.push(`${e.item.role}:${e.item.id}`));
    rt.on("response.audio.delta", (e) => betaAudio.push(e));
    rt.on("response.audio_transcript.delta", (e) => betaAudio.push(e));
    rt.on("response.done", (e) => done.push(`${e.response.id}:${e.response.status}`));

    rt.send(betaSessionUpdate);
    const updated = await rt.emitted("session.updated");
    expect(updated.session).toMatchObject({
      modalities: ["audio", "text"],
      input_audio_format: "pcm16",
      output_audio_format: "pcm16",
      turn_detection: { type: "server_vad" },
    });
    await say(append, await speech("question_16k.wav", 16000), 16000);
    const finished = await recorder.next("response.done");
    const id = String((finished.response as { id: string }).id);

    expect(recorder.errors.map((e) => e.message)).toEqual([]);
    expect(done).toEqual([`${id}:completed`]);
    expect(itemsCreated).toEqual([expect.stringMatching(/^user:item_/), `assistant:item_${id}`]);
    // The beta SDK sends `OpenAI-Beta: realtime=v1`, so the server renames the GA output events at the socket
    // (src/protocol/dialect.ts): its typed response.audio.* listeners hear the answer, and no GA name arrives.
    expect(betaAudio.length).toBeGreaterThanOrEqual(2);
    expect(recorder.events.filter((e) => e.type.startsWith("response.output_audio"))).toEqual([]);
    const audio = recorder.events.filter((e) => e.type === "response.audio.delta" && belongsTo(e, id));
    const samples = decode(audio.map((e) => String(e.delta)));
    expect((samples.length * 1000) / OUTPUT_RATE_HZ).toBeGreaterThanOrEqual(1000);
    expect(rms(samples)).toBeGreaterThan(0.01);
    const deltas = recorder.events.filter((e) => e.type === "response.audio_transcript.delta");
    expect(betaAudio).toHaveLength(audio.length + deltas.length);
    const transcript = await recorder.next("response.audio_transcript.done");
    expect(String(transcript.transcript).length).toBeGreaterThan(0);
    expect(deltas.map((e) => e.delta).join("")).toBe(transcript.transcript);
  });

  it("response.cancel while the answer streams ends it with response.done cancelled and nothing of it afterwards", async () => {
    const { rt, recorder, append } = await connectBeta();
    rt.send(betaSessionUpdate);
    await recorder.next("session.updated");
    let cancelled = false;
    rt.on("event", (e) => {
      if (cancelled || (e as { type: string }).type !== "response.audio.delta") return;
      cancelled = true;
      rt.send({ type: "response.cancel" });
    });
    await say(append, await speech("question_16k.wav", 16000), 16000);
    const first = String(((await recorder.next("response.created")).response as { id: string }).id);
    const done = await recorder.next("response.done", (e) => belongsTo(e, first));
    expect(done.response).toMatchObject({ status: "cancelled", status_details: { reason: "client_cancelled" } });
    const doneAt = recorder.events.indexOf(done);
    await say(append, await speech("interrupt_16k.wav", 16000), 16000);
    const second = await recorder.next("response.done", (e) => !belongsTo(e, first), { since: doneAt });
    expect(second.response).toMatchObject({ status: "completed" });
    expect(recorder.events.slice(doneAt + 1).filter((e) => belongsTo(e, first))).toEqual([]);
    expect(recorder.errors.map((e) => e.message)).toEqual([]);
  });
});

describe("TLS listener (listen.tls)", () => {
  let cert: TestCertificate;
  let server: Awaited<ReturnType<typeof startTestServer>> | undefined;

  beforeAll(async () => {
    cert = await createTestCertificate();
  });
  afterAll(async () => {
    await cert.remove();
  });
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it("serves GET /health over https", async () => {
    server = await startTestServer({ listen: { host: "127.0.0.1", port: 0, tls: cert.files } });
    const port = server.port;
    const body = await new Promise<string>((resolve, reject) => {
      get({ host: "127.0.0.1", port, path: "/health", ca: cert.ca }, (res) => {
        let text = "";
        res.on("data", (chunk) => {
          text += String(chunk);
        });
        res.on("end", () => resolve(`${res.statusCode} ${text}`));
      }).on("error", reject);
    });
    expect(body).toBe('200 {"status":"ok","sessions":0}');
  });

  it("is real TLS: without trusting the certificate the SDK reports the self-signed certificate", async () => {
    server = await startTestServer({ listen: { host: "127.0.0.1", port: 0, tls: cert.files } });
    const client = new OpenAI({ apiKey: "test", baseURL: `https://127.0.0.1:${server.port}/v1` });
    const rt = new OpenAIRealtimeWS({ model: "echo" }, client);
    const error = await new Promise<SdkError>((resolve) => rt.on("error", resolve));
    expect((error.cause as { code?: string }).code).toBe("DEPTH_ZERO_SELF_SIGNED_CERT");
    rt.socket.terminate();
  });

  it("without listen.tls serves plain ws:, which the SDK reaches only through the ws createConnection option", async () => {
    server = await startTestServer();
    expect(server.url).toMatch(/^ws:\/\//);
    const port = server.port;
    const client = new OpenAI({ apiKey: "test", baseURL: `https://127.0.0.1:${port}/v1` });
    // The SDK still builds wss://127.0.0.1:PORT/v1/realtime; createConnection replaces ws's tls.connect by a TCP one.
    const rt = new OpenAIRealtimeWS(
      { model: "echo", options: { createConnection: () => connect({ host: "127.0.0.1", port }) } },
      client,
    );
    const recorder = record(rt);
    try {
      expect(rt.url.protocol).toBe("wss:");
      await opened(rt);
      rt.send(gaSessionUpdate(16000));
      await recorder.next("session.updated");
      expect(recorder.events.map((e) => e.type).slice(0, 2)).toEqual(["session.created", "session.updated"]);
      expect(recorder.errors).toEqual([]);
    } finally {
      rt.close();
    }
  });

  it("refuses to start when listen.tls.cert cannot be read, naming the key and the file", async () => {
    const config = parseConfig({
      log_level: "silent",
      listen: { port: 0, tls: { cert: "/nonexistent/cert.pem", key: cert.files.key } },
    });
    await expect(startServer(config)).rejects.toMatchObject({
      name: "ConfigError",
      message: expect.stringContaining("listen.tls.cert: cannot read /nonexistent/cert.pem"),
    });
  });

  it("rejects an unknown key under listen.tls", () => {
    expect(() => parseConfig({ listen: { tls: { cert: "c", key: "k", ca: "x" } } })).toThrow(/listen\.tls/);
  });
});

describe("openai SDK, HTTP routes and refusals", () => {
  let cert: TestCertificate;
  let server: Awaited<ReturnType<typeof startTestServer>> | undefined;
  beforeAll(async () => {
    cert = await createTestCertificate();
  });
  afterAll(async () => {
    await cert.remove();
  });
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it("models.list() and models.retrieve() read the served model in OpenAI's shape; an unknown id is a 404 NotFoundError", async () => {
    server = await startTestServer();
    const client = new OpenAI({ apiKey: "test", baseURL: `http://127.0.0.1:${server.port}/v1` });
    const listed = [];
    for await (const model of client.models.list()) listed.push(model);
    // The served model: `echo`, or the front's `upstream:…` when DUPLEX_TEST_CHAIN puts a server behind it.
    const served = server.model;
    expect(served).toEqual(process.env.DUPLEX_TEST_CHAIN === "1" ? expect.stringMatching(/^upstream:/) : "echo");
    expect(listed).toEqual([
      {
        id: served,
        object: "model",
        created: expect.any(Number),
        owned_by: "duplex-server",
        capabilities: expect.objectContaining({ implementation_level: "model_native_duplex" }),
      },
    ]);
    expect(await client.models.retrieve(served)).toMatchObject({ id: served, object: "model" });
    const missing = await client.models.retrieve("gpt-nope").catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing).toMatchObject({ status: 404, code: "model_not_found" });
  });

  it("a key the server refuses reaches models.list() as an AuthenticationError with its code", async () => {
    server = await startTestServer({ auth: { api_keys: ["sk-right"] } });
    const wrong = new OpenAI({ apiKey: "sk-wrong", baseURL: `http://127.0.0.1:${server.port}/v1` });
    const refused = await wrong.models.list().catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(refused).toMatchObject({ status: 401, code: "unauthorized" });
  });

  it("five runs of a small SDK script in a row against a default server are never refused: close() ends each session", async () => {
    server = await startTestServer({ listen: { host: "127.0.0.1", port: 0, tls: cert.files } });
    const client = new OpenAI({ apiKey: "test", baseURL: `https://127.0.0.1:${server.port}/v1` });
    for (let run = 1; run <= 6; run++) {
      const rt = new OpenAIRealtimeWS({ model: "echo", options: { ca: cert.ca } }, client);
      const events = record(rt);
      await opened(rt);
      rt.send({ type: "session.update", session: { type: "realtime", instructions: `run ${run}` } });
      await events.next("session.updated");
      rt.send({ type: "response.create", response: { instructions: "Answer." } });
      await events.next("response.done");
      expect(events.errors).toEqual([]);
      // The SDK's close() sends close code 1000 and never session.close.
      rt.close();
      await new Promise((resolve) => rt.socket.once("close", resolve));
    }
    // None waits out a grace: the last one's close is logged shortly after its socket closed.
    await expect.poll(() => server?.engine.sessions().filter((s) => !s.isClosed).length).toBe(0);
  });

  it("the capacity refusal reaches the SDK's error listener with its code and message", async () => {
    server = await startTestServer({
      listen: { host: "127.0.0.1", port: 0, tls: cert.files },
      duplex_session: { max_sessions: 1 },
    });
    const client = new OpenAI({ apiKey: "test", baseURL: `https://127.0.0.1:${server.port}/v1` });
    const first = new OpenAIRealtimeWS({ model: "echo", options: { ca: cert.ca } }, client);
    const firstEvents = record(first);
    await opened(first);
    await firstEvents.next("session.created");
    const second = new OpenAIRealtimeWS({ model: "echo", options: { ca: cert.ca } }, client);
    const secondEvents = record(second);
    await opened(second);
    second.send(gaSessionUpdate(24000));
    await expect.poll(() => secondEvents.errors.length, { timeout: 10_000 }).toBe(1);
    const [error] = secondEvents.errors;
    expect(error?.message).toContain("resource_exhausted");
    expect(error?.message).toContain("session capacity reached");
    expect(error?.message).not.toContain("undefined");
    first.close();
    second.close();
  });
});
