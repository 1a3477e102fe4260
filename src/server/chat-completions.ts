import type { FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { DEFAULT_INPUT_RATE_HZ } from "../domain/index.ts";
import type { Engine, EventStore } from "../engine/index.ts";
import { handshakeErrorBody } from "../protocol/index.ts";
import { ChatAnswer } from "./chat-answer.ts";
import type { AudioBudget } from "./chat-audio.ts";
import { ChatError } from "./chat-error.ts";
import { answersOf, checkRequest, framesOf, requestSchema } from "./chat-request.ts";
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

/** The handler of `POST /v1/chat/completions` (app.ts routes it; the `/v1` auth gate there applies to it). */
export const chatCompletionsHandler = (options: ChatCompletionsOptions) => {
  const { engine } = options;
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
    reply.header("x-duplex-session-id", opened.sessionId);
    return new ChatAnswer(opened, body, reply, options.model, options.log).run(frames, timeoutMs);
  };
};
