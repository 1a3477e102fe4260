import { readFile } from "node:fs/promises";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REFERENCE_PEER_SCRIPT } from "../../src/conformance/files.ts";
import { type EventStore, STREAM_PREFIX, streamOf } from "../../src/engine/index.ts";
import { encodeWav, pcm16FromBytes, readWav, readWavFile } from "../../src/infra/audio/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { MAX_ANSWER_LOG_ENTRIES } from "../../src/server/chat-audio-id.ts";
import { sharedAudio, startScriptedServer, startTestServer } from "../support/server.ts";

/**
 * `POST /v1/chat/completions` on the realtime engine (issue 19, part 7), driven by the official `openai` SDK's
 * `chat.completions.create`, streamed and not, against the echo, scripted and upstream runners. Each request is a
 * session of its own: closed when answered, and replayed from its log.
 */
type Server = Awaited<ReturnType<typeof startTestServer>>;

/** question_16k.wav as a chat message part (`input_audio`, base64 WAV). */
const spoken = async (): Promise<OpenAI.ChatCompletionContentPartInputAudio> => ({
  type: "input_audio",
  input_audio: { data: (await readFile(sharedAudio("question_16k.wav"))).toString("base64"), format: "wav" },
});

const clientOf = (server: Server, apiKey = "test") =>
  new OpenAI({ apiKey, baseURL: `http://127.0.0.1:${server.port}/v1`, maxRetries: 0 });

/** The log of the session a request ran as: closed by the request, and it replays identically. */
const expectClosedAndReplayed = async (server: Server, sessionId: string | null) => {
  expect(sessionId).toMatch(/^sess_/);
  const log = await server.store.read(streamOf(sessionId ?? ""));
  expect(log.filter((e) => e.type === "SessionClosed").map((e) => (e.data as { reason: string }).reason)).toEqual([
    "session_close",
  ]);
  expect(replayEntries(log)).toMatchObject({ ok: true, sessionId });
};

