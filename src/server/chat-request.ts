import { z } from "zod";
import type { Engine, EventStore, RecordedEntry } from "../engine/index.ts";
import { MAX_FRAME_BYTES } from "../protocol/index.ts";
import { type AudioBudget, decodeInputAudio } from "./chat-audio.ts";
import { chargeAnswer, type EarlierAnswer, resolveAnswer } from "./chat-audio-id.ts";
import { ChatError } from "./chat-error.ts";
import { type WholeLogReads, wholeLogsBusy } from "./whole-log-reads.ts";

/**
 * A chat completion request (`POST /v1/chat/completions`, chat-completions.ts): its schema (OpenAI's Chat
 * Completions shapes), the checks made before its session opens, the earlier answers it names, and the realtime
 * client events that play it into its session.
 */

/** Bytes of one `input_audio_buffer.append` of a message's audio: 1 s of PCM16 at 24 kHz. */
const APPEND_BYTES = 48000;

/** The output sample rate of the session a request opens, Hz: OpenAI's chat audio is 24 kHz. */
export const OUTPUT_RATE_HZ = 24000;

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
  /** An earlier answer's `message.audio.id` (OpenAI's multi-turn audio); only on an assistant message. */
  audio: z.object({ id: z.string() }).nullish(),
});

export const requestSchema = z.object({
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

/** A request as its schema parsed it. */
export type ChatRequest = z.infer<typeof requestSchema>;

/**
 * The `conversation.item.create` of an assistant message's parts.
 * @throws ChatError 400 `bad_event` naming `at` when an earlier answer's audio makes it larger than a frame
 *   (`MAX_FRAME_BYTES`: about 245 s of 24 kHz PCM16).
 */
const assistantItem = (content: readonly Record<string, unknown>[], at: string): Record<string, unknown> => {
  const frame = { type: "conversation.item.create", item: { type: "message", role: "assistant", content } };
  const bytes = Buffer.byteLength(JSON.stringify(frame));
  if (bytes > MAX_FRAME_BYTES)
    throw new ChatError(
      400,
      "bad_event",
      `${at}: the answer's audio makes an item of ${bytes} bytes; one item carries at most ${MAX_FRAME_BYTES} bytes`,
      at,
    );
  return frame;
};

/** Distinct earlier answers (`audio.id`) one request may name: each costs one read of a session's log. */
export const MAX_ANSWER_IDS = 64;

/**
 * The earlier answers `request`'s assistant messages name by `audio.id`, by message index, resolved one after the
 * other (one bounded read per distinct session, chat-audio-id.ts), each counted against `budget`. All of a
 * request's lookups take one place among the server's whole-log reads (`reads`), for as long as they take: a request
 * naming many answers waits its turn as one whole-log read, and one beyond the queue is refused.
 * @throws ChatError 400 `bad_event` for an `audio` on another role, more than `MAX_ANSWER_IDS` ids, no store, or
 *   an id `resolveAnswer` refuses (unknown, expired, no audio); 400 `bad_audio` past the budget; 429
 *   `resource_exhausted` when every place of `reads` is taken and its queue full.
 */
export const answersOf = async (
  request: ChatRequest,
  store: EventStore | undefined,
  inputRateHz: number,
  budget: AudioBudget,
  nowMs: number,
  reads: WholeLogReads,
): Promise<Map<number, EarlierAnswer>> => {
  if (!request.messages.some((m) => m.audio != null)) return new Map();
  const done = await reads.run(() => resolveAll(request, store, inputRateHz, budget, nowMs));
  if (done === null)
    throw new ChatError(429, "resource_exhausted", `messages: ${wholeLogsBusy(reads.max)}`, "messages");
  return done.value;
};

const resolveAll = async (
  request: ChatRequest,
  store: EventStore | undefined,
  inputRateHz: number,
  budget: AudioBudget,
  nowMs: number,
): Promise<Map<number, EarlierAnswer>> => {
  const logs = new Map<string, readonly RecordedEntry[]>();
  const byId = new Map<string, EarlierAnswer>();
  const answers = new Map<number, EarlierAnswer>();
  for (const [i, message] of request.messages.entries()) {
    if (message.audio == null) continue;
    const at = `messages.${i}.audio.id`;
    if (message.role !== "assistant")
      throw new ChatError(
        400,
        "bad_event",
        `messages.${i}.audio: only an assistant message names an earlier answer, not a ${message.role} message`,
        `messages.${i}.audio`,
      );
    if (store === undefined)
      throw new ChatError(400, "bad_event", `${at}: this server keeps no session logs to find an answer in`, at);
    const known = byId.get(message.audio.id);
    if (known !== undefined) {
      chargeAnswer(budget, known.seconds, at);
      answers.set(i, known);
      continue;
    }
    if (byId.size === MAX_ANSWER_IDS)
      throw new ChatError(400, "bad_event", `${at}: a request names at most ${MAX_ANSWER_IDS} earlier answers`, at);
    const answer = await resolveAnswer(store, message.audio.id, { at, nowMs, inputRateHz, budget }, logs);
    byId.set(message.audio.id, answer);
    answers.set(i, answer);
  }
  return answers;
};

type ChatMessage = ChatRequest["messages"][number];
/** A message's part as the session gets it: text, or a user's audio as PCM16 at the session's input rate. */
type MessagePart =
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "audio"; readonly audio: Buffer };

/**
 * The parts of `message` (`messages.N` at `at`): text parts, and a user's `input_audio` decoded to PCM16 at
 * `inputRateHz` within `audioBudget`.
 * @throws ChatError for a part that is not supported, or audio that is refused or past the budget.
 */
const partsOf = (message: ChatMessage, at: string, inputRateHz: number, audioBudget: AudioBudget): MessagePart[] => {
  const parts = typeof message.content === "string" ? [{ type: "text", text: message.content }] : message.content;
  return (parts ?? []).map((part, j) => {
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
};

/** The text of `parts`, their audio left out. */
const textOf = (parts: readonly MessagePart[]): string => parts.map((t) => (t.kind === "text" ? t.text : "")).join("");

/** A user's parts: text parts become a message item; audio parts are appended and committed, so the model hears them. */
const userFrames = (parts: readonly MessagePart[]): Record<string, unknown>[] =>
  parts.flatMap((t) => {
    if (t.kind === "text")
      return [
        {
          type: "conversation.item.create",
          item: { type: "message", role: "user", content: [{ type: "input_text", text: t.text }] },
        },
      ];
    const frames: Record<string, unknown>[] = [];
    for (let offset = 0; offset < t.audio.length; offset += APPEND_BYTES)
      frames.push({
        type: "input_audio_buffer.append",
        audio: t.audio.subarray(offset, offset + APPEND_BYTES).toString("base64"),
      });
    frames.push({ type: "input_audio_buffer.commit" });
    return frames;
  });

/** An assistant message: the earlier answer its `audio.id` named (`answer`) and its text as one item, then its calls. */
const assistantFrames = (
  message: ChatMessage,
  parts: readonly MessagePart[],
  answer: EarlierAnswer | undefined,
  at: string,
): Record<string, unknown>[] => {
  const text = textOf(parts);
  const content = [
    ...(answer === undefined
      ? []
      : [{ type: "output_audio", audio: answer.audio.toString("base64"), transcript: answer.transcript }]),
    ...(text === "" ? [] : [{ type: "output_text", text }]),
  ];
  return [
    ...(content.length > 0 ? [assistantItem(content, `${at}.audio.id`)] : []),
    ...(message.role === "assistant" ? (message.tool_calls ?? []) : []).map((call) => ({
      type: "conversation.item.create",
      item: { type: "function_call", call_id: call.id, name: call.function.name, arguments: call.function.arguments },
    })),
  ];
};

/**
 * The realtime client events that play `request` into a session whose input is `inputRateHz` PCM16: the
 * session.update, then per message its items (`conversation.item.create`), or for a user's audio part its appends
 * and a commit, in order, then the response.create. An assistant message whose `audio.id` named an earlier answer
 * (`answers`, by message index) is one assistant item: that answer's audio and transcript, then its text parts.
 * @throws ChatError for a part that is not supported, or audio that is refused or past `audio`'s budget.
 */
export const framesOf = (
  request: ChatRequest,
  inputRateHz: number,
  audioBudget: AudioBudget,
  answers: ReadonlyMap<number, EarlierAnswer>,
): Record<string, unknown>[] => {
  const audioOut = request.modalities?.includes("audio") === true;
  const instructions: string[] = [];
  const items: Record<string, unknown>[] = [];
  for (const [i, message] of request.messages.entries()) {
    const at = `messages.${i}`;
    const parts = partsOf(message, at, inputRateHz, audioBudget);
    switch (message.role) {
      case "system":
      case "developer":
        instructions.push(textOf(parts));
        break;
      case "user":
        items.push(...userFrames(parts));
        break;
      case "assistant":
        items.push(...assistantFrames(message, parts, answers.get(i), at));
        break;
      case "tool":
        if (message.tool_call_id === undefined)
          throw new ChatError(400, "invalid_function_call_output", `${at}: a tool message needs tool_call_id`, at);
        items.push({
          type: "conversation.item.create",
          item: { type: "function_call_output", call_id: message.tool_call_id, output: textOf(parts) },
        });
        break;
    }
  }
  // Nothing to answer (no message with content, blank instructions): refused before a session opens for it.
  if (items.length === 0 && instructions.join("").trim() === "") {
    throw new ChatError(
      400,
      "response_create_without_input",
      "messages: nothing to answer: no message has content (give a user message with text or audio)",
      "messages",
    );
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

/** Checks a request before a session is opened. @throws ChatError naming the refused field. */
export const checkRequest = (request: ChatRequest, engine: Engine, served: string): void => {
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
