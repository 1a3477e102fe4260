import type { ErrorCode } from "../domain/index.ts";
import { readWav, readWavHeader, resamplePcm16, WavError, type WavErrorKind } from "../infra/audio/index.ts";
import { ChatError } from "./chat-error.ts";

/**
 * A chat completion's `input_audio` parts, decoded (issue 32, part 2; docs/deploy.md, "Limits"): a base64 WAV of
 * PCM16, mono or stereo (mixed down), at 8000-96000 Hz, within the request's audio budget
 * (`limits.request_audio_s`), resampled to the session's input rate. Every check is made on the WAV's header
 * before anything is decoded, and what is decoded is bounded by the bytes the request holds.
 */

/** Seconds of audio a request's parts may carry in all, and how many the parts decoded so far took. */
export interface AudioBudget {
  /** s, at most (`limits.request_audio_s`). */
  readonly maxS: number;
  /** s taken by the parts decoded so far; each part adds its own. */
  usedS: number;
}

/** The error code of each WAV refusal: the encoding, rate or channels is an unsupported format, the rest bad audio. */
const CODE_OF: { readonly [K in WavErrorKind]: ErrorCode } = {
  not_wav: "bad_audio",
  malformed: "bad_audio",
  too_long: "bad_audio",
  unsupported_encoding: "unsupported_audio_format",
  unsupported_rate: "unsupported_audio_format",
  unsupported_channels: "unsupported_audio_format",
};

/**
 * Decodes one `input_audio` part to the session's input audio and counts it against `budget`.
 *
 * @param audio the part's `{data: base64 WAV, format}`.
 * @param at the part's path in the request (`messages.0.content.1.input_audio`), for the error's param.
 * @param inputRateHz the session's input rate, Hz.
 * @param budget the request's audio budget; `usedS` grows by the part's seconds.
 * @returns mono PCM16 little-endian at `inputRateHz`.
 * @throws ChatError 400 `unsupported_audio_format` for a format other than `wav` (param `<at>.format`), or a WAV
 *   of another encoding (named: `IEEE float 32-bit`, `PCM 24-bit`, `A-law`), rate or channel count; `bad_audio`
 *   for bytes that are not a WAV or are cut short, and for audio past the budget (param `<at>.data`).
 */
export const decodeInputAudio = (
  audio: { readonly data: string; readonly format: string },
  at: string,
  inputRateHz: number,
  budget: AudioBudget,
): Buffer => {
  if (audio.format !== "wav")
    throw new ChatError(
      400,
      "unsupported_audio_format",
      `${at}.format ${audio.format}: only wav is decoded here`,
      `${at}.format`,
    );
  const bytes = Buffer.from(audio.data, "base64");
  let samples: Int16Array;
  let sampleRate: number;
  try {
    const header = readWavHeader(bytes);
    const seconds = header.frames / header.sampleRate;
    if (budget.usedS + seconds > budget.maxS)
      throw new ChatError(
        400,
        "bad_audio",
        `${at}.data: ${seconds.toFixed(1)} s of audio brings the request to ${(budget.usedS + seconds).toFixed(1)} s; a request carries at most ${budget.maxS} s (limits.request_audio_s)`,
        `${at}.data`,
      );
    ({ samples, sampleRate } = readWav(bytes));
    budget.usedS += seconds;
  } catch (error) {
    if (!(error instanceof WavError)) throw error;
    throw new ChatError(400, CODE_OF[error.kind], `${at}.data: ${error.message}`, `${at}.data`);
  }
  const pcm = resamplePcm16(samples, sampleRate, inputRateHz);
  return Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
};
