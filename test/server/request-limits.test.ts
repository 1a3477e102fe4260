import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine, type Engine, type EventStore, STREAM_PREFIX } from "../../src/engine/index.ts";
import { createResampler, createSpeexStreamResampler, encodeWav, readWav, rms } from "../../src/infra/audio/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { createEchoRunner } from "../../src/infra/runners/echo.ts";
import { decodeClientFrame } from "../../src/protocol/index.ts";
import { buildApp, type ListenLimits } from "../../src/server/app.ts";
import { MAX_CHAT_MESSAGES, MAX_CHAT_PARTS } from "../../src/server/chat-completions.ts";

/**
 * The limits of issue 32, part 2 on `POST /v1/chat/completions` (docs/deploy.md, "Limits"), in-process with
 * fastify's `inject`: the echo runner, an in-memory store, one session slot (`max_sessions: 1`), so a refused
 * request that kept its slot would make the next one 429. Each limit: the input, the refusal (status, code,
 * message, param), memory bounded, and a bystander request answered after it.
 */
type Harness = Awaited<ReturnType<typeof harness>>;
type InjectReply = Awaited<ReturnType<Harness["chat"]>>;

const harness = async (listen: ListenLimits = {}) => {
  const store: EventStore = createSqliteEventStore({ path: ":memory:" });
  const log = pino({ level: "silent" });
  const engine: Engine = createEngine({
    store,
    runner: createEchoRunner({ speedFactor: Number.POSITIVE_INFINITY }),
    vad: null,
    createResampler,
    createOutputResampler: createSpeexStreamResampler,
    model: "echo",
    log,
    limits: { maxSessions: 1 },
  });
  const app = buildApp({ engine, store, log, model: "echo", listen });
  await app.ready();
  return {
    app,
    engine,
    store,
    /** Sessions the store has a log of (a refused request opens none). */
    sessions: async () => (await store.listStreams(STREAM_PREFIX)).length,
    chat: (payload: unknown) =>
      app.inject({ method: "POST", url: "/v1/chat/completions", payload: payload as Record<string, unknown> }),
    raw: (payload: string | Buffer) =>
      app.inject({
        method: "POST",
        url: "/v1/chat/completions",
        headers: { "content-type": "application/json" },
        payload,
      }),
    async close() {
      await app.close();
      await engine.close();
      await store.close();
    },
  };
};

/** A chat request whose one user message carries `wavs` as `input_audio` parts (base64 WAV), answered in audio. */
const spoken = (...wavs: Uint8Array[]) => ({
  model: "echo",
  modalities: ["text", "audio"],
  audio: { voice: "alloy", format: "pcm16" },
  messages: [
    {
      role: "user",
      content: wavs.map((wav) => ({
        type: "input_audio",
        input_audio: { data: Buffer.from(wav).toString("base64"), format: "wav" },
      })),
    },
  ],
});

/**
 * The audio the session of an answered request heard, as its log recorded it (`GET /v1/sessions/:id/input.wav`):
 * its length (s) and level (RMS, 0..1 of full scale).
 */
const heard = async (h: Harness, reply: InjectReply): Promise<{ seconds: number; level: number }> => {
  const id = reply.headers["x-duplex-session-id"];
  const input = await h.app.inject({ method: "GET", url: `/v1/sessions/${String(id)}/input.wav` });
  expect(input.statusCode).toBe(200);
  const wav = readWav(input.rawPayload);
  return { seconds: wav.samples.length / wav.sampleRate, level: rms(wav.samples) };
};

/** A tone of 440 Hz at `rate`, `seconds` long, `amplitude` in PCM16 units. */
const tone = (rate: number, seconds: number, amplitude = 8000): Int16Array =>
  Int16Array.from({ length: Math.round(rate * seconds) }, (_, i) =>
    Math.round(amplitude * Math.sin((2 * Math.PI * 440 * i) / rate)),
  );