describe("chat completions with the echo runner", () => {
  let server: Server;
  beforeAll(async () => {
    server = await startTestServer({ duplex_session: { max_sessions: 2 } });
  });
  afterAll(async () => {
    await server.stop();
  });

  it("answers the last user message as a chat.completion, in a session that closes and replays", async () => {
    const { data, response } = await clientOf(server)
      .chat.completions.create({
        model: server.model,
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Hello there" },
        ],
      })
      .withResponse();
    expect(data).toEqual({
      id: expect.stringMatching(/^chatcmpl-/),
      object: "chat.completion",
      created: expect.any(Number),
      model: server.model,
      system_fingerprint: null,
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "You wrote: Hello there", refusal: null },
          logprobs: null,
          finish_reason: "stop",
        },
      ],
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
    });
    await expectClosedAndReplayed(server, response.headers.get("x-duplex-session-id"));
    // Closed, not detached: no session holds a slot after the request.
    expect(server.engine.sessions().filter((s) => !s.isClosed)).toEqual([]);
  });

  it("streams the same answer as chat.completion.chunks: the role first, the deltas, the finish, the usage", async () => {
    const stream = await clientOf(server).chat.completions.create({
      model: server.model,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "Hello there" }],
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    expect(chunks[0]?.choices[0]?.delta).toEqual({ role: "assistant", content: "", refusal: null });
    const content = chunks
      .slice(1, -2)
      .map((c) => c.choices[0]?.delta.content)
      .join("");
    expect(content).toBe("You wrote: Hello there");
    expect(chunks.at(-2)?.choices).toEqual([{ index: 0, delta: {}, logprobs: null, finish_reason: "stop" }]);
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { total_tokens: 0 } });
  });

  it("answers in audio with modalities text+audio: a 24 kHz WAV and its transcript, content null", async () => {
    const data = await clientOf(server).chat.completions.create({
      model: server.model,
      modalities: ["text", "audio"],
      audio: { voice: "alloy", format: "wav" },
      messages: [{ role: "user", content: "Hello there" }],
    });
    const message = data.choices[0]?.message;
    expect(message?.content).toBeNull();
    expect(message?.audio).toMatchObject({ id: expect.stringMatching(/^audio_/), expires_at: expect.any(Number) });
    expect(message?.audio?.transcript).toMatch(/^I heard \d\.\d seconds of speech/);
    const wav = readWav(Uint8Array.from(Buffer.from(message?.audio?.data ?? "", "base64")));
    expect(wav.sampleRate).toBe(24000);
    expect(wav.samples.length).toBeGreaterThan(2400);
  });

  it("streams audio as pcm16 deltas with the transcript beside: the echo of the spoken question", async () => {
    const stream = await clientOf(server).chat.completions.create({
      model: server.model,
      stream: true,
      modalities: ["text", "audio"],
      audio: { voice: "alloy", format: "pcm16" },
      messages: [{ role: "user", content: [await spoken()] }],
    });
    const pcm: Buffer[] = [];
    let transcript = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as { audio?: { data?: string; transcript?: string } } | undefined;
      if (delta?.audio?.data !== undefined) pcm.push(Buffer.from(delta.audio.data, "base64"));
      transcript += delta?.audio?.transcript ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe("stop");
    expect(transcript).toMatch(/^I heard \d\.\d seconds of speech/);
    // The echo speaks the question back: as long as it, and not silence.
    const samples = pcm16FromBytes(Buffer.concat(pcm));
    const question = await readWavFile(sharedAudio("question_16k.wav"));
    expect(Math.abs(samples.length / 24000 - question.samples.length / question.sampleRate)).toBeLessThan(0.1);
    expect(samples.some((s) => s !== 0)).toBe(true);
  });

  // jfk_16k is four utterances in one message: the message is heard whole, not its last utterance.
  it.each(["question_16k.wav", "jfk_16k.wav"])(
    "hears a user message with input_audio (a base64 WAV at any rate): the answer measures the speech of %s",
    async (file) => {
      const question = sharedAudio(file);
      const wav = await readWavFile(question);
      const seconds = wav.samples.length / wav.sampleRate;
      const { readFile } = await import("node:fs/promises");
      const data = await clientOf(server).chat.completions.create({
        model: server.model,
        modalities: ["text", "audio"],
        audio: { voice: "alloy", format: "wav" },
        messages: [
          {
            role: "user",
            content: [
              {
                type: "input_audio",
                input_audio: { data: (await readFile(question)).toString("base64"), format: "wav" },
              },
            ],
          },
        ],
      });
      const heard = Number(/I heard (\d+\.\d) seconds/.exec(data.choices[0]?.message.audio?.transcript ?? "")?.[1]);
      expect(Math.abs(heard - seconds)).toBeLessThanOrEqual(0.1);
    },
  );

  it.each([
    [
      "an unknown model: 404 model_not_found",
      { model: "gpt-nope", messages: [{ role: "user", content: "hi" }] },
      OpenAI.NotFoundError,
      { status: 404, code: "model_not_found", param: "model" },
    ],
    [
      "no messages: 400 bad_event naming messages",
      { messages: [] },
      OpenAI.BadRequestError,
      { status: 400, code: "bad_event", param: "messages" },
    ],
    [
      "a streamed audio answer in wav: 400 unsupported_audio_format",
      {
        stream: true,
        modalities: ["text", "audio"],
        audio: { voice: "alloy", format: "wav" },
        messages: [{ role: "user", content: "hi" }],
      },
      OpenAI.BadRequestError,
      { status: 400, code: "unsupported_audio_format", param: "audio.format" },
    ],
    [
      "an image part: 400 bad_event naming the part",
      { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://x/y.png" } }] }] },
      OpenAI.BadRequestError,
      { status: 400, code: "bad_event", param: "messages.0.content.0.type" },
    ],
    [
      "a WAV whose header declares 1 Hz: 400 unsupported_audio_format naming the part's data",
      {
        messages: [
          {
            role: "user",
            content: [
              {
                type: "input_audio",
                input_audio: {
                  data: Buffer.from(encodeWav(new Int16Array(20_000), 1)).toString("base64"),
                  format: "wav",
                },
              },
            ],
          },
        ],
      },
      OpenAI.BadRequestError,
      {
        status: 400,
        code: "unsupported_audio_format",
        param: "messages.0.content.0.input_audio.data",
        message: expect.stringContaining("expected a sample rate of 8000 to 96000 Hz, found 1 Hz"),
      },
    ],
  ])("refuses %s, in OpenAI's envelope, and opens no session", async (_name, body, kind, fields) => {
    const before = (await server.store.listStreams(STREAM_PREFIX)).length;
    const refused = await clientOf(server)
      .chat.completions.create({ model: server.model, ...body } as never)
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(kind);
    expect(refused).toMatchObject({ ...fields, type: "invalid_request_error" });
    expect((await server.store.listStreams(STREAM_PREFIX)).length).toBe(before);
  });

  it("at capacity, refuses with 429 resource_exhausted", async () => {
    const { RealtimeClient } = await import("../../src/client/index.ts");
    const open = await Promise.all([RealtimeClient.connect(server.url), RealtimeClient.connect(server.url)]);
    try {
      await Promise.all(open.map((c) => c.waitFor("session.created", { since: 0 })));
      const refused = await clientOf(server)
        .chat.completions.create({ model: server.model, messages: [{ role: "user", content: "hi" }] })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
      expect(refused).toMatchObject({ status: 429, code: "resource_exhausted" });
    } finally {
      await Promise.all(open.map((c) => c.close()));
    }
  });
});

