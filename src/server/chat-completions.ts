import { randomBytes } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { z } from "zod";
import { DEFAULT_INPUT_RATE_HZ, type ErrorCode } from "../domain/index.ts";
import type { Engine, SessionHost, SessionSink } from "../engine/index.ts";
import { encodeWav, pcm16FromBytes } from "../infra/audio/index.ts";
import { decodeClientFrame, handshakeErrorBody } from "../protocol/index.ts";
import { type AudioBudget, decodeInputAudio } from "./chat-audio.ts";
import { ChatError, statusOf } from "./chat-error.ts";

/**
 * `POST /v1/chat/completions` on the realtime engine (issue 19, part 7; the seed's route, "a session per
 * request"): each request opens a session in the turn lane on the deployment's runner, sends the system and
 * developer messages as its instructions and every other message as an item (`conversation.item.create`), runs one
 * `response.create` and closes the session (`session.close`). The request is therefore a recorded session that
 * `duplex replay` replays; its id is in the `x-duplex-session-id` response header.
 *
 * OpenAI's Chat Completions shapes (reference: platform.openai.com/docs/api-reference/chat): `messages` with string
 * or part content (`text`; `input_audio` of a base64 WAV), `modalities: ["text"]` (default) or `["text", "audio"]`
 * with `audio: {voice, format}` (`wav` or `pcm16`: 24 kHz mono PCM16 little-endian; a stream needs `pcm16`), `tools`
 * and `tool_choice` passed to the session, `max_completion_tokens` (or `max_tokens`) as the response's
 * `max_output_tokens`, `stream` with `stream_options.include_usage`. Answers a `chat.completion`, or with
 * `stream: true` server-sent `chat.completion.chunk`s ending in `data: [DONE]`. Errors use OpenAI's envelope
 * (`{error: {type, code, message, param}}`): 400 for a request the schema or the session refuses, 404
 * `model_not_found`, 429 `resource_exhausted` at capacity, 500 for a failed response, 504 `response_timeout`.
 * `input_audio` is a WAV of PCM16, mono or stereo, at 8000-96000 Hz, at most `maxAudioS` seconds in all
 * (chat-audio.ts). The request is checked whole, its audio decoded, before its session is opened: a refused
 * request never holds a `max_sessions` slot, and one that got a session closes it on every path.
 */
export interface ChatCompletionsOptions {
  readonly engine: Engine;
  readonly model: string;
  readonly log: Logger;
  /** A response not done within this many ms ends the request with 504 (default 120 000). */
  readonly timeoutMs?: number;
  /** s of audio a request's `input_audio` parts may carry in all (`limits.request_audio_s`, default 300). */
  readonly maxAudioS?: number;
}

/** `limits.request_audio_s`' default (src/infra/config.ts), s. */
export const DEFAULT_REQUEST_AUDIO_S = 300;

/** Bytes of one `input_audio_buffer.append` of a message's audio: 1 s of PCM16 at 24 kHz. */
const APPEND_BYTES = 48000;

/** The output sample rate of the session a request opens, Hz: OpenAI's chat audio is 24 kHz. */
const OUTPUT_RATE_HZ = 24000;

const textPart = z.object({ type: z.literal("text"), text: z.string() });
const audioPart = z.object({
  type: z.literal("input_audio"),
  input_audio: z.object({ data: z.string(), format: z.string() }),
});
const otherPart = z.object({ type: z.string() }).loose();
/**
 * Parts of one message and messages of one request, at most: each becomes an item of the request's session, decided
 * and logged one by one (50,000 one-word messages held a session for over a minute and logged 12 MB).
 */
export const MAX_CHAT_PARTS = 64;
export const MAX_CHAT_MESSAGES = 1024;

const contentSchema = z
  .union([z.string(), z.array(z.union([textPart, audioPart, otherPart])).max(MAX_CHAT_PARTS), z.null()])
  .optional();

const messageSchema = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: contentSchema,
  name: z.string().optional(),
  tool_calls: z
    .array(
      z.object({
        id: z.string(),
        type: z.literal("function"),
        function: z.object({ name: z.string(), arguments: z.string() }),
      }),
    )
    .nullish(),
  tool_call_id: z.string().optional(),
});

