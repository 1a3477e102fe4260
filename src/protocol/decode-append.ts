/**
 * Decoding of `input_audio_buffer.append` (OpenAI Realtime, "input_audio_buffer.append", with the duplex extensions of
 * the reference: `format` / `sample_rate_hz`, `is_speech`, `duration_ms`, `audio_end_ms`, `video_frames`, `vad`,
 * `force_listen`). Errors are `invalid` commands with a code and the field named; nothing is done for a refused one.
 */
import type { z } from "zod";
import { type ClientVad, type Command, type ErrorCode, G711_RATE_HZ, SUPPORTED_INPUT_RATES } from "../domain/index.ts";
import { decodeAudio, durationMismatch, encodeAudio, parseAudioFormat } from "./audio-formats.ts";
import { decodeStandardBase64, isStandardBase64 } from "./base64.ts";
import type { clientEventSchemas } from "./client-events.ts";
import type { DecodeContext } from "./decode-context.ts";
import { inputFormatOf } from "./session-patch.ts";

type InvalidCommand = Extract<Command, { type: "invalid" }>;

const invalid = (
  code: ErrorCode,
  message: string,
  eventId: string | null,
  eventType: string,
  param: string,
): InvalidCommand => ({ type: "invalid", eventId, code, message, param, eventType });

/**
 * An audio append as decoded from the wire, before the engine converts it to the runner's input rate and runs
 * VAD on it. `pcm16` is little-endian mono at `sampleRateHz` (bytes, an even count), whatever the declared format
 * was: G.711 and pcm_f32le appends are decoded to PCM16 here (G.711 at 8000 Hz).
 */
export interface DecodedAppend {
  readonly type: "input_audio_buffer.append";
  readonly eventId: string | null;
  readonly pcm16: Uint8Array;
  readonly sampleRateHz: number;
  readonly isSpeech: boolean | null;
  /** `video_frames`: the bytes of each JPEG or PNG camera frame (empty when none, or when one is bad). */
  readonly videoFrames: readonly Uint8Array[];
  /**
   * Why a frame is not a JPEG or PNG image, or null. The session refuses the append with `invalid_video_frames` only
   * where the model consumes video; elsewhere frames are ignored, bad or not (reference, "Capability negotiation").
   */
  readonly videoFramesError: { readonly message: string; readonly param: string } | null;
  /**
   * `audio_end_ms` of the duplex extension: where the client says this chunk ends on the session's input clock (ms),
   * or null. The session checks it against its own clock (src/engine/command-preparation.ts).
   */
  readonly audioEndMs: number | null;
  /** `vad`: the decisions of the client's own VAD for this chunk, or null (the server's VAD decides). */
  readonly clientVad: ClientVad | null;
  /** `force_listen`: the model must listen through this chunk; it cannot start the model speaking or barge in. */
  readonly forceListen: boolean;
}

export const decodeAppend = (
  event: z.infer<(typeof clientEventSchemas)["input_audio_buffer.append"]>,
  eventId: string | null,
  ctx: DecodeContext,
): DecodedAppend | InvalidCommand => {
  const type = "input_audio_buffer.append";
  const session = inputFormatOf(ctx);
  const declared = event.format ?? event.input_audio_format;
  const format = declared === undefined ? session : parseAudioFormat(declared, session.rate);
  if ("code" in format) return invalid(format.code, format.message, eventId, type, "format");
  const rate = event.sample_rate_hz ?? format.rate;
  const g711 = format.encoding === "g711_ulaw" || format.encoding === "g711_alaw";
  if (g711 && rate !== G711_RATE_HZ) {
    return invalid(
      "bad_event",
      `sample_rate_hz of ${format.encoding} audio must be ${G711_RATE_HZ} Hz; got ${rate}`,
      eventId,
      type,
      "sample_rate_hz",
    );
  }
  if (!g711 && !SUPPORTED_INPUT_RATES.includes(rate)) {
    return invalid(
      "bad_event",
      `sample_rate_hz must be one of ${SUPPORTED_INPUT_RATES.join(", ")} Hz; got ${rate}`,
      eventId,
      type,
      "sample_rate_hz",
    );
  }
  const bytes = decodeStandardBase64(event.audio);
  if (bytes === null) {
    return invalid("bad_audio", "audio must be standard base64 (padded, A-Z a-z 0-9 + /)", eventId, type, "audio");
  }
  const samples = decodeAudio({ encoding: format.encoding, rate }, bytes);
  if (!(samples instanceof Int16Array)) return invalid(samples.code, samples.message, eventId, type, "audio");
  const wrongDuration = durationMismatch(event.duration_ms, samples.length, bytes.length, format.encoding, rate);
  if (wrongDuration !== null) return invalid("bad_event", wrongDuration, eventId, type, "duration_ms");
  // A speech edge is at the chunk's start or end: a chunk with no audio would make an utterance of 0 ms.
  const vad = event.vad;
  const edges =
    vad !== undefined &&
    (vad.speech_started === true || vad.speech_stopped === true || vad.speech_active !== undefined);
  if (edges && samples.length === 0) {
    const message = "vad speech_started, speech_stopped and speech_active need audio: this append has none";
    return invalid("bad_event", message, eventId, type, "vad");
  }
  const videoFrames: Uint8Array[] = [];
  let videoFramesError: DecodedAppend["videoFramesError"] = null;
  for (const [i, frame] of (event.video_frames ?? []).entries()) {
    const image = decodeVideoFrame(frame);
    if (typeof image === "string") {
      videoFramesError = { message: `video_frames[${i}]: ${image}`, param: `video_frames.${i}` };
      break;
    }
    videoFrames.push(image);
  }
  // pcm16 is passed on as it came; the other encodings are re-encoded as little-endian PCM16 at their rate.
  const pcm16 = format.encoding === "pcm16" ? bytes : encodeAudio({ encoding: "pcm16", rate }, samples);
  return {
    type,
    eventId,
    pcm16,
    sampleRateHz: rate,
    isSpeech: event.is_speech ?? null,
    videoFrames: videoFramesError === null ? videoFrames : [],
    videoFramesError,
    audioEndMs: event.audio_end_ms ?? null,
    clientVad: event.vad === undefined ? null : clientVadOf(event.vad),
    forceListen: event.force_listen === true,
  };
};

/**
 * One `video_frames` entry (reference, "input_audio_buffer.append" with camera frames): bare base64 of a JPEG or PNG
 * image (a `data:image/...;base64,` prefix is accepted and stripped). Returns the image bytes, or why it is refused.
 */
const decodeVideoFrame = (frame: string): Uint8Array | string => {
  const payload = frame.startsWith("data:") ? frame.slice(frame.indexOf(",") + 1) : frame;
  if (payload.length === 0 || !isStandardBase64(payload)) {
    return "expected standard padded base64 of a JPEG or PNG image";
  }
  const bytes = Uint8Array.from(Buffer.from(payload, "base64"));
  const jpeg = bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff;
  const png = bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47;
  return jpeg || png ? bytes : "the image is neither JPEG nor PNG (by its first bytes)";
};

/** `vad` of an append (reference, the annotated append) as the domain records it: every field that was not sent is null. */
const clientVadOf = (
  vad: NonNullable<z.infer<(typeof clientEventSchemas)["input_audio_buffer.append"]>["vad"]>,
): ClientVad => ({
  backend: vad.backend ?? null,
  isSpeech: vad.is_speech ?? null,
  speechActive: vad.speech_active ?? null,
  speechStarted: vad.speech_started ?? null,
  speechStopped: vad.speech_stopped ?? null,
  speechProbability: vad.speech_probability ?? null,
});