/** `store`, with every `read(stream, from, limit)` it is asked recorded in `reads`. */
const readsRecorded = (store: EventStore, reads: [string, number?, number?][]): EventStore =>
  new Proxy(store, {
    get(target, key) {
      if (key === "read")
        return (stream: string, from?: number, limit?: number) => {
          reads.push([stream, from, limit]);
          return target.read(stream, from, limit);
        };
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });

/** The items a request's session created, in order: role (or type), text, whether audio, and ms of audio. */
const itemsOf = async (server: Server, sessionId: string | null) =>
  (await server.store.read(streamOf(sessionId ?? "")))
    .filter((e) => e.type === "ItemCreated")
    .map((e) => (e.data as { item: { role: string; text: string; audio: boolean; audioMs: number } }).item)
    .map(({ role, text, audio, audioMs }) => ({ role, text, audio, audioMs }));

describe("chat completions, multi-turn audio (OpenAI's flow: the answer's audio.id comes back as an assistant message)", () => {
  let server: Server;
  const reads: [string, number?, number?][] = [];
  beforeAll(async () => {
    server = await startTestServer({}, { wrapStore: (store) => readsRecorded(store, reads) });
  });
  afterAll(async () => {
    await server.stop();
  });
  const question = { role: "user" as const, content: "Is a golden retriever a good family dog?" };
  const spokenAnswer = async () => {
    const { data, response } = await clientOf(server)
      .chat.completions.create({
        model: server.model,
        modalities: ["text", "audio"],
        audio: { voice: "alloy", format: "wav" },
        messages: [question],
      })
      .withResponse();
    const audio = data.choices[0]?.message.audio;
    const wav = readWav(Uint8Array.from(Buffer.from(audio?.data ?? "", "base64")));
    return {
      audio,
      ms: (wav.samples.length / wav.sampleRate) * 1000,
      sessionId: response.headers.get("x-duplex-session-id"),
    };
  };

  it("resolves the id to that answer: the next session holds its transcript and audio as the assistant's item, in order, after one bounded read", async () => {
    const first = await spokenAnswer();
    expect(first.audio?.id).toBe(`audio_${first.sessionId?.slice("sess_".length)}_1`);
    reads.length = 0;
    const { data, response } = await clientOf(server)
      .chat.completions.create({
        model: server.model,
        messages: [
          question,
          { role: "assistant", audio: { id: first.audio?.id ?? "" } },
          { role: "user", content: "Why do you say they are loyal?" },
        ],
      })
      .withResponse();
    expect(data.choices[0]?.message.content).toBe("You wrote: Why do you say they are loyal?");
    const sessionId = response.headers.get("x-duplex-session-id");
    expect(await itemsOf(server, sessionId)).toEqual([
      { role: "user", text: question.content, audio: false, audioMs: 0 },
      { role: "assistant", text: first.audio?.transcript, audio: true, audioMs: expect.closeTo(first.ms, 6) },
      { role: "user", text: "Why do you say they are loyal?", audio: false, audioMs: 0 },
    ]);
    expect(first.ms).toBeGreaterThan(100);
    // The lookup: one read of the first request's log, bounded; nothing else of it was read.
    expect(reads.filter(([stream]) => stream === streamOf(first.sessionId ?? ""))).toEqual([
      [streamOf(first.sessionId ?? ""), 0, MAX_ANSWER_LOG_ENTRIES],
    ]);
    await expectClosedAndReplayed(server, sessionId);
  });

  it("resolves the id of a streamed answer, which every audio chunk carries", async () => {
    const { data: stream, response } = await clientOf(server)
      .chat.completions.create({
        model: server.model,
        stream: true,
        modalities: ["text", "audio"],
        audio: { voice: "alloy", format: "pcm16" },
        messages: [question],
      })
      .withResponse();
    const ids = new Set<string>();
    for await (const chunk of stream) {
      const audio = (chunk.choices[0]?.delta as { audio?: { id?: string } } | undefined)?.audio;
      if (audio?.id !== undefined) ids.add(audio.id);
    }
    const id = `audio_${response.headers.get("x-duplex-session-id")?.slice("sess_".length)}_1`;
    expect([...ids]).toEqual([id]);
    const next = await clientOf(server)
      .chat.completions.create({
        model: server.model,
        messages: [question, { role: "assistant", audio: { id } }, { role: "user", content: "Go on" }],
      })
      .withResponse();
    expect((await itemsOf(server, next.response.headers.get("x-duplex-session-id")))[1]).toMatchObject({
      role: "assistant",
      text: expect.stringMatching(/^I heard \d\.\d seconds of speech/),
      audio: true,
    });
  });

  it.each([
    [
      "an id of no session held here",
      () => `audio_${"0".repeat(32)}_1`,
      "assistant",
      /its session is unknown, or its log is no longer retained/,
    ],
    [
      "a string that is no audio id",
      () => "audio_abc123",
      "assistant",
      /is not the audio id of an answer of this server/,
    ],
    [
      "an id of a response its session never had",
      async () => (await spokenAnswer()).audio?.id.replace(/_1$/, "_7") ?? "",
      "assistant",
      /its session has no response resp_\w+_7 that ended/,
    ],
    [
      "an id of an answer in text, which spoke no audio",
      async () => {
        const { response } = await clientOf(server)
          .chat.completions.create({ model: server.model, messages: [question] })
          .withResponse();
        return `audio_${response.headers.get("x-duplex-session-id")?.slice("sess_".length)}_1`;
      },
      "assistant",
      /names an answer that spoke no audio/,
    ],
    [
      "audio on a user message",
      () => `audio_${"0".repeat(32)}_1`,
      "user",
      /only an assistant message names an earlier answer/,
    ],
  ])("refuses %s with 400 bad_event naming the field and why, and opens no session", async (_name, idOf, role, why) => {
    const id = await idOf();
    const before = (await server.store.listStreams(STREAM_PREFIX)).length;
    const refused = await clientOf(server)
      .chat.completions.create({
        model: server.model,
        messages: [question, { role, audio: { id } } as never, { role: "user", content: "Why?" }],
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({
      status: 400,
      type: "invalid_request_error",
      code: "bad_event",
      param: role === "assistant" ? "messages.1.audio.id" : "messages.1.audio",
      message: expect.stringMatching(why),
    });
    expect((await server.store.listStreams(STREAM_PREFIX)).length).toBe(before);
  });
});

describe('chat completions under the limits of the config (docs/deploy.md, "Limits")', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startTestServer({
      duplex_session: { max_sessions: 1 },
      limits: { request_audio_s: 1, http_body_bytes: 256 * 1024 },
    });
  });
  afterAll(async () => {
    await server.stop();
  });

  it("refuses audio past limits.request_audio_s with 400 bad_audio, and answers the next request in the one slot", async () => {
    const refused = await clientOf(server)
      .chat.completions.create({ model: server.model, messages: [{ role: "user", content: [await spoken()] }] })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({
      status: 400,
      code: "bad_audio",
      param: "messages.0.content.0.input_audio.data",
      message: expect.stringMatching(/a request carries at most 1 s \(limits\.request_audio_s\)$/),
    });
    const answered = await clientOf(server).chat.completions.create({
      model: server.model,
      messages: [{ role: "user", content: "Hello there" }],
    });
    expect(answered.choices[0]?.message.content).toBe("You wrote: Hello there");
  });

  it("refuses a body past limits.http_body_bytes with 413 request_too_large", async () => {
    const refused = await clientOf(server)
      .chat.completions.create({ model: server.model, messages: [{ role: "user", content: "x".repeat(300_000) }] })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    expect(refused).toMatchObject({ status: 413, code: "request_too_large" });
    expect(server.engine.sessions().filter((s) => !s.isClosed)).toEqual([]);
  });
});