const requestSchema = z.object({
  model: z.string(),
  messages: z.array(messageSchema).min(1).max(MAX_CHAT_MESSAGES),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  modalities: z.array(z.enum(["text", "audio"])).nullish(),
  audio: z.object({ voice: z.string(), format: z.string() }).nullish(),
  tools: z
    .array(
      z.object({
        type: z.literal("function"),
        function: z.object({
          name: z.string(),
          description: z.string().optional(),
          parameters: z.record(z.string(), z.unknown()).optional(),
        }),
      }),
    )
    .nullish(),
  tool_choice: z
    .union([
      z.enum(["none", "auto", "required"]),
      z.object({ type: z.literal("function"), function: z.object({ name: z.string() }) }),
    ])
    .nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  max_tokens: z.number().int().positive().nullish(),
  n: z.number().int().nullish(),
});

type ChatRequest = z.infer<typeof requestSchema>;

/**
 * The realtime client events that play `request` into a session whose input is `inputRateHz` PCM16: the
 * session.update, then per message its items (`conversation.item.create`), or for a user's audio part its appends
 * and a commit, in order, then the response.create.
 * @throws ChatError for a part that is not supported, or audio that is refused or past `audio`'s budget.
 */
const framesOf = (request: ChatRequest, inputRateHz: number, audioBudget: AudioBudget): Record<string, unknown>[] => {
  const audioOut = request.modalities?.includes("audio") === true;
  const instructions: string[] = [];
  const items: Record<string, unknown>[] = [];
  for (const [i, message] of request.messages.entries()) {
    const at = `messages.${i}`;
    const parts = typeof message.content === "string" ? [{ type: "text", text: message.content }] : message.content;
    const texts = (parts ?? []).map((part, j) => {
      if (part.type === "text" && typeof part.text === "string") return { kind: "text" as const, text: part.text };
      if (part.type === "input_audio" && message.role === "user") {
        const audio = (part as z.infer<typeof audioPart>).input_audio;
        return {
          kind: "audio" as const,
          audio: decodeInputAudio(audio, `${at}.content.${j}.input_audio`, inputRateHz, audioBudget),
        };
      }
      throw new ChatError(
        400,
        "bad_event",
        `${at}.content.${j}: a ${message.role} message part of type ${part.type} is not supported here (text${message.role === "user" ? ", input_audio" : ""})`,
        `${at}.content.${j}.type`,
      );
    });
    switch (message.role) {
      case "system":
      case "developer":
        instructions.push(texts.map((t) => (t.kind === "text" ? t.text : "")).join(""));
        break;
      case "user":
        // Text parts become a message item; audio parts are appended and committed, so the model hears them.
        for (const t of texts) {
          if (t.kind === "text") {
            items.push({
              type: "conversation.item.create",
              item: { type: "message", role: "user", content: [{ type: "input_text", text: t.text }] },
            });
            continue;
          }
          for (let offset = 0; offset < t.audio.length; offset += APPEND_BYTES)
            items.push({
              type: "input_audio_buffer.append",
              audio: t.audio.subarray(offset, offset + APPEND_BYTES).toString("base64"),
            });
          items.push({ type: "input_audio_buffer.commit" });
        }
        break;
      case "assistant": {
        const text = texts.map((t) => (t.kind === "text" ? t.text : "")).join("");
        if (text !== "")
          items.push({
            type: "conversation.item.create",
            item: { type: "message", role: "assistant", content: [{ type: "output_text", text }] },
          });
        for (const call of message.tool_calls ?? [])
          items.push({
            type: "conversation.item.create",
            item: {
              type: "function_call",
              call_id: call.id,
              name: call.function.name,
              arguments: call.function.arguments,
            },
          });
        break;
      }
      case "tool":
        if (message.tool_call_id === undefined)
          throw new ChatError(400, "invalid_function_call_output", `${at}: a tool message needs tool_call_id`, at);
        items.push({
          type: "conversation.item.create",
          item: {
            type: "function_call_output",
            call_id: message.tool_call_id,
            output: texts.map((t) => (t.kind === "text" ? t.text : "")).join(""),
          },
        });
        break;
    }
  }
  const maxTokens = request.max_completion_tokens ?? request.max_tokens ?? null;
  const session: Record<string, unknown> = {
    type: "realtime",
    output_modalities: [audioOut ? "audio" : "text"],
    ...(instructions.length === 0 ? {} : { instructions: instructions.join("\n\n") }),
    audio: {
      input: { format: { type: "audio/pcm", rate: inputRateHz }, turn_detection: null },
      output: {
        format: { type: "audio/pcm", rate: OUTPUT_RATE_HZ },
        ...(request.audio?.voice === undefined ? {} : { voice: request.audio.voice }),
      },
    },
    ...(request.tools == null
      ? {}
      : {
          tools: request.tools.map((t) => ({
            type: "function",
            name: t.function.name,
            ...(t.function.description === undefined ? {} : { description: t.function.description }),
            ...(t.function.parameters === undefined ? {} : { parameters: t.function.parameters }),
          })),
        }),
    ...(request.tool_choice == null
      ? {}
      : {
          tool_choice:
            typeof request.tool_choice === "string"
              ? request.tool_choice
              : { type: "function", name: request.tool_choice.function.name },
        }),
  };
  return [
    { type: "session.update", session },
    ...items,
    { type: "response.create", ...(maxTokens === null ? {} : { response: { max_output_tokens: maxTokens } }) },
  ];
};

