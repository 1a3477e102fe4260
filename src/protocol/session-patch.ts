import type { z } from "zod";
import type {
  AudioFormat,
  ErrorCode,
  RefAudioInput,
  Rejection,
  SessionPatch,
  ToolDefinition,
  TracingConfig,
} from "../domain/index.ts";
import { parseAudioFormat, toAudioFormat } from "./audio-formats.ts";
import { base64ByteLength, isStandardBase64 } from "./base64.ts";
import type { sessionSchema } from "./client-events.ts";
import { type DecodeContext, inputFormatOf } from "./decode-context.ts";

export { inputFormatOf } from "./decode-context.ts";

/** The largest `ref_audio` clip accepted, in bytes of the decoded clip (8 MiB: minutes of 16 kHz PCM16 WAV). */
export const MAX_REF_AUDIO_BYTES = 8 * 1024 * 1024;

/**
 * Reads a `ref_audio` value (reference, "Tier 2": ref_audio): a data URL of an audio media type only
 * (`data:audio/wav;base64,...`), at most {@link MAX_REF_AUDIO_BYTES} once decoded; a WAV type must hold a RIFF/WAVE
 * file. A URL or a path is never fetched or read: `unsupported_ref_audio_path`. The `sha256` of the result is left empty: the engine stamps it.
 */
export const parseRefAudio = (
  value: string,
  param: string,
): RefAudioInput | { code: ErrorCode; message: string; param: string } => {
  const match = /^data:([^;,]*)((?:;[^;,]*)*),(.*)$/s.exec(value);
  if (match === null) {
    return {
      code: "unsupported_ref_audio_path",
      message: "ref_audio must be a data URL (data:audio/wav;base64,...); URLs and file paths are not fetched",
      param,
    };
  }
  const mimeType = (match[1] ?? "").toLowerCase();
  const params = (match[2] ?? "").toLowerCase();
  const payload = match[3] ?? "";
  if (!/^audio\/[a-z0-9][a-z0-9.+-]*$/.test(mimeType) || !params.split(";").includes("base64")) {
    return {
      code: "bad_event",
      message: `ref_audio must be a base64 data URL of an audio type (data:audio/wav;base64,...); got data:${mimeType}${params}`,
      param,
    };
  }
  if (payload.length === 0 || !isStandardBase64(payload)) {
    return { code: "bad_event", message: "ref_audio: the data URL's payload is not standard padded base64", param };
  }
  const bytes = base64ByteLength(payload);
  if (bytes > MAX_REF_AUDIO_BYTES) {
    return {
      code: "bad_event",
      message: `ref_audio is ${bytes} bytes; the limit is ${MAX_REF_AUDIO_BYTES} bytes`,
      param,
    };
  }
  const audio = Uint8Array.from(Buffer.from(payload, "base64"));
  const wav = ["audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"].includes(mimeType);
  const riff = Buffer.from(audio.subarray(0, 4)).toString("latin1") === "RIFF";
  if (wav && !(riff && Buffer.from(audio.subarray(8, 12)).toString("latin1") === "WAVE")) {
    return { code: "bad_event", message: `ref_audio says ${mimeType} but is not a RIFF/WAVE file`, param };
  }
  return { mimeType, audio, sha256: "" };
};

/** `tracing` in our spelling (the labels as given). */
const tracingOf = (tracing: NonNullable<z.infer<typeof sessionSchema>["tracing"]> | null): TracingConfig | null =>
  tracing === null || tracing === "auto"
    ? tracing
    : {
        ...(tracing.workflow_name === undefined ? {} : { workflowName: tracing.workflow_name }),
        ...(tracing.group_id === undefined ? {} : { groupId: tracing.group_id }),
        ...(tracing.metadata === undefined ? {} : { metadata: tracing.metadata }),
      };

/** A tool in our spelling: no description is "", no parameters is an empty object schema. */
const toolOf = (t: {
  name: string;
  description?: string | undefined;
  parameters?: Record<string, unknown> | undefined;
}): ToolDefinition => ({
  type: "function",
  name: t.name,
  description: t.description ?? "",
  parameters: t.parameters ?? { type: "object", properties: {} },
});