/** A canonical 44-byte-header WAV: PCM (tag 1) unless told, `channels` interleaved copies of `samples`. */
const wavOf = (
  samples: Int16Array,
  rate: number,
  { channels = 1, tag = 1, bits = 16 }: { channels?: number; tag?: number; bits?: number } = {},
): Uint8Array => {
  const frame = (channels * bits) / 8;
  const bytes = new Uint8Array(44 + samples.length * frame);
  bytes.set(encodeWav(new Int16Array(0), rate));
  const view = new DataView(bytes.buffer);
  view.setUint32(4, 36 + samples.length * frame, true);
  view.setUint16(20, tag, true);
  view.setUint16(22, channels, true);
  view.setUint32(28, rate * frame, true);
  view.setUint16(32, frame, true);
  view.setUint16(34, bits, true);
  view.setUint32(40, samples.length * frame, true);
  if (bits === 16)
    samples.forEach((sample, i) => {
      for (let c = 0; c < channels; c++) view.setInt16(44 + (i * channels + c) * 2, sample, true);
    });
  return bytes;
};

/** Growth of the process's memory while `run` runs, MB: resident set and array buffers (Buffers, WebAssembly heaps). */
const grownMb = async (run: () => Promise<unknown>): Promise<{ rss: number; arrayBuffers: number }> => {
  const before = process.memoryUsage();
  await run();
  const after = process.memoryUsage();
  return {
    rss: (after.rss - before.rss) / 2 ** 20,
    arrayBuffers: (after.arrayBuffers - before.arrayBuffers) / 2 ** 20,
  };
};

/** Expects a bystander's text request to be answered, and a session to open: no slot is held. */
const expectBystanderAnswered = async (h: Harness): Promise<void> => {
  const reply = await h.chat({ model: "echo", messages: [{ role: "user", content: "still there?" }] });
  expect(reply.statusCode).toBe(200);
  expect(reply.json()).toMatchObject({ choices: [{ message: { content: "You wrote: still there?" } }] });
  expect(h.engine.sessions().filter((s) => !s.isClosed)).toEqual([]);
};

let h: Harness;
afterEach(async () => {
  await h.close();
});

