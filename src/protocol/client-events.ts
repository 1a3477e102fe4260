import { z } from "zod";

/**
 * Schemas of the client events this server decodes (reference/realtime-duplex-api.md, "Client to server"), both
 * beta and GA spellings of the session object. Unknown keys are ignored: OpenAI clients send more than we read.
 */

const eventId = z.string().max(512).optional();
/**
 * A session id as a client names one (docs/deploy.md, "Limits": the session API's pattern): refused before any
 * lookup, and never echoed or logged whole.
 */
const sessionIdText = z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, "must be 1 to 128 of A-Z a-z 0-9 _ . : -");
const ms = z.number().finite().nonnegative();

const turnDetection = z
  .object({
    // Optional: OpenAI's schema lets a client tune the detector in force without naming its type again.
    type: z.string().optional(),
    threshold: z.number().min(0).max(1).optional(),
    prefix_padding_ms: ms.optional(),
    silence_duration_ms: ms.optional(),
    min_speech_duration_ms: ms.optional(),
    create_response: z.boolean().optional(),
    interrupt_response: z.boolean().optional(),
  })
  .nullable();

const gaFormat = z.object({ type: z.string(), rate: z.number().int().positive().optional() });

/** `speed`: a number; its bounds (0.25..1.5) and whether the model honours it are the domain's rules. */
const speed = z.number().finite();

/** `overlap_*_ms`: whole ms, at most a minute. */
const overlapMs = z.number().int().min(0).max(60_000);

/** OpenAI's `tracing`: `"auto"`, or a workflow name, group id and metadata (strings, a JSON object). */
const tracing = z.union([
  z.literal("auto"),
  z
    .object({
      workflow_name: z.string().max(256).optional(),
      group_id: z.string().max(256).optional(),
      metadata: z.record(z.string(), z.unknown()).optional(),
    })
    .strict(),
]);

/** A function tool (OpenAI `tools[]`): the name OpenAI allows, a JSON Schema object of parameters. */
const tool = z.object({
  type: z.literal("function"),
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "expected 1 to 64 letters, digits, '_' or '-'"),
  description: z.string().max(1024).optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
});

const toolChoice = z.union([
  z.enum(["auto", "none", "required"]),
  z.object({ type: z.literal("function"), name: z.string().min(1) }),
]);

/** `max_response_output_tokens` / `max_output_tokens`: 1..4096 tokens, or "inf" (OpenAI Realtime). */
const maxTokens = z.union([z.number().int().min(1).max(4096), z.literal("inf")]);

const modalities = z
  .array(z.enum(["audio", "text"]))
  .min(1)
  .refine((m) => new Set(m).size === m.length, "lists a modality twice");

/** The parts of an item a client gives (conversation.item.create, response.input). */
const itemSchema = z.object({
  id: z.string().min(1).optional(),
  type: z.enum(["message", "function_call", "function_call_output"]),
  role: z.enum(["user", "assistant", "system"]).optional(),
  content: z
    .array(
      z.object({
        type: z.enum(["input_text", "text", "output_text", "input_audio", "output_audio", "audio"]),
        text: z.string().optional(),
        audio: z.string().optional(),
        transcript: z.string().nullable().optional(),
      }),
    )
    .optional(),
  call_id: z.string().optional(),
  output: z.string().optional(),
  name: z.string().optional(),
  arguments: z.string().optional(),
});

/** An entry of `response.input`: an item, or `{type: "item_reference", id}`. */
const responseInputItem = z.union([z.object({ type: z.literal("item_reference"), id: z.string().min(1) }), itemSchema]);