describe("chat completions with the scripted reference peer: tools", () => {
  let server: Server;
  beforeAll(async () => {
    server = await startTestServer({ runner: { kind: "scripted", script: REFERENCE_PEER_SCRIPT } });
  });
  afterAll(async () => {
    await server.stop();
  });
  const tools = [
    {
      type: "function" as const,
      function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
    },
  ];
  const ask = { role: "user" as const, content: "What's the weather in Lisbon?" };

  it("passes tools through: the model's call comes back as tool_calls (finish_reason tool_calls), and its output is answered", async () => {
    const client = clientOf(server);
    const first = await client.chat.completions.create({ model: server.model, tools, messages: [ask] });
    expect(first.choices[0]).toMatchObject({
      finish_reason: "tool_calls",
      message: {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_weather_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } },
        ],
      },
    });
    const second = await client.chat.completions.create({
      model: server.model,
      tools,
      modalities: ["text", "audio"],
      audio: { voice: "alloy", format: "pcm16" },
      messages: [
        ask,
        first.choices[0]?.message as OpenAI.ChatCompletionAssistantMessageParam,
        { role: "tool", tool_call_id: "call_weather_1", content: "Sunny, 24 C" },
      ],
    });
    expect(second.choices[0]?.finish_reason).toBe("stop");
    expect(second.choices[0]?.message.audio?.transcript).toBe("The weather service says: Sunny, 24 C");
  });

  it("answers a tool round trip asked in text alone with the model's text: no audio in the answer, none spoken in the log", async () => {
    const client = clientOf(server);
    const first = await client.chat.completions.create({ model: server.model, tools, messages: [ask] });
    const roundTrip = [
      ask,
      first.choices[0]?.message as OpenAI.ChatCompletionAssistantMessageParam,
      { role: "tool" as const, tool_call_id: "call_weather_1", content: "Sunny, 24 C" },
    ];
    const { data, response } = await client.chat.completions
      .create({ model: server.model, tools, modalities: ["text"], messages: roundTrip })
      .withResponse();
    expect(data.choices).toEqual([
      {
        index: 0,
        message: { role: "assistant", content: "The weather service says: Sunny, 24 C", refusal: null },
        logprobs: null,
        finish_reason: "stop",
      },
    ]);
    const sessionId = response.headers.get("x-duplex-session-id");
    const log = await server.store.read(streamOf(sessionId ?? ""));
    // The model's outputs (a chain's front also logs its upstream session): text, then the end of the turn.
    const outputs = log.flatMap((e) =>
      e.type === "StageOutputReceived" ? [(e.data as { output: { kind: string; text?: string } }).output] : [],
    );
    const said = outputs.filter((o) => o.kind !== "upstream_session");
    expect(new Set(said.map((o) => o.kind))).toEqual(new Set(["text", "end_of_turn"]));
    expect(said.at(-1)?.kind).toBe("end_of_turn");
    expect(said.map((o) => o.text ?? "").join("")).toBe("The weather service says: Sunny, 24 C");
    expect(log.filter((e) => e.type === "AudioDelivered" || e.type === "ResponseSpoke")).toEqual([]);
    expect(log.filter((e) => e.type === "ResponseEnded").map((e) => e.data)).toMatchObject([
      { status: "completed", spoke: false, audioSent: false },
    ]);
    await expectClosedAndReplayed(server, sessionId);
    // Streamed, the same text comes as content deltas.
    const stream = await client.chat.completions.create({
      model: server.model,
      tools,
      modalities: ["text"],
      stream: true,
      messages: roundTrip,
    });
    let content = "";
    for await (const chunk of stream) {
      expect(chunk.choices[0]?.delta).not.toHaveProperty("audio");
      content += chunk.choices[0]?.delta.content ?? "";
    }
    expect(content).toBe("The weather service says: Sunny, 24 C");
  });

  it("streams a tool call: its id and name first, then its arguments, then finish_reason tool_calls", async () => {
    const stream = await clientOf(server).chat.completions.create({
      model: server.model,
      tools,
      stream: true,
      messages: [ask],
    });
    const deltas = [];
    for await (const chunk of stream) deltas.push([chunk.choices[0]?.delta, chunk.choices[0]?.finish_reason]);
    expect(deltas).toEqual([
      [{ role: "assistant", content: "", refusal: null }, null],
      [
        {
          tool_calls: [
            { index: 0, id: "call_weather_1", type: "function", function: { name: "get_weather", arguments: "" } },
          ],
        },
        null,
      ],
      [{ tool_calls: [{ index: 0, function: { arguments: '{"city":"Lisbon"}' } }] }, null],
      [{}, "tool_calls"],
    ]);
  });
});

