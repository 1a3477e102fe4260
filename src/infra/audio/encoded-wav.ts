/**
 * Reading a WAV file's audio as stored, undecoded, for a client that sends it in its own encoding (`duplex demo`).
 */
import {
  checkRateAndChannels,
  encodingName,
  formatTag,
  fourCC,
  RIFF_HEADER_BYTES,
  WavError,
  wavChunks,
} from "./wav-format.ts";

/** The encodings a realtime session accepts as input, as WAV files carry them (format tag and bits per sample). */
export type WavEncoding = "pcm16" | "g711_ulaw" | "g711_alaw" | "pcm_f32le";

/** A WAV file's audio as stored: its encoding, rate (Hz), channels, the `data` bytes, and bytes missing at the end. */
export interface EncodedWav {
  readonly encoding: WavEncoding;
  readonly sampleRate: number;
  readonly channels: number;
  readonly data: Uint8Array;
  readonly missingBytes: number;
}

/**
 * What kind of file `bytes` is, by its first bytes, when it is a common audio or video container that is not WAV
 * (`an MP3 file`, `an Ogg file`, ...); null when it is none of them.
 */
export const containerOf = (bytes: Uint8Array): string | null => {
  const ascii = (from: number, to: number) => Buffer.from(bytes.subarray(from, to)).toString("latin1");
  if (ascii(0, 3) === "ID3" || (bytes[0] === 0xff && ((bytes[1] ?? 0) & 0xe6) === 0xe2)) return "an MP3 file";
  if (ascii(0, 4) === "OggS") return "an Ogg file (Opus or Vorbis)";
  if (ascii(0, 4) === "fLaC") return "a FLAC file";
  if (ascii(4, 8) === "ftyp") return "an MP4 / M4A file";
  if (bytes[0] === 0x1a && bytes[1] === 0x45 && bytes[2] === 0xdf && bytes[3] === 0xa3) return "a WebM / Matroska file";
  if (ascii(0, 4) === "FORM" && ascii(8, 12).startsWith("AIF")) return "an AIFF file";
  if (ascii(0, 4) === "RIFF") return `a RIFF file of type ${JSON.stringify(ascii(8, 12))}, not WAVE`;
  return null;
};

/**
 * Reads a WAV file's audio without decoding it, for a client that sends it as it is: PCM16 (tag 1), IEEE float
 * 32-bit (tag 3), A-law (tag 6) and mu-law (tag 7), WAVE_FORMAT_EXTENSIBLE included; mono or stereo at 8000 to
 * 96000 Hz. The bytes returned are the `data` chunk's bytes present, never more (a header that declares more is
 * reported in `missingBytes`).
 * @throws WavError naming what the file is: `not_wav` when it is not RIFF/WAVE (the container it is, when known),
 *   `malformed` when it is cut short or its chunks are missing or out of order (the message then starts with
 *   `truncated` when the file ends early), `unsupported_encoding`, `unsupported_rate`, `unsupported_channels`.
 */
export function readEncodedWav(bytes: Uint8Array): EncodedWav {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < RIFF_HEADER_BYTES || fourCC(bytes, 0) !== "RIFF" || fourCC(bytes, 8) !== "WAVE") {
    throw new WavError(
      "not_wav",
      `not a RIFF/WAVE file: ${containerOf(bytes) ?? `${bytes.length} bytes of a format not known here`}`,
    );
  }
  const { fmt, data } = wavChunks(bytes, view);
  let format: { encoding: WavEncoding; sampleRate: number; channels: number } | undefined;
  if (fmt !== undefined) {
    const { body, size } = fmt;
    if (body + 16 > bytes.length) throw new WavError("malformed", `truncated: the file ends inside its "fmt " chunk`);
    if (size < 16) throw new WavError("malformed", `a "fmt " chunk of ${size} bytes is too short`);
    const tag = formatTag(view, body, size);
    const bits = view.getUint16(body + 14, true);
    const encoding: WavEncoding | undefined =
      tag === 1 && bits === 16
        ? "pcm16"
        : tag === 3 && bits === 32
          ? "pcm_f32le"
          : tag === 6 && bits === 8
            ? "g711_alaw"
            : tag === 7 && bits === 8
              ? "g711_ulaw"
              : undefined;
    if (encoding === undefined)
      throw new WavError(
        "unsupported_encoding",
        `${encodingName(tag, bits)} (PCM 16-bit, IEEE float 32-bit, A-law or mu-law are sent)`,
      );
    format = { encoding, sampleRate: view.getUint32(body + 4, true), channels: view.getUint16(body + 2, true) };
    checkRateAndChannels(format.sampleRate, format.channels, "expected");
  }
  if (data === undefined) {
    throw new WavError(
      "malformed",
      format === undefined ? 'no "fmt " and "data" chunks' : 'truncated: no "data" chunk',
    );
  }
  if (format === undefined) throw new WavError("malformed", `a "data" chunk before any "fmt " chunk`);
  return {
    ...format,
    data: bytes.slice(data.body, data.body + data.available),
    missingBytes: data.missingBytes,
  };
}