describe("chat completions' input_audio limits", () => {
  it("hears a mono PCM16 WAV for as long as it is (the baseline the refusals are measured against)", async () => {
    h = await harness();
    const reply = await h.chat(spoken(wavOf(tone(16000, 1.5), 16000)));
    expect(reply.statusCode).toBe(200);
    const { seconds, level } = await heard(h, reply);
    expect(seconds).toBeCloseTo(1.5, 2);
    expect(level).toBeCloseTo(rms(tone(16000, 1.5)), 2);
  });

  it("refuses a WAV whose header declares 1 Hz with 400 unsupported_audio_format, growing memory by no more than a few MB", async () => {
    h = await harness();
    // 40 kB of samples at "1 Hz": resampled to 24 kHz, 480 million samples (1.9 GB before the limit).
    const wav = wavOf(new Int16Array(20_000), 1);
    let reply: InjectReply | undefined;
    const grown = await grownMb(async () => {
      reply = await h.chat(spoken(wav));
    });
    expect(reply?.statusCode).toBe(400);
    expect(reply?.json()).toEqual({
      error: {
        type: "invalid_request_error",
        code: "unsupported_audio_format",
        message: "messages.0.content.0.input_audio.data: WAV: expected a sample rate of 8000 to 96000 Hz, found 1 Hz",
        param: "messages.0.content.0.input_audio.data",
      },
    });
    expect(grown.arrayBuffers).toBeLessThan(4);
    expect(grown.rss).toBeLessThan(32);
    expect(await h.sessions()).toBe(0);
    await expectBystanderAnswered(h);
  });

  it("hears a header that declares 2^31 data bytes as the second of audio present, in memory of that second", async () => {
    h = await harness();
    const wav = wavOf(tone(16000, 1), 16000);
    new DataView(wav.buffer).setUint32(40, 2 ** 31, true);
    let reply: InjectReply | undefined;
    const grown = await grownMb(async () => {
      reply = await h.chat(spoken(wav));
    });
    expect(reply?.statusCode).toBe(200);
    expect((await heard(h, reply as InjectReply)).seconds).toBeCloseTo(1, 2);
    expect(grown.arrayBuffers).toBeLessThan(8);
    expect(grown.rss).toBeLessThan(48);
    await expectBystanderAnswered(h);
  });

  it.each([
    ["IEEE float 32-bit", { tag: 3, bits: 32 }],
    ["PCM 24-bit", { tag: 1, bits: 24 }],
    ["PCM 8-bit", { tag: 1, bits: 8 }],
    ["A-law", { tag: 6, bits: 8 }],
    ["mu-law", { tag: 7, bits: 8 }],
  ])("refuses %s with 400 unsupported_audio_format naming it", async (name, format) => {
    h = await harness();
    const reply = await h.chat(spoken(wavOf(new Int16Array(800), 8000, format)));
    expect(reply.statusCode).toBe(400);
    expect(reply.json()).toMatchObject({
      error: {
        code: "unsupported_audio_format",
        message: expect.stringContaining(`WAV: expected PCM 16-bit, found ${name} (format tag ${format.tag},`),
        param: "messages.0.content.0.input_audio.data",
      },
    });
    expect(await h.sessions()).toBe(0);
    await expectBystanderAnswered(h);
  });

  it("refuses more than two channels with 400 unsupported_audio_format", async () => {
    h = await harness();
    const reply = await h.chat(spoken(wavOf(tone(16000, 0.5), 16000, { channels: 6 })));
    expect(reply.statusCode).toBe(400);
    expect(reply.json()).toMatchObject({
      error: {
        code: "unsupported_audio_format",
        message: "messages.0.content.0.input_audio.data: WAV: expected 1 or 2 channels (mono or stereo), found 6",
      },
    });
    await expectBystanderAnswered(h);
  });

  it("hears a stereo WAV mixed down to mono, as long as it is (not twice as long)", async () => {
    h = await harness();
    const reply = await h.chat(spoken(wavOf(tone(16000, 2), 16000, { channels: 2 })));
    expect(reply.statusCode).toBe(200);
    const { seconds, level } = await heard(h, reply);
    expect(seconds).toBeCloseTo(2, 2);
    // The same tone on both channels: the level of one of them.
    expect(level).toBeCloseTo(rms(tone(16000, 2)), 2);
  });

  it("refuses bytes that are not a WAV with 400 bad_audio", async () => {
    h = await harness();
    const reply = await h.chat(spoken(Buffer.from("OggS not a wav at all")));
    expect(reply.statusCode).toBe(400);
    expect(reply.json()).toMatchObject({
      error: { code: "bad_audio", message: expect.stringMatching(/input_audio\.data: WAV: expected "RIFF"/) },
    });
  });

  it("refuses a request whose audio passes limits.request_audio_s in all, naming the part that passes it", async () => {
    h = await harness({ requestAudioS: 2 });
    const part = wavOf(tone(8000, 1.5), 8000);
    const reply = await h.chat(spoken(part, part));
    expect(reply.statusCode).toBe(400);
    expect(reply.json()).toEqual({
      error: {
        type: "invalid_request_error",
        code: "bad_audio",
        message:
          "messages.0.content.1.input_audio.data: 1.5 s of audio brings the request to 3.0 s; a request carries at most 2 s (limits.request_audio_s)",
        param: "messages.0.content.1.input_audio.data",
      },
    });
    expect(await h.sessions()).toBe(0);
    const one = await h.chat(spoken(part));
    expect(one.statusCode).toBe(200);
    expect((await heard(h, one)).seconds).toBeCloseTo(1.5, 2);
  });

  it("caps a request at 300 s of audio by default", async () => {
    h = await harness();
    const reply = await h.chat(spoken(wavOf(new Int16Array(8000 * 301), 8000)));
    expect(reply.statusCode).toBe(400);
    expect(reply.json()).toMatchObject({
      error: { code: "bad_audio", message: expect.stringContaining("at most 300 s (limits.request_audio_s)") },
    });
    await expectBystanderAnswered(h);
  });
});

