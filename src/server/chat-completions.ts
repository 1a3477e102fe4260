import { randomBytes } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { DEFAULT_INPUT_RATE_HZ, type ErrorCode } from "../domain/index.ts";
import type { Engine, EventStore, SessionHost, SessionSink } from "../engine/index.ts";
import { encodeWav, pcm16FromBytes } from "../infra/audio/index.ts";
import { decodeClientFrame, handshakeErrorBody } from "../protocol/index.ts";
import type { AudioBudget } from "./chat-audio.ts";
import { ANSWER_AUDIO_TTL_S, audioIdOf } from "./chat-audio-id.ts";
import { ChatError, statusOf } from "./chat-error.ts";
import { answersOf, checkRequest, framesOf, OUTPUT_RATE_HZ, requestSchema } from "./chat-request.ts";
import { type WholeLogReads, wholeLogReads } from "./whole-log-reads.ts";

/**
 * `POST /v1/chat/completions` on the realtime engine (issue 19, part 7; the seed's route, "a session per
 * request"): each request opens a session in the turn lane on the deployment's runner, sends the system and
 * developer messages as its instructions and every other message as an item (`conversation.item.create`), runs one
 * `response.create` and closes the session (`session.close`). The request is therefore a recorded session that
 * `duplex replay` replays; its id is in the `x-duplex-session-id` response header.
 *
 * OpenAI's Chat Completions shapes (reference: platform.openai.com/docs/api-reference/chat): `messages` with string
 * or part content (`text`; `input_audio` of a base64 WAV), an assistant message's `audio: {id}` naming an earlier
 * spoken answer (issue 33, part 4: resolved from that request's log to its audio and transcript, or refused with
 * `bad_event`, chat-audio-id.ts), `modalities: ["text"]` (default: the session asks the model for text; a
 * model that speaks anyway is answered with its transcript, never `content: ""`) or `["text", "audio"]`
 * with `audio: {voice, format}` (`wav` or `pcm16`: 24 kHz mono PCM16 little-endian; a stream needs `pcm16`), `tools`
 * and `tool_choice` passed to the session, `max_completion_tokens` (or `max_tokens`) as the response's
 * `max_output_tokens`, `stream` with `stream_options.include_usage`. Answers a `chat.completion`, or with
 * `stream: true` server-sent `chat.completion.chunk`s ending in `data: [DONE]`. Errors use OpenAI's envelope
 * (`{error: {type, code, message, param}}`): 400 for a request the schema or the session refuses, 404
 * `model_not_found`, 429 `resource_exhausted` at capacity, 500 for a failed response, 504 `response_timeout`.
 * `input_audio` is a WAV of PCM16, mono or stereo, at 8000-96000 Hz, at most `maxAudioS` seconds in all
 * (chat-audio.ts), earlier answers included. The request is checked whole (chat-request.ts), its audio decoded and
 * its earlier answers read, before its session is opened: a refused request never holds a `max_sessions` slot,
 * and one that got a session closes it on every path.
 */
export interface ChatCompletionsOptions {
  readonly engine: Engine;
  readonly model: string;
  readonly log: Logger;
  /** A response not done within this many ms ends the request with 504 (default 120 000). */
  readonly timeoutMs?: number;
  /**
   * s of audio a request may carry in all (`limits.request_audio_s`, default 300): its `input_audio` parts and the
   * earlier answers its assistant messages name by `audio.id`.
   */
  readonly maxAudioS?: number;
  /**
   * The store the sessions are logged in: an assistant message's `audio.id` is resolved from the log of the request
   * that answered it (chat-audio-id.ts). Absent: such a message is refused (`bad_event`).
   */
  readonly store?: EventStore;
  /**
   * The places of the server's whole-log reads that resolving an `audio.id` takes (src/server/whole-log-reads.ts;
   * default: two of its own).
   */
  readonly wholeLogReads?: WholeLogReads;
}

/** `limits.request_audio_s`' default (src/infra/config.ts), s. */
export const DEFAULT_REQUEST_AUDIO_S = 300;

export { MAX_ANSWER_IDS, MAX_CHAT_MESSAGES, MAX_CHAT_PARTS } from "./chat-request.ts";

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

const usageOf = (done: Record<string, unknown> | null) => {
  const usage = (done?.usage ?? null) as { input_tokens?: number; output_tokens?: number } | null;
  const prompt = usage?.input_tokens ?? 0;
  const completion = usage?.output_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
};

/**
 * The text of a response: its text, or when it has none the transcript of what it spoke. A model asked for text
 * alone (`modalities: ["text"]`) that can only speak is answered with its words, never with `content: ""`.
 */
const wordsOf = (c: Collected): string => (c.text !== "" ? c.text : c.transcript);

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
  const reads = options.wholeLogReads ?? wholeLogReads();

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
      const budget: AudioBudget = { maxS: maxAudioS, usedS: 0 };
      const answers = await answersOf(body, options.store, DEFAULT_INPUT_RATE_HZ, budget, Date.now(), reads);
      frames = framesOf(body, DEFAULT_INPUT_RATE_HZ, budget, answers);
    } catch (error) {
      if (!(error instanceof ChatError)) throw error;
      if (error.status === 429) reply.header("retry-after", "1");
      return reply.code(error.status).send(error.body());
    }
    const opened = engine.open({ nativeDuplex: false });
    if ("code" in opened)
      return reply.code(429).header("retry-after", "1").send(handshakeErrorBody(opened.code, opened.message));
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
    const audioId = () => audioIdOf(host.sessionId, collected.responseId ?? "");
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
          if (!stream) return;
          if (audioOut) write(chunk({ audio: { id: audioId(), transcript: String(event.delta) } }));
          // A model that spoke when text alone was asked: its words are the text (see `wordsOf`).
          else if (collected.text === "") write(chunk({ content: String(event.delta) }));
          return;
        case "response.output_audio.delta":
          collected.audio.push(Buffer.from(String(event.delta), "base64"));
          if (stream && audioOut) write(chunk({ audio: { id: audioId(), data: String(event.delta) } }));
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
    // The model spoke though text alone was asked: answered with its words, and told to the operator.
    if (!audioOut && collected.audio.length > 0)
      log.warn({ sessionId: host.sessionId, audioDeltas: collected.audio.length }, "text chat completion spoken");
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
    const words = wordsOf(collected);
    const pcm = Buffer.concat(collected.audio);
    const format = body.audio?.format;
    const audio = audioOut
      ? {
          id: audioId(),
          data: (format === "wav" ? Buffer.from(encodeWav(pcm16FromBytes(pcm), OUTPUT_RATE_HZ)) : pcm).toString(
            "base64",
          ),
          // At most the id's own expiry, counted from the response's end (chat-audio-id.ts).
          expires_at: created + ANSWER_AUDIO_TTL_S,
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
            content: audioOut || (words === "" && collected.calls.length > 0) ? null : words,
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