export const sessionSchema = z.object({
  model: z.string().optional(),
  session_id: z.string().optional(),
  instructions: z.string().optional(),
  voice: z.string().min(1).max(256).nullable().optional(),
  modalities: modalities.optional(),
  output_modalities: modalities.optional(),
  input_audio_format: z.union([z.string(), gaFormat]).optional(),
  output_audio_format: z.union([z.string(), gaFormat]).optional(),
  input_sample_rate_hz: z.number().int().positive().optional(),
  turn_detection: turnDetection.optional(),
  audio: z
    .object({
      input: z
        .object({
          format: gaFormat.optional(),
          turn_detection: turnDetection.optional(),
          transcription: z.record(z.string(), z.unknown()).nullable().optional(),
          noise_reduction: z.record(z.string(), z.unknown()).nullable().optional(),
        })
        .optional(),
      output: z
        .object({
          format: gaFormat.optional(),
          voice: z.string().min(1).max(256).nullable().optional(),
          speed: speed.optional(),
        })
        .optional(),
    })
    .optional(),
  overlap_policy: z.enum(["listen_only", "barge_in_on_speech"]).optional(),
  overlap_short_ack_ms: overlapMs.optional(),
  overlap_barge_in_ms: overlapMs.optional(),
  overlap_silence_rms: z.number().min(0).max(1).optional(),
  /** The beta spelling of `audio.output.speed`. */
  speed: speed.optional(),
  tracing: tracing.nullable().optional(),
  playback_commit_policy: z.enum(["ack_only", "commit_all_on_done"]).optional(),
  temperature: z.number().finite().nullable().optional(),
  tools: z.array(tool).max(128).optional(),
  tool_choice: toolChoice.optional(),
  max_response_output_tokens: maxTokens.optional(),
  max_output_tokens: maxTokens.optional(),
  /** The assistant voice clip: a data URL (`data:audio/wav;base64,...`) only; null removes it. */
  ref_audio: z.string().nullable().optional(),
  idle_timeout_s: z.number().positive().nullable().optional(),
  input_audio_transcription: z.record(z.string(), z.unknown()).nullable().optional(),
  input_audio_noise_reduction: z.record(z.string(), z.unknown()).nullable().optional(),
  extra_body: z
    .object({
      auto_response: z.boolean().optional(),
      native_duplex: z.boolean().optional(),
      /** Deprecated alias of native_duplex (reference, "Endpoint and transport"). */
      minicpmo45_native_duplex: z.boolean().optional(),
      ref_audio: z.string().nullable().optional(),
      /** ms a response may go without model output before it ends failed (`response_timeout`). */
      response_timeout_ms: z.number().int().min(100).max(600_000).optional(),
      /** Chunks (of chunk_period_ms) at the session's start the model listens through (reference, "extra_body"). */
      force_listen_count: z.number().int().min(0).max(3600).optional(),
      /** A user text placed in the conversation before any input (reference, "extra_body"); 32 KiB at most. */
      duplex_initial_user_text: z.string().min(1).max(32_768).optional(),
    })
    .optional(),
});