describe("chat completions with nothing to answer", () => {
  it("refuses messages without content (empty or blank) with 400 response_create_without_input, opening no session", async () => {
    h = await harness();
    for (const content of ["", "   "]) {
      const reply = await h.chat({ model: "echo", messages: [{ role: "system", content }] });
      expect(reply.statusCode).toBe(400);
      expect(reply.json()).toMatchObject({
        error: {
          type: "invalid_request_error",
          code: "response_create_without_input",
          param: "messages",
          message: expect.stringContaining("nothing to answer"),
        },
      });
    }
    expect(await h.sessions()).toBe(0);
    await expectBystanderAnswered(h);
  });
});

describe("chat completions' JSON body limits", () => {
  it("refuses a 200,000-deep body with 400 invalid_json at once, opening no session, and answers the next request", async () => {
    h = await harness();
    const reply = await h.raw(`${"[".repeat(200_000)}${"]".repeat(200_000)}`);
    expect(reply.statusCode).toBe(400);
    expect(reply.json()).toMatchObject({
      type: "error",
      code: "invalid_json",
      error: {
        type: "invalid_request_error",
        code: "invalid_json",
        message: expect.stringMatching(/deeper than 128 levels/),
      },
    });
    expect(await h.sessions()).toBe(0);
    // The one slot is free: a session opens (and is closed again), and a request is answered.
    const opened = h.engine.open();
    if ("code" in opened) throw new Error(`no session opened: ${opened.message}`);
    const close = JSON.stringify({ type: "session.close" });
    await opened.submit(decodeClientFrame(close, close.length, { inputRateHz: 24000 }));
    expect(opened.isClosed).toBe(true);
    await expectBystanderAnswered(h);
  });

  it("answers a request whose fields nest 128 levels, and refuses 129", async () => {
    h = await harness();
    const nested = (levels: number) => `${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`;
    // The request object is level 1, `metadata` level 2: 126 more make 128.
    const body = (levels: number) =>
      `{"model":"echo","messages":[{"role":"user","content":"deep"}],"metadata":${nested(levels)}}`;
    expect((await h.raw(body(127))).statusCode).toBe(200);
    const refused = await h.raw(body(128));
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ code: "invalid_json" });
    await expectBystanderAnswered(h);
  });

  it("refuses more than 1024 messages or 64 parts in a message with 400 bad_event before any session opens", async () => {
    h = await harness();
    const message = { role: "user", content: "hi" };
    const many = await h.chat({ model: "echo", messages: Array(MAX_CHAT_MESSAGES + 1).fill(message) });
    expect(many.statusCode).toBe(400);
    expect(many.json()).toMatchObject({ error: { code: "bad_event", param: "messages" } });
    const parts = Array(MAX_CHAT_PARTS + 1).fill({ type: "text", text: "hi" });
    const wide = await h.chat({ model: "echo", messages: [{ role: "user", content: parts }] });
    expect(wide.statusCode).toBe(400);
    expect(wide.json()).toMatchObject({ error: { code: "bad_event", param: "messages.0.content" } });
    expect(await h.sessions()).toBe(0);
    await expectBystanderAnswered(h);
  });

  it("refuses a body over limits.http_body_bytes with 413 request_too_large, and answers the next request", async () => {
    h = await harness({ httpBodyBytes: 64 * 1024 });
    const reply = await h.chat(spoken(wavOf(tone(16000, 3), 16000)));
    expect(reply.statusCode).toBe(413);
    expect(reply.json()).toMatchObject({
      type: "error",
      code: "request_too_large",
      error: {
        code: "request_too_large",
        message: expect.stringMatching(/^the request body is over 65536 bytes \(limits\.http_body_bytes\)/),
      },
    });
    expect(await h.sessions()).toBe(0);
    await expectBystanderAnswered(h);
  });
});