/** The tools of a `tools` array in our spelling. */
export const toolsOf = (tools: readonly Parameters<typeof toolOf>[0][]): ToolDefinition[] => tools.map(toolOf);

/**
 * The rate (Hz) of a PCM format named without one: the beta `"pcm16"` and the GA `{type: "audio/pcm"}` are 24 kHz
 * whatever was in force before (BEHAVIOUR.md, "Audio formats"; G.711 is always 8 kHz).
 */
export const DEFAULT_FORMAT_RATE_HZ = 24000;

/**
 * Translates the session object of `session.update` (both spellings) into a patch. An input format without a rate
 * takes `input_sample_rate_hz`, else 24 kHz; `input_sample_rate_hz` alone keeps the session's encoding. Whether the
 * format suits the session (rates, output) is the domain's rule (`applySessionPatch`).
 */
export const sessionPatchOf = (
  session: z.infer<typeof sessionSchema>,
  ctx: DecodeContext,
): SessionPatch | { code: ErrorCode; message: string; param: string } => {
  const patch: { -readonly [K in keyof SessionPatch]: SessionPatch[K] } = {};
  if (session.model !== undefined) patch.model = session.model;
  if (session.instructions !== undefined) patch.instructions = session.instructions;
  const voice = session.voice !== undefined ? session.voice : session.audio?.output?.voice;
  if (voice !== undefined) patch.voice = voice;
  const modalities = session.output_modalities ?? session.modalities;
  if (modalities !== undefined) patch.outputModalities = modalities;
  const current = inputFormatOf(ctx);
  const input = session.audio?.input?.format ?? session.input_audio_format;
  if (input !== undefined || session.input_sample_rate_hz !== undefined) {
    // A named format means its own rate whatever was in force before (BEHAVIOUR.md, "Audio formats"): `"pcm16"`
    // and `{type: "audio/pcm"}` are 24 kHz unless `input_sample_rate_hz` says otherwise; only
    // `input_sample_rate_hz` alone keeps the session's encoding at a new rate.
    const declared = input ?? current.encoding;
    const format = parseAudioFormat(
      typeof declared === "string"
        ? { type: declared, rate: session.input_sample_rate_hz }
        : { type: declared.type, rate: declared.rate ?? session.input_sample_rate_hz },
      input === undefined ? current.rate : DEFAULT_FORMAT_RATE_HZ,
    );
    if ("code" in format) return { ...format, param: "session.input_audio_format" };
    patch.inputAudio = toAudioFormat(format);
  }
  const output = session.audio?.output?.format ?? session.output_audio_format;
  if (output !== undefined) {
    const format = parseAudioFormat(output, DEFAULT_FORMAT_RATE_HZ);
    if ("code" in format) return { ...format, param: "session.output_audio_format" };
    patch.outputAudio = toAudioFormat(format);
  }
  const td =
    session.audio?.input?.turn_detection !== undefined ? session.audio.input.turn_detection : session.turn_detection;
  if (td === null) patch.turnDetection = null;
  else if (td !== undefined) {
    patch.turnDetection = {
      ...(td.type === undefined ? {} : { type: td.type }),
      ...(td.threshold === undefined ? {} : { threshold: td.threshold }),
      ...(td.prefix_padding_ms === undefined ? {} : { prefixPaddingMs: td.prefix_padding_ms }),
      ...(td.silence_duration_ms === undefined ? {} : { silenceDurationMs: td.silence_duration_ms }),
      ...(td.min_speech_duration_ms === undefined ? {} : { minSpeechDurationMs: td.min_speech_duration_ms }),
      ...(td.create_response === undefined ? {} : { createResponse: td.create_response }),
      ...(td.interrupt_response === undefined ? {} : { interruptResponse: td.interrupt_response }),
    };
  }
  if (session.tools !== undefined) patch.tools = toolsOf(session.tools);
  if (session.tool_choice !== undefined) patch.toolChoice = session.tool_choice;
  const maxTokens = session.max_response_output_tokens ?? session.max_output_tokens;
  if (maxTokens !== undefined) patch.maxResponseOutputTokens = maxTokens;
  const refAudio = session.ref_audio !== undefined ? session.ref_audio : session.extra_body?.ref_audio;
  if (refAudio === null) patch.refAudio = null;
  else if (refAudio !== undefined) {
    const parsed = parseRefAudio(
      refAudio,
      session.ref_audio !== undefined ? "session.ref_audio" : "session.extra_body.ref_audio",
    );
    if ("code" in parsed) return parsed;
    patch.refAudio = parsed;
  }
  if (session.overlap_policy !== undefined) patch.overlapPolicy = session.overlap_policy;
  if (session.overlap_short_ack_ms !== undefined) patch.overlapShortAckMs = session.overlap_short_ack_ms;
  if (session.overlap_barge_in_ms !== undefined) patch.overlapBargeInMs = session.overlap_barge_in_ms;
  if (session.overlap_silence_rms !== undefined) patch.overlapSilenceRms = session.overlap_silence_rms;
  const speed = session.audio?.output?.speed ?? session.speed;
  if (speed !== undefined) patch.speed = speed;
  if (session.tracing !== undefined) patch.tracing = tracingOf(session.tracing);
  if (session.playback_commit_policy !== undefined) patch.playbackCommitPolicy = session.playback_commit_policy;
  if (session.temperature !== undefined) patch.temperature = session.temperature;
  if (session.idle_timeout_s !== undefined) patch.idleTimeoutS = session.idle_timeout_s;
  const transcription = session.audio?.input?.transcription ?? session.input_audio_transcription;
  if (transcription !== undefined) patch.inputTranscription = transcription;
  const noise = session.audio?.input?.noise_reduction ?? session.input_audio_noise_reduction;
  if (noise !== undefined) patch.inputNoiseReduction = noise;
  if (session.extra_body?.auto_response !== undefined) patch.autoResponse = session.extra_body.auto_response;
  if (session.extra_body?.response_timeout_ms !== undefined) {
    patch.responseTimeoutMs = session.extra_body.response_timeout_ms;
  }
  // `native_duplex` (deprecated alias minicpmo45_native_duplex): what it means is the domain's (applySessionPatch).
  const native = session.extra_body?.native_duplex ?? session.extra_body?.minicpmo45_native_duplex;
  if (native !== undefined) patch.nativeDuplex = native;
  if (session.extra_body?.force_listen_count !== undefined)
    patch.forceListenCount = session.extra_body.force_listen_count;
  const initialText = session.extra_body?.duplex_initial_user_text;
  if (initialText !== undefined) patch.initialUserText = initialText;
  return patch;
};

