import {
  type HistoryItem,
  inModelNativeLane,
  type RefAudioInput,
  type RunnerUnit,
  type SessionConfig,
} from "../../../domain/index.ts";
import type { Json } from "./wire-json.ts";

/** The rate the engine gives the runner (Hz): what Silero VAD runs at. */
export const INPUT_RATE = 16000;

const base64 = (bytes: Uint8Array): string =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");

/**
 * A history item as an OpenAI item (for `response.input` and for seeding a new upstream session). Null for an item
 * the upstream cannot be given (a user's audio that never got a transcript).
 */
export const itemJson = (item: HistoryItem): Json | null => {
  switch (item.type) {
    case "function_call_output":
      return { type: "function_call_output", call_id: item.callId, output: item.output };
    case "function_call":
      return { type: "function_call", call_id: item.callId, name: item.name, arguments: item.arguments };
    case "message":
      if (item.text === "") return null;
      return {
        type: "message",
        role: item.role,
        content: [{ type: item.role === "assistant" ? "output_text" : "input_text", text: item.text }],
      };
    default: {
      const unhandled: never = item.type;
      throw new Error(`upstream runner: unhandled item type ${String(unhandled)}`);
    }
  }
};

/**
 * The session fields of `session.update` for the upstream: instructions, voice, speed, tools, modalities, formats
 * (PCM16 both ways; the engine converts), and who detects turns: the upstream's own VAD only in the openai dialect
 * with `vad: upstream`, in our model-native lane; in the duplex dialect the upstream answers by itself only in our
 * model-native lane. `sentRefAudio` is the SHA-256 of the `ref_audio` clip already sent (it goes once).
 */
export const sessionFields = (
  options: { readonly dialect: "duplex" | "openai"; readonly model?: string; readonly vad?: "ours" | "upstream" },
  config: SessionConfig,
  refAudio: RefAudioInput | null,
  sentRefAudio: string | null,
): Json => {
  const fields: Json = {
    instructions: config.instructions,
    output_modalities: config.outputModalities,
    modalities: config.outputModalities,
    tools: config.tools.map((t) => ({ ...t })),
    tool_choice: config.toolChoice,
    max_response_output_tokens: config.maxResponseOutputTokens,
    input_audio_format: "pcm16",
    output_audio_format: "pcm16",
    turn_detection:
      options.dialect === "openai" && options.vad === "upstream" && inModelNativeLane(config)
        ? { type: "server_vad", create_response: true, interrupt_response: true }
        : null,
  };
  if (options.model !== undefined) fields.model = options.model;
  if (config.voice !== null) fields.voice = config.voice;
  if (config.temperature !== null) fields.temperature = config.temperature;
  if (config.speed !== 1) fields.speed = config.speed;
  if (options.dialect === "duplex") {
    fields.input_sample_rate_hz = INPUT_RATE;
    fields.extra_body = { auto_response: inModelNativeLane(config) };
    if (refAudio !== null && refAudio.sha256 !== sentRefAudio) {
      fields.ref_audio = `data:${refAudio.mimeType};base64,${base64(refAudio.audio)}`;
    }
  }
  return fields;
};

/** The `response.create` of a `respond` unit, with its `event_id` (a refusal echoes it). */
export const respondEvent = (unit: Extract<RunnerUnit, { kind: "respond" }>, eventId: string): Json => ({
  type: "response.create",
  event_id: eventId,
  response: {
    modalities: unit.modalities,
    output_modalities: unit.modalities,
    conversation: unit.conversation,
    tools: unit.tools.map((t) => ({ ...t })),
    tool_choice: unit.toolChoice,
    max_output_tokens: unit.maxOutputTokens,
    ...(unit.instructions === null ? {} : { instructions: unit.instructions }),
    ...(unit.temperature === null ? {} : { temperature: unit.temperature }),
    ...(unit.metadata === null ? {} : { metadata: unit.metadata }),
    ...(unit.input === null ? {} : { input: unit.input.flatMap((item) => itemJson(item) ?? []) }),
  },
});

/**
 * An `input_audio_buffer.append` of a unit's audio (already at the rate the upstream takes). A duplex server is told
 * `force_listen` where the client asked it (an OpenAI one has no such field).
 */
export const appendEvent = (
  dialect: "duplex" | "openai",
  audio: Uint8Array,
  videoFrames: readonly Uint8Array[] | undefined,
  forceListen = false,
): Json => ({
  type: "input_audio_buffer.append",
  audio: base64(audio),
  ...(dialect === "duplex" ? { sample_rate_hz: INPUT_RATE } : {}),
  ...(dialect === "duplex" && forceListen ? { force_listen: true } : {}),
  ...(videoFrames === undefined ? {} : { video_frames: videoFrames.map(base64) }),
});

/** User text: appended to the duplex input buffer, or an OpenAI user item. */
export const textEvent = (dialect: "duplex" | "openai", text: string): Json =>
  dialect === "duplex"
    ? { type: "input.text.append", text }
    : {
        type: "conversation.item.create",
        item: { type: "message", role: "user", content: [{ type: "input_text", text }] },
      };

/**
 * The `conversation.item.create`s that give a new upstream session the conversation so far (what was heard of it,
 * in order), and the ids of the items they carry. Items the upstream cannot be given (audio never transcribed) are
 * left out.
 */
export const seedEvents = (history: readonly HistoryItem[]): { events: Json[]; itemIds: string[] } => {
  const events: Json[] = [];
  const itemIds: string[] = [];
  for (const item of history) {
    const json = itemJson(item);
    if (json === null) continue;
    events.push({ type: "conversation.item.create", item: json });
    itemIds.push(item.id);
  }
  return { events, itemIds };
};