/** What one response of the session produced, as its events arrive. */
interface Collected {
  responseId: string | null;
  text: string;
  transcript: string;
  audio: Buffer[];
  calls: { id: string; name: string; arguments: string }[];
  done: Record<string, unknown> | null;
}

type Event = Record<string, unknown> & { type: string };

/** Checks a request before a session is opened. @throws ChatError naming the refused field. */
const checkRequest = (request: ChatRequest, engine: Engine, served: string): void => {
  if (request.model !== served)
    throw new ChatError(404, "model_not_found", `no model ${request.model}; this server serves ${served}`, "model");
  if (request.n != null && request.n !== 1)
    throw new ChatError(400, "bad_event", "n: one choice per request is served (n: 1)", "n");
  if (request.modalities?.includes("audio") === true) {
    const format = request.audio?.format;
    if (format === undefined)
      throw new ChatError(
        400,
        "bad_event",
        'audio: {voice, format} is required with modalities ["text", "audio"]',
        "audio",
      );
    if (format !== "wav" && format !== "pcm16")
      throw new ChatError(400, "unsupported_audio_format", `audio.format ${format}: wav or pcm16`, "audio.format");
    if (request.stream === true && format !== "pcm16")
      throw new ChatError(
        400,
        "unsupported_audio_format",
        "a streamed audio response needs audio.format pcm16",
        "audio.format",
      );
  }
  if (engine.capabilities.refAudio === "required")
    throw new ChatError(
      400,
      "ref_audio_required",
      `${engine.model} needs a voice clip, which a chat completion cannot carry: use /v1/realtime with session.ref_audio`,
    );
};

const usageOf = (done: Record<string, unknown> | null) => {
  const usage = (done?.usage ?? null) as { input_tokens?: number; output_tokens?: number } | null;
  const prompt = usage?.input_tokens ?? 0;
  const completion = usage?.output_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
};

const finishReasonOf = (c: Collected): string => {
  const details = (c.done?.status_details ?? null) as { reason?: string } | null;
  if (c.done?.status === "incomplete") return details?.reason === "content_filter" ? "content_filter" : "length";
  return c.calls.length > 0 ? "tool_calls" : "stop";
};