/**
 * The voice and output format a `response.create` names for its response (`voice` / `output_audio_format`, or GA's
 * `audio.output.voice` / `.format`), each only when given, the format parsed as `session.update` parses it; a format
 * that is none is refused with its code and `param`. The decider refuses one that is not the session's.
 */
export const responseAudioOf = (response: {
  readonly voice?: string | null;
  readonly output_audio_format?: Parameters<typeof parseAudioFormat>[0];
  readonly audio?: {
    readonly output?: { readonly format?: Parameters<typeof parseAudioFormat>[0]; readonly voice?: string | null };
  };
}): { voice?: string | null; outputAudio?: AudioFormat } | Rejection => {
  const out: { voice?: string | null; outputAudio?: AudioFormat } = {};
  const voice = response.voice !== undefined ? response.voice : response.audio?.output?.voice;
  if (voice !== undefined) out.voice = voice;
  const declared = response.audio?.output?.format ?? response.output_audio_format;
  if (declared !== undefined) {
    const param =
      response.audio?.output?.format === undefined ? "response.output_audio_format" : "response.audio.output.format";
    const format = parseAudioFormat(declared, DEFAULT_FORMAT_RATE_HZ);
    if ("code" in format) return { ...format, param };
    out.outputAudio = toAudioFormat(format);
  }
  return out;
};