describe("chat completions asked in text of a model that can only speak", () => {
  it('answers with the words it spoke, never content "", and sends no audio', async () => {
    const server = await startScriptedServer([
      "name: speaker",
      "turns:",
      "  - on: respond",
      '    actions: [{ speak: "I only talk." }, end_turn]',
    ]);
    try {
      const data = await clientOf(server).chat.completions.create({
        model: server.model,
        modalities: ["text"],
        messages: [{ role: "user", content: "Hi" }],
      });
      expect(data.choices[0]?.message).toEqual({ role: "assistant", content: "I only talk.", refusal: null });
      const stream = await clientOf(server).chat.completions.create({
        model: server.model,
        stream: true,
        messages: [{ role: "user", content: "Hi" }],
      });
      const deltas = [];
      for await (const chunk of stream) deltas.push(chunk.choices[0]?.delta);
      expect(deltas.some((d) => d !== undefined && "audio" in d)).toBe(false);
      expect(deltas.map((d) => d?.content ?? "").join("")).toBe("I only talk.");
    } finally {
      await server.stop();
    }
  });
});

describe("chat completions a client leaves", () => {
  it("a stream the client aborts mid-answer cancels the response and closes the session", async () => {
    const server = await startScriptedServer([
      "name: slow",
      "turns:",
      "  - on: respond",
      '    actions: [{ text: "One." }, { wait_ms: 60000 }, { text: "Two." }, end_turn]',
    ]);
    try {
      const stream = await clientOf(server).chat.completions.create({
        model: server.model,
        stream: true,
        messages: [{ role: "user", content: "Count" }],
      });
      let content = "";
      for await (const chunk of stream) {
        content += chunk.choices[0]?.delta.content ?? "";
        if (content !== "") stream.controller.abort();
      }
      expect(content).toBe("One.");
      const [session] = await server.store.listStreams(STREAM_PREFIX);
      const reasons = async () => {
        const log = await server.store.read(session?.stream ?? "");
        return log.filter((e) => e.type === "SessionClosed").map((e) => (e.data as { reason: string }).reason);
      };
      await expect.poll(reasons).toEqual(["session_close"]);
      const log = await server.store.read(session?.stream ?? "");
      expect(replayEntries(log).ok).toBe(true);
      const wire = log.flatMap((e) => (e.type === "ResponseEnded" ? [(e.data as { status: string }).status] : []));
      expect(wire).toEqual(["cancelled"]);
    } finally {
      await server.stop();
    }
  });
});