export const clientEventSchemas = {
  "session.update": z.object({ event_id: eventId, session: sessionSchema.optional() }),
  "input_audio_buffer.append": z.object({
    event_id: eventId,
    audio: z.string(),
    format: z.union([z.string(), gaFormat]).optional(),
    input_audio_format: z.union([z.string(), gaFormat]).optional(),
    sample_rate_hz: z.number().optional(),
    is_speech: z.boolean().optional(),
    duration_ms: z.number().nonnegative().optional(),
    audio_end_ms: z.number().nonnegative().optional(),
    video_frames: z.array(z.string()).max(64).optional(),
    max_slice_nums: z.number().int().positive().optional(),
    /** The client's own VAD decisions for this chunk (the reference's annotated append); see ClientVad. */
    vad: z
      .object({
        backend: z.string().max(64).optional(),
        is_speech: z.boolean().optional(),
        speech_active: z.boolean().optional(),
        speech_started: z.boolean().optional(),
        speech_stopped: z.boolean().optional(),
        speech_probability: z.number().min(0).max(1).optional(),
      })
      .strict()
      .optional(),
    force_listen: z.boolean().optional(),
  }),
  "input_audio_buffer.commit": z.object({
    event_id: eventId,
    // The duplex extension: every commit here is final; `is_speech: false` declares the buffer silence or noise.
    final: z.boolean().optional(),
    is_speech: z.boolean().optional(),
    response_create: z.boolean().optional(),
    create_response: z.boolean().optional(),
  }),
  "input_audio_buffer.clear": z.object({ event_id: eventId }),
  "response.create": z.object({
    event_id: eventId,
    response: z
      .object({
        metadata: z.record(z.string(), z.unknown()).nullable().optional(),
        instructions: z.string().optional(),
        modalities: modalities.optional(),
        output_modalities: modalities.optional(),
        conversation: z.enum(["auto", "none"]).optional(),
        input: z.array(responseInputItem).optional(),
        tools: z.array(tool).max(128).optional(),
        tool_choice: toolChoice.optional(),
        temperature: z.number().finite().optional(),
        max_output_tokens: maxTokens.optional(),
        max_response_output_tokens: maxTokens.optional(),
        // The voice and the output format of one response (beta spellings, and GA's `audio.output`): the decider
        // takes the session's own and refuses another (ResponseCreate.voice, .outputAudio).
        voice: z.string().min(1).max(256).nullable().optional(),
        output_audio_format: z.union([z.string(), gaFormat]).optional(),
        audio: z
          .object({
            output: z
              .object({ format: gaFormat.optional(), voice: z.string().min(1).max(256).nullable().optional() })
              .strict()
              .optional(),
          })
          .strict()
          .optional(),
      })
      // A field the response does not have is refused, naming it: a misspelt override is never ignored.
      .strict()
      .optional(),
  }),
  "response.cancel": z.object({ event_id: eventId, response_id: z.string().optional() }),
  "playback.ack": z.object({
    event_id: eventId,
    response_id: z.string().optional(),
    item_id: z.string().optional(),
    played_ms: ms,
    committed_ms: ms.optional(),
    truncate: z.boolean().optional(),
  }),
  "conversation.item.truncate": z.object({
    event_id: eventId,
    item_id: z.string().min(1),
    content_index: z.number().int().nonnegative().optional(),
    audio_end_ms: ms,
  }),
  "session.heartbeat": z.object({ event_id: eventId }),
  "session.close": z.object({ event_id: eventId }),
  "session.event_ack": z.object({ event_id: eventId, server_event_seq: z.number().int().nonnegative() }),
  "session.resume": z.object({
    event_id: eventId,
    session_id: sessionIdText,
    // A resume token is 43 characters of base64url (32 random bytes); 512 leaves room for other servers' tokens.
    resume_token: z.string().min(1).max(512),
    incarnation: z.number().int().nonnegative().optional(),
    last_received_server_event_seq: z.number().int().nonnegative().optional(),
  }),
  "input.cancel": z.object({ event_id: eventId }),
  "input.text.append": z.object({ event_id: eventId, text: z.string() }),
  "conversation.item.create": z.object({
    event_id: eventId,
    previous_item_id: z.string().nullable().optional(),
    item: itemSchema,
  }),
  "conversation.item.retrieve": z.object({ event_id: eventId, item_id: z.string().min(1) }),
  "conversation.item.delete": z.object({ event_id: eventId, item_id: z.string().min(1) }),
  "output_audio_buffer.clear": z.object({ event_id: eventId }),
  barge_in: z.object({ event_id: eventId }),
  "turn.signal": z.object({
    event_id: eventId,
    event: z.string().min(1),
    payload: z.record(z.string(), z.unknown()).nullable().optional(),
  }),
} as const;

export type ClientEventType = keyof typeof clientEventSchemas;

/** Aliases that share the payload of their canonical event (reference, "Event catalogue"). */
export const CLIENT_EVENT_ALIASES: Readonly<Record<string, ClientEventType>> = {
  push_chunk: "input_audio_buffer.append",
  "input.audio.append": "input_audio_buffer.append",
  "input.commit": "input_audio_buffer.commit",
  "audio.playback_ack": "playback.ack",
  close_session: "session.close",
  close: "session.close",
  session_close: "session.close",
  "input_text.append": "input.text.append",
  push_text: "input.text.append",
  signal_turn: "turn.signal",
};
