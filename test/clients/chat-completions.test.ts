import { readFile } from "node:fs/promises";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REFERENCE_PEER_SCRIPT } from "../../src/conformance/files.ts";
import { replayEntries, STREAM_PREFIX, streamOf } from "../../src/engine/index.ts";
import { encodeWav, pcm16FromBytes, readWav, readWavFile } from "../../src/infra/audio/index.ts";
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

  it("hears a user message with input_audio (a base64 WAV at any rate): the answer measures the speech", async () => {
    const question = sharedAudio("question_16k.wav");
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
  });

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