describe("chat completions through the upstream runner", () => {
  it("answers and streams as the model server behind answers, and the request replays without it", async () => {
    const behind = await startTestServer();
    const server = await startTestServer({ runner: { kind: "upstream", url: behind.url, dialect: "duplex" } });
    try {
      const client = clientOf(server);
      const { data, response } = await client.chat.completions
        .create({ model: server.model, messages: [{ role: "user", content: "Hello there" }] })
        .withResponse();
      expect(data.model).toMatch(/^upstream:/);
      expect(data.choices[0]?.message.content).toBe("You wrote: Hello there");
      await expectClosedAndReplayed(server, response.headers.get("x-duplex-session-id"));
      const stream = await client.chat.completions.create({
        model: server.model,
        stream: true,
        messages: [{ role: "user", content: "Hello again" }],
      });
      let content = "";
      for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? "";
      expect(content).toBe("You wrote: Hello again");
    } finally {
      await server.stop();
      await behind.stop();
    }
  });
});

describe("chat completions behind API keys", () => {
  it("needs a key like every /v1 route: a wrong one is an AuthenticationError, the right one is answered", async () => {
    const server = await startTestServer({ auth: { api_keys: ["sk-right"] } });
    try {
      const body = { model: server.model, messages: [{ role: "user" as const, content: "hi" }] };
      const refused = await clientOf(server, "sk-wrong")
        .chat.completions.create(body)
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
      expect(refused).toMatchObject({ status: 401, code: "unauthorized" });
      const answered = await clientOf(server, "sk-right").chat.completions.create(body);
      expect(answered.choices[0]?.message.content).toBe("You wrote: hi");
    } finally {
      await server.stop();
    }
  });
});