/** The handler of `POST /v1/chat/completions` (app.ts routes it; the `/v1` auth gate there applies to it). */
export const chatCompletionsHandler = (options: ChatCompletionsOptions) => {
  const { engine, log } = options;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const maxAudioS = options.maxAudioS ?? DEFAULT_REQUEST_AUDIO_S;

  return async (request: FastifyRequest, reply: FastifyReply) => {
    const parsed = requestSchema.safeParse(request.body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const param = issue?.path.join(".") ?? null;
      return reply
        .code(400)
        .send(new ChatError(400, "bad_event", `${param === "" ? "body" : param}: ${issue?.message}`, param).body());
    }
    const body = parsed.data;
    let frames: Record<string, unknown>[];
    try {
      checkRequest(body, engine, options.model);
      frames = framesOf(body, DEFAULT_INPUT_RATE_HZ, { maxS: maxAudioS, usedS: 0 });
    } catch (error) {
      if (!(error instanceof ChatError)) throw error;
      return reply.code(error.status).send(error.body());
    }
    const opened = engine.open({ nativeDuplex: false });
    if ("code" in opened) return reply.code(429).send(handshakeErrorBody(opened.code, opened.message));
    const host: SessionHost = opened;
    reply.header("x-duplex-session-id", host.sessionId);

    const stream = body.stream === true;
    const audioOut = body.modalities?.includes("audio") === true;
    const created = Math.floor(Date.now() / 1000);
    const collected: Collected = { responseId: null, text: "", transcript: "", audio: [], calls: [], done: null };
    const completionId = `chatcmpl-${randomBytes(12).toString("base64url")}`;
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
      id: completionId,
      object: "chat.completion.chunk",
      created,
      model: options.model,
      system_fingerprint: null,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
    const write = (data: unknown): void => {
      if (!reply.raw.writableEnded) reply.raw.write(`data: ${JSON.stringify(data)}\n\n`);
    };
    let started = false;
    const startStream = (): void => {
      if (started) return;
      started = true;
      reply.hijack();
      reply.raw.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        connection: "keep-alive",
        "x-duplex-session-id": host.sessionId,
      });
      write(chunk({ role: "assistant", content: "", refusal: null }));
    };

    let settled = false;
    let settle: (outcome: ChatError | null) => void = () => undefined;
    const outcome = new Promise<ChatError | null>((resolve) => {
      settle = (value) => {
        settled = true;
        resolve(value);
      };
    });
    const audioId = () => `audio_${(collected.responseId ?? "").replace(/^resp_/, "")}`;
    const onEvent = (event: Event): void => {
      switch (event.type) {
        case "error": {
          const error = event.error as { code?: ErrorCode; message?: string; param?: string | null };
          const code = error.code ?? "internal_error";
          settle(new ChatError(statusOf(code), code, error.message ?? code, error.param ?? null));
          return;
        }
        case "response.created":
          collected.responseId = String((event.response as { id?: string }).id ?? "");
          if (stream) startStream();
          return;
        case "response.output_text.delta":
          collected.text += String(event.delta);
          if (stream) write(chunk({ content: String(event.delta) }));
          return;
        case "response.output_audio_transcript.delta":
          collected.transcript += String(event.delta);
          if (stream) write(chunk({ audio: { id: audioId(), transcript: String(event.delta) } }));
          return;
        case "response.output_audio.delta":
          collected.audio.push(Buffer.from(String(event.delta), "base64"));
          if (stream) write(chunk({ audio: { id: audioId(), data: String(event.delta) } }));
          return;
        case "response.output_item.added": {
          const item = event.item as { type?: string; call_id?: string; name?: string };
          if (item.type !== "function_call") return;
          const index = collected.calls.length;
          collected.calls.push({ id: item.call_id ?? "", name: item.name ?? "", arguments: "" });
          if (stream)
            write(
              chunk({
                tool_calls: [
                  { index, id: item.call_id, type: "function", function: { name: item.name, arguments: "" } },
                ],
              }),
            );
          return;
        }
        case "response.function_call_arguments.delta": {
          const index = collected.calls.findIndex((c) => c.id === event.call_id);
          const call = collected.calls[index];
          if (call === undefined) return;
          call.arguments += String(event.delta);
          if (stream) write(chunk({ tool_calls: [{ index, function: { arguments: String(event.delta) } }] }));
          return;
        }
        case "response.done": {
          const response = event.response as Record<string, unknown>;
          collected.done = response;
          // The response's output is the record: a call announced only there is still answered.
          for (const item of (response.output ?? []) as {
            type?: string;
            call_id?: string;
            name?: string;
            arguments?: string;
          }[]) {
            if (item.type !== "function_call") continue;
            const known = collected.calls.find((c) => c.id === item.call_id);
            if (known === undefined)
              collected.calls.push({ id: item.call_id ?? "", name: item.name ?? "", arguments: item.arguments ?? "" });
            else if (item.arguments !== undefined) known.arguments = item.arguments;
          }
          if (response.status === "failed") {
            const error = (response.status_details as { error?: { code?: ErrorCode; message?: string } } | null)?.error;
            const code = error?.code ?? "internal_error";
            settle(new ChatError(500, code, error?.message ?? "the response failed"));
            return;
          }
          settle(null);
          return;
        }
        default:
      }
    };
    const sink: SessionSink = {
      send: (json) => onEvent(JSON.parse(json) as Event),
      replaced: () => undefined,
      failed: (code, message) => settle(new ChatError(500, code, message)),
      ended: (_lastType, reason) => {
        if (collected.done === null)
          settle(
            new ChatError(
              500,
              "runtime_data_plane_stream_failed",
              `the session ended (${reason ?? "closed"}) before the response was done`,
            ),
          );
      },
    };
    host.attach(sink);
    // One after the other: a long audio message never has more than one append waiting (the input limits). A
    // refused frame ends the request: nothing after it is sent (no response runs for a refused session.update).
    const played = (async () => {
      for (const frame of frames) {
        if (settled) return;
        const text = JSON.stringify(frame);
        const bytes = Buffer.byteLength(text);
        await host.submit(
          (config) =>
            decodeClientFrame(text, bytes, { inputRateHz: config.inputAudio.rate, inputAudio: config.inputAudio }),
          { bytes, turn: frame.type === "input_audio_buffer.commit" },
        );
      }
    })();
    // A frame the session could not take (its log failed) ends the request; the session is still closed below.
    played.catch((error: unknown) =>
      settle(new ChatError(500, "internal_error", `the request could not be played: ${(error as Error).message}`)),
    );
    const timer = setTimeout(
      () => settle(new ChatError(504, "response_timeout", `no response within ${timeoutMs} ms`)),
      timeoutMs,
    );
    // A client that goes away mid-stream: the response is cancelled and the session closed (below).
    reply.raw.once("close", () => {
      if (!reply.raw.writableFinished) settle(new ChatError(499, "session_closed", "the client closed the request"));
    });
    const failure = await outcome;
    clearTimeout(timer);
    // The session is closed (and its close logged) before the answer ends: a request holds no slot after it.
    await played.catch(() => undefined);
    for (const frame of collected.done === null && collected.responseId !== null
      ? [{ type: "response.cancel" }, { type: "session.close" }]
      : [{ type: "session.close" }]) {
      const text = JSON.stringify(frame);
      await host.submit(decodeClientFrame(text, text.length, { inputRateHz: DEFAULT_INPUT_RATE_HZ }));
    }
    log.debug({ sessionId: host.sessionId, stream, failed: failure?.code ?? null }, "chat completion");

    if (failure !== null) {
      if (started) {
        write(failure.body());
        reply.raw.end();
        return reply;
      }
      return reply.code(failure.status).send(failure.body());
    }
    const finish = finishReasonOf(collected);
    const usage = usageOf(collected.done);
    if (stream) {
      write(chunk({}, finish));
      if (body.stream_options?.include_usage === true)
        write({ id: completionId, object: "chat.completion.chunk", created, model: options.model, choices: [], usage });
      reply.raw.write("data: [DONE]\n\n");
      reply.raw.end();
      return reply;
    }
    const pcm = Buffer.concat(collected.audio);
    const format = body.audio?.format;
    const audio = audioOut
      ? {
          id: audioId(),
          data: (format === "wav" ? Buffer.from(encodeWav(pcm16FromBytes(pcm), OUTPUT_RATE_HZ)) : pcm).toString(
            "base64",
          ),
          expires_at: created + 3600,
          transcript: collected.transcript,
        }
      : undefined;
    return reply.send({
      id: completionId,
      object: "chat.completion",
      created,
      model: options.model,
      system_fingerprint: null,
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            // Only tool calls, or audio (whose words are its transcript): no text content, as OpenAI answers.
            content: audioOut || (collected.text === "" && collected.calls.length > 0) ? null : collected.text,
            refusal: null,
            ...(audio === undefined ? {} : { audio }),
            ...(collected.calls.length === 0
              ? {}
              : {
                  tool_calls: collected.calls.map((c) => ({
                    id: c.id,
                    type: "function",
                    function: { name: c.name, arguments: c.arguments },
                  })),
                }),
          },
          logprobs: null,
          finish_reason: finish,
        },
      ],
      usage,
    });
  };
};
