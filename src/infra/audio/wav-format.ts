/**
 * The RIFF/WAVE container as the WAV readers walk it (wav.ts decodes PCM16, encoded-wav.ts passes other encodings
 * through): the chunk list, the format tag, the names of encodings, the accepted rates and channels, and the
 * readers' error. Nothing here allocates more than the bytes given (issue 32, part 2).
 */

/** The sample rates a WAV reader accepts, Hz (issue 32, part 2: a declared 1 Hz made the resampler's output huge). */
export const WAV_MIN_RATE_HZ = 8000;
/** See {@link WAV_MIN_RATE_HZ}. */
export const WAV_MAX_RATE_HZ = 96000;
/** The most channels a WAV reader accepts: mono, or stereo (mixed down to mono by {@link readWav}). */
export const WAV_MAX_CHANNELS = 2;

/**
 * Why a WAV was refused: `not_wav` (not RIFF/WAVE), `malformed` (chunks missing, out of order or cut short),
 * `unsupported_encoding` (not the encoding the reader takes), `unsupported_rate` (outside
 * {@link WAV_MIN_RATE_HZ}-{@link WAV_MAX_RATE_HZ}), `unsupported_channels` (none, or more than
 * {@link WAV_MAX_CHANNELS}), `too_long` (more seconds than the caller allows).
 */
export type WavErrorKind =
  | "not_wav"
  | "malformed"
  | "unsupported_encoding"
  | "unsupported_rate"
  | "unsupported_channels"
  | "too_long";

/** A WAV the readers refuse: `kind` says why (callers map it to their error codes), the message what was found. */
export class WavError extends Error {
  override readonly name = "WavError";
  constructor(
    readonly kind: WavErrorKind,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Bytes of `RIFF`, the file size and `WAVE`, before the first chunk. */
export const RIFF_HEADER_BYTES = 12;
/** Bytes of a chunk's id and size, before its body. */
export const CHUNK_HEADER_BYTES = 8;
/** The format tag of integer PCM. */
export const WAVE_FORMAT_PCM = 0x0001;
/** The format tag whose real format is the first two bytes of the sub-format GUID at byte 24 of `fmt `. */
export const WAVE_FORMAT_EXTENSIBLE = 0xfffe;

/**
 * The chunks of a RIFF/WAVE file that hold its audio, walking the chunk list from byte 12 (each chunk padded to an
 * even size): the last `fmt ` chunk before the first `data` chunk, and that `data` chunk. Offsets and sizes in bytes;
 * `available` is what of the declared data the bytes hold, `missingBytes` what they lack (0 for a streaming size,
 * 0 or 0xFFFFFFFF: "unknown").
 */
export function wavChunks(
  bytes: Uint8Array,
  view: DataView,
): {
  readonly fmt: { readonly body: number; readonly size: number } | undefined;
  readonly data:
    | { readonly offset: number; readonly body: number; readonly available: number; readonly missingBytes: number }
    | undefined;
} {
  let fmt: { body: number; size: number } | undefined;
  let offset = RIFF_HEADER_BYTES;
  while (offset + CHUNK_HEADER_BYTES <= bytes.length) {
    const id = fourCC(bytes, offset);
    const size = view.getUint32(offset + 4, true);
    const body = offset + CHUNK_HEADER_BYTES;
    if (id === "fmt ") fmt = { body, size };
    else if (id === "data") {
      const streaming = size === 0 || size === 0xffffffff;
      return {
        fmt,
        data: {
          offset,
          body,
          available: Math.min(size, bytes.length - body),
          missingBytes: streaming ? 0 : Math.max(0, size - (bytes.length - body)),
        },
      };
    }
    offset = body + size + (size % 2);
  }
  return { fmt, data: undefined };
}

/** A `fmt ` chunk's format tag; for WAVE_FORMAT_EXTENSIBLE, the tag of its sub-format GUID when the chunk has one. */
export function formatTag(view: DataView, body: number, size: number): number {
  const tag = view.getUint16(body, true);
  return tag === WAVE_FORMAT_EXTENSIBLE && size >= 26 && body + 26 <= view.byteLength
    ? view.getUint16(body + 24, true)
    : tag;
}

/**
 * Refuses a rate outside {@link WAV_MIN_RATE_HZ}-{@link WAV_MAX_RATE_HZ} Hz and a channel count outside
 * 1-{@link WAV_MAX_CHANNELS}; messages start with `expected`.
 * @throws WavError `unsupported_channels` or `unsupported_rate`.
 */
export function checkRateAndChannels(sampleRate: number, channels: number, expected: string): void {
  if (channels < 1 || channels > WAV_MAX_CHANNELS) {
    throw new WavError("unsupported_channels", `${expected} 1 or 2 channels (mono or stereo), found ${channels}`);
  }
  if (sampleRate < WAV_MIN_RATE_HZ || sampleRate > WAV_MAX_RATE_HZ) {
    throw new WavError(
      "unsupported_rate",
      `${expected} a sample rate of ${WAV_MIN_RATE_HZ} to ${WAV_MAX_RATE_HZ} Hz, found ${sampleRate} Hz`,
    );
  }
}

/** The four ASCII characters at `offset` (a chunk id). */
export function fourCC(bytes: Uint8Array, offset: number): string {
  return String.fromCharCode(...bytes.subarray(offset, offset + 4));
}

/** Names of WAV format tags other than PCM and IEEE float (RFC 2361, mmreg.h). */
const FORMAT_NAMES: Readonly<Record<number, string>> = {
  2: "Microsoft ADPCM",
  6: "A-law",
  7: "mu-law",
  17: "IMA ADPCM",
  49: "GSM 6.10",
  80: "MPEG audio",
  85: "MPEG Layer 3 (MP3)",
  65534: "WAVE_FORMAT_EXTENSIBLE without a sub-format",
};

/**
 * The name of a WAV encoding by its format tag and bits per sample, as people call it: `PCM 24-bit`,
 * `IEEE float 32-bit`, `A-law`, `mu-law` (G.711 at its 8 bits; `A-law 16-bit` otherwise), `Microsoft ADPCM`,
 * `format tag 0x1234` for a tag not named here.
 */
export const encodingName = (tag: number, bits: number): string => {
  if (tag === 1) return `PCM ${bits}-bit`;
  if (tag === 3) return `IEEE float ${bits}-bit`;
  const name = FORMAT_NAMES[tag];
  if (name === undefined) return `format tag 0x${tag.toString(16).padStart(4, "0")}`;
  return (tag === 6 || tag === 7) && bits !== 8 ? `${name} ${bits}-bit` : name;
};
