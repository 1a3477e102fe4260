import type { z } from "zod";
import type { ErrorCode, SessionPatch } from "../domain/index.ts";
import { parseAudioFormat, toAudioFormat, type WireAudioFormat } from "./audio-formats.ts";
import type { sessionSchema } from "./client-events.ts";
import type { DecodeContext } from "./decode.ts";

/** The session's input format in the codec's spelling. */
export const inputFormatOf = (ctx: DecodeContext): WireAudioFormat =>
  ctx.inputAudio === undefined
    ? { encoding: "pcm16", rate: ctx.inputRateHz }
    : { encoding: ctx.inputAudio.format, rate: ctx.inputAudio.rate };

/** The output rate (Hz) assumed for an output format declared without one, before a session exists. */
export const DEFAULT_OUTPUT_RATE_HZ = 24000;

/**
 * Translates the session object of `session.update` (both spellings) into a patch. An input format without a rate
 * takes `input_sample_rate_hz`, else the session's current rate; `input_sample_rate_hz` alone keeps the session's
 * encoding. Whether the format suits the session (rates, output) is the domain's rule (`applySessionPatch`).
 */
export const sessionPatchOf = (
  session: z.infer<typeof sessionSchema>,
  ctx: DecodeContext,
): SessionPatch | { code: ErrorCode; message: string; param: string } => {
  const patch: { -readonly [K in keyof SessionPatch]: SessionPatch[K] } = {};
  if (session.model !== undefined) patch.model = session.model;
  if (session.instructions !== undefined) patch.instructions = session.instructions;
  const voice = session.voice ?? session.audio?.output?.voice;
  if (voice !== undefined) patch.voice = voice;
  const modalities = session.output_modalities ?? session.modalities;
  if (modalities !== undefined) patch.outputModalities = modalities;
  const current = inputFormatOf(ctx);
  const input = session.audio?.input?.format ?? session.input_audio_format;
  if (input !== undefined || session.input_sample_rate_hz !== undefined) {
    const declared = input ?? current.encoding;
    const format = parseAudioFormat(
      typeof declared === "string"
        ? { type: declared, rate: session.input_sample_rate_hz }
        : { type: declared.type, rate: declared.rate ?? session.input_sample_rate_hz },
      current.rate,
    );
    if ("code" in format) return { ...format, param: "session.input_audio_format" };
    patch.inputAudio = toAudioFormat(format);
  }
  const output = session.audio?.output?.format ?? session.output_audio_format;
  if (output !== undefined) {
    const format = parseAudioFormat(output, ctx.outputAudio?.rate ?? DEFAULT_OUTPUT_RATE_HZ);
    if ("code" in format) {
      const name = typeof output === "string" ? output : output.type;
      return {
        code: format.code,
        message: `output audio format ${JSON.stringify(name)} is not supported; the server sends "pcm16" ({"type": "audio/pcm"}) only`,
        param: "session.output_audio_format",
      };
    }
    patch.outputAudio = toAudioFormat(format);
  }
  const td =
    session.audio?.input?.turn_detection !== undefined ? session.audio.input.turn_detection : session.turn_detection;
  if (td === null) patch.turnDetection = null;
  else if (td !== undefined) {
    patch.turnDetection = {
      type: td.type,
      ...(td.threshold === undefined ? {} : { threshold: td.threshold }),
      ...(td.prefix_padding_ms === undefined ? {} : { prefixPaddingMs: td.prefix_padding_ms }),
      ...(td.silence_duration_ms === undefined ? {} : { silenceDurationMs: td.silence_duration_ms }),
      ...(td.min_speech_duration_ms === undefined ? {} : { minSpeechDurationMs: td.min_speech_duration_ms }),
      ...(td.create_response === undefined ? {} : { createResponse: td.create_response }),
      ...(td.interrupt_response === undefined ? {} : { interruptResponse: td.interrupt_response }),
    };
  }
  if (session.overlap_policy !== undefined) patch.overlapPolicy = session.overlap_policy;
  if (session.playback_commit_policy !== undefined) patch.playbackCommitPolicy = session.playback_commit_policy;
  if (session.temperature !== undefined) patch.temperature = session.temperature;
  if (session.idle_timeout_s !== undefined) patch.idleTimeoutS = session.idle_timeout_s;
  const transcription = session.audio?.input?.transcription ?? session.input_audio_transcription;
  if (transcription !== undefined) patch.inputTranscription = transcription;
  const noise = session.audio?.input?.noise_reduction ?? session.input_audio_noise_reduction;
  if (noise !== undefined) patch.inputNoiseReduction = noise;
  if (session.extra_body?.auto_response !== undefined) patch.autoResponse = session.extra_body.auto_response;
  return patch;
};
