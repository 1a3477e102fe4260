import { type AudioEncoding, type AudioFormat, type ErrorCode, G711_RATE_HZ } from "../domain/index.ts";

/**
 * The audio layer of the wire codec: which formats a session may declare, in both of OpenAI's spellings, and the
 * conversion of their bytes to and from the engine's samples (mono int16).
 *
 * Formats are the OpenAI Realtime ones (beta strings `pcm16`, `g711_ulaw`, `g711_alaw`; GA objects
 * `{type: "audio/pcm", rate}`, `{type: "audio/pcmu"}`, `{type: "audio/pcma"}`) plus the duplex extension
 * `pcm_f32le`, PersonaPlex's input (see reference/realtime-duplex-api.md, the PersonaPlex preset: "24 kHz
 * pcm_f32le / 24 kHz pcm16").
 */

/** The encodings a session may declare: the domain's `AudioEncoding`, named for the wire. */
export type WireEncoding = AudioEncoding;

/**
 * An audio format as declared on the wire: mono `encoding` at `rate` Hz. G.711 (`g711_ulaw`, `g711_alaw`) is
 * always 8000 Hz; `pcm16` is signed 16-bit little-endian; `pcm_f32le` is 32-bit IEEE float little-endian in
 * [-1, 1].
 */
export type WireAudioFormat = { readonly encoding: WireEncoding; readonly rate: number };

/** The domain's spelling of a format (`{format, rate}`, as recorded in the session's events). */
export const toAudioFormat = (wire: WireAudioFormat): AudioFormat => ({ format: wire.encoding, rate: wire.rate });

/** The codec's spelling of a domain format (`{encoding, rate}`). */
export const toWireAudioFormat = (audio: AudioFormat): WireAudioFormat => ({
  encoding: audio.format,
  rate: audio.rate,
});

/** Why a declared format was refused: the code of the error table and a message naming what is supported. */
export type AudioFormatRefusal = {
  readonly code: Extract<ErrorCode, "unsupported_audio_format">;
  readonly message: string;
};

/** Why bytes could not be decoded in their declared format; the message says what was expected and what came. */
export type BadAudio = { readonly code: Extract<ErrorCode, "bad_audio">; readonly message: string };

/** The rate of G.711 in Hz (ITU-T G.711, section 1: 8000 samples per second); the domain's constant. */
export { G711_RATE_HZ };

/** Every accepted spelling of each encoding: beta string first, then the GA `type`, then the short aliases. */
const SPELLINGS: Readonly<Record<WireEncoding, readonly string[]>> = {
  pcm16: ["pcm16", "audio/pcm", "pcm"],
  g711_ulaw: ["g711_ulaw", "audio/pcmu", "pcmu"],
  g711_alaw: ["g711_alaw", "audio/pcma", "pcma"],
  pcm_f32le: ["pcm_f32le", "audio/pcm_f32le", "f32le"],
};

const ENCODING_OF: ReadonlyMap<string, WireEncoding> = new Map(
  (Object.entries(SPELLINGS) as [WireEncoding, readonly string[]][]).flatMap(([encoding, names]) =>
    names.map((name) => [name, encoding] as const),
  ),
);

const SUPPORTED = (Object.values(SPELLINGS) as (readonly string[])[])
  .map((names) => names.map((name) => `"${name}"`).join(" | "))
  .join(", ");

const isG711 = (encoding: WireEncoding): boolean => encoding === "g711_ulaw" || encoding === "g711_alaw";

/**
 * Reads an audio format in either spelling: a beta or alias string (`"pcm16"`, `"g711_ulaw"`, `"pcmu"`, ...) or a
 * GA object (`{type: "audio/pcm", rate: 24000}`). The rate (Hz) comes from the object, else `defaultRate`;
 * G.711 is always 8000 Hz, whatever `defaultRate` says.
 *
 * Names match exactly (case-sensitive, as OpenAI's). Returns the format, or `unsupported_audio_format` for an
 * unknown name, a G.711 object whose `rate` is not 8000, or a rate that is not a positive whole number of Hz.
 * Whether the rate suits the session is the domain's rule (`SUPPORTED_INPUT_RATES`), not this one.
 */
export const parseAudioFormat = (
  value: string | { type: string; rate?: number | undefined },
  defaultRate: number,
): WireAudioFormat | AudioFormatRefusal => {
  const name = typeof value === "string" ? value : value.type;
  const declaredRate = typeof value === "string" ? undefined : value.rate;
  const encoding = ENCODING_OF.get(name);
  if (encoding === undefined) {
    return {
      code: "unsupported_audio_format",
      message: `audio format ${JSON.stringify(name)} is not supported; use one of ${SUPPORTED}`,
    };
  }
  if (isG711(encoding)) {
    if (declaredRate !== undefined && declaredRate !== G711_RATE_HZ) {
      return {
        code: "unsupported_audio_format",
        message: `audio format "${name}" is G.711 at ${G711_RATE_HZ} Hz only; got rate ${declaredRate}`,
      };
    }
    return { encoding, rate: G711_RATE_HZ };
  }
  const rate = declaredRate ?? defaultRate;
  if (!Number.isInteger(rate) || rate <= 0) {
    return {
      code: "unsupported_audio_format",
      message: `audio format "${name}" needs a rate in Hz that is a positive whole number; got ${rate}`,
    };
  }
  return { encoding, rate };
};

/**
 * The two spellings of a format, for rendering the session object: the beta string (`input_audio_format`) and the
 * GA object (`audio.input.format`), `rate` (Hz) only where the GA type has one (not for `audio/pcmu`,
 * `audio/pcma`). The inverse of {@link parseAudioFormat}: parsing either spelling gives `format` back.
 */
export const formatSpellings = (format: WireAudioFormat): { beta: string; ga: { type: string; rate?: number } } => {
  switch (format.encoding) {
    case "pcm16":
      return { beta: "pcm16", ga: { type: "audio/pcm", rate: format.rate } };
    case "g711_ulaw":
      return { beta: "g711_ulaw", ga: { type: "audio/pcmu" } };
    case "g711_alaw":
      return { beta: "g711_alaw", ga: { type: "audio/pcma" } };
    case "pcm_f32le":
      return { beta: "pcm_f32le", ga: { type: "audio/pcm_f32le", rate: format.rate } };
    default: {
      const unknown: never = format.encoding;
      throw new Error(`unknown audio encoding ${String(unknown)}`);
    }
  }
};

/** Bytes per (mono) sample of an encoding: 2 for pcm16, 1 for G.711, 4 for pcm_f32le. */
export const bytesPerSample = (encoding: WireEncoding): 1 | 2 | 4 => {
  switch (encoding) {
    case "pcm16":
      return 2;
    case "g711_ulaw":
    case "g711_alaw":
      return 1;
    case "pcm_f32le":
      return 4;
    default: {
      const unknown: never = encoding;
      throw new Error(`unknown audio encoding ${String(unknown)}`);
    }
  }
};

// G.711, after ITU-T Rec. G.711 (11/1988) Tables 1 (A-law) and 2 (mu-law). A code is sign bit, 3 segment bits,
// 4 quantisation bits. The linear values are G.711's scaled to 16 bits: mu-law's 14-bit values times 4 (full scale
// +-32124), A-law's 13-bit values times 8 (full scale +-32256). Decoding returns the middle of each quantisation
// interval (G.711's decoder output values). Encoding follows the ITU-T's own reference, G.191's Software Tool
// Library (g711.c, ulaw_compress / alaw_compress): the magnitude of a negative sample is its one's complement
// (`~x`, i.e. -x - 1), so x and -x - 1 encode to mirror codes.

const SIGN_BIT = 0x80;
const QUANT_MASK = 0x0f;
const SEG_SHIFT = 4;
const SEG_MASK = 0x70;
/** mu-law's bias: 33 on the 14-bit scale (the offset between the A-law and mu-law thresholds), 132 on int16. */
const ULAW_BIAS = 33;
/** The largest biased 14-bit mu-law magnitude; louder samples clip to full scale (G.191: "absno < 8192"). */
const ULAW_MAX_BIASED = 0x1fff;
/** Segment ends: mu-law on the biased 14-bit magnitude, A-law on the 12-bit magnitude of the 13-bit value. */
const ULAW_SEG_END = [0x3f, 0x7f, 0xff, 0x1ff, 0x3ff, 0x7ff, 0xfff, 0x1fff];
const ALAW_SEG_END = [0x1f, 0x3f, 0x7f, 0xff, 0x1ff, 0x3ff, 0x7ff, 0xfff];

/** The segment (0..7) whose end is the first at or above `magnitude`; the callers keep it within the last end. */
const segmentOf = (magnitude: number, ends: readonly number[]): number => {
  let segment = 0;
  while (magnitude > (ends[segment] as number)) segment += 1;
  return segment;
};

/** mu-law code to int16: every bit is transmitted inverted; sign bit set (after inversion) = negative. */
const ulawToLinear = (code: number): number => {
  const u = ~code & 0xff;
  const t = ((((u & QUANT_MASK) << 1) + ULAW_BIAS) << ((u & SEG_MASK) >> SEG_SHIFT)) - ULAW_BIAS;
  return (u & SIGN_BIT ? -t : t) * 4;
};

/** A-law code to int16: the even bits are transmitted inverted (XOR 0x55); sign bit set = positive. */
const alawToLinear = (code: number): number => {
  const a = code ^ 0x55;
  const segment = (a & SEG_MASK) >> SEG_SHIFT;
  const q = (a & QUANT_MASK) << 4;
  const t = segment === 0 ? q + 8 : (q + 0x108) << (segment - 1);
  return a & SIGN_BIT ? t : -t;
};

/** int16 to mu-law: 14-bit magnitude (one's complement if negative), biased by 33, segment, 4 bits, inverted. */
const linearToUlaw = (sample: number): number => {
  const negative = sample < 0;
  const biased = Math.min(((negative ? ~sample : sample) >> 2) + ULAW_BIAS, ULAW_MAX_BIASED);
  const segment = segmentOf(biased, ULAW_SEG_END);
  const code = (segment << SEG_SHIFT) | ((biased >> (segment + 1)) & QUANT_MASK);
  return code ^ (negative ? 0x7f : 0xff);
};

/** int16 to A-law: 12-bit magnitude (one's complement if negative), segment, 4 bits, even bits inverted. */
const linearToAlaw = (sample: number): number => {
  const negative = sample < 0;
  const magnitude = (negative ? ~sample : sample) >> 3;
  const segment = segmentOf(magnitude, ALAW_SEG_END);
  const code = (segment << SEG_SHIFT) | ((magnitude >> Math.max(1, segment)) & QUANT_MASK);
  return code ^ (negative ? 0x55 : 0xd5);
};

const tableOf = (decode: (code: number) => number): Int16Array => Int16Array.from({ length: 256 }, (_, c) => decode(c));
const ULAW_TO_LINEAR = tableOf(ulawToLinear);
const ALAW_TO_LINEAR = tableOf(alawToLinear);

// pcm_f32le <-> int16 follows ffmpeg's s16 <-> flt conversion (libswresample audioconvert.c): float = s / 32768,
// s = clip(round(float * 32768)). Every int16 divided by 2^15 is exact in float32, so int16 -> f32 -> int16 is exact.
const F32_SCALE = 32768;

/** A finite float to int16: times 32768, rounded half away from zero, clipped (which clamps it to [-1, 1] too). */
const floatToInt16 = (value: number): number => {
  const scaled = value * F32_SCALE;
  const rounded = Math.sign(scaled) * Math.round(Math.abs(scaled));
  return Math.max(-32768, Math.min(32767, rounded));
};

const viewOf = (bytes: Uint8Array): DataView => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);

const wholeSamples = (encoding: WireEncoding, bytes: Uint8Array): BadAudio | null => {
  const size = bytesPerSample(encoding);
  if (bytes.byteLength % size === 0) return null;
  return {
    code: "bad_audio",
    message: `${encoding} audio must be a whole number of ${size}-byte samples; got ${bytes.byteLength} bytes`,
  };
};

/**
 * Decodes bytes of `format` into mono int16 samples at `format.rate` Hz (one sample per `bytesPerSample` bytes;
 * the rate is not changed). pcm16 is read little-endian; G.711 by ITU-T G.711 (mu-law to +-32124, A-law to
 * +-32256); pcm_f32le little-endian, clamped to [-1, 1], times 32768, rounded half away from zero and clipped
 * to int16.
 *
 * Returns `bad_audio` when the byte count is not a whole number of samples (pcm16, pcm_f32le) or a float sample
 * is NaN or infinite. Never throws.
 */
export const decodeAudio = (format: WireAudioFormat, bytes: Uint8Array): Int16Array | BadAudio => {
  const partial = wholeSamples(format.encoding, bytes);
  if (partial !== null) return partial;
  switch (format.encoding) {
    case "pcm16": {
      const view = viewOf(bytes);
      const samples = new Int16Array(bytes.byteLength / 2);
      for (let i = 0; i < samples.length; i += 1) samples[i] = view.getInt16(i * 2, true);
      return samples;
    }
    case "g711_ulaw":
      return Int16Array.from(bytes, (code) => ULAW_TO_LINEAR[code] as number);
    case "g711_alaw":
      return Int16Array.from(bytes, (code) => ALAW_TO_LINEAR[code] as number);
    case "pcm_f32le": {
      const view = viewOf(bytes);
      const samples = new Int16Array(bytes.byteLength / 4);
      for (let i = 0; i < samples.length; i += 1) {
        const value = view.getFloat32(i * 4, true);
        if (!Number.isFinite(value)) {
          return {
            code: "bad_audio",
            message: `pcm_f32le audio must hold finite samples in [-1, 1]; sample ${i} is ${value}`,
          };
        }
        samples[i] = floatToInt16(value);
      }
      return samples;
    }
    default: {
      const unknown: never = format.encoding;
      throw new Error(`unknown audio encoding ${String(unknown)}`);
    }
  }
};

/**
 * Encodes mono int16 samples as bytes of `format` (the inverse of {@link decodeAudio}; the rate is not changed):
 * pcm16 little-endian, G.711 mu-law or A-law as ITU-T G.191's reference encoder (one byte a sample, lossy: within
 * half a quantisation step plus the dropped low bits, more only where mu-law clips beyond +-32635), or
 * pcm_f32le (`sample / 32768`, exact).
 */
export const encodeAudio = (format: WireAudioFormat, samples: Int16Array): Uint8Array => {
  switch (format.encoding) {
    case "pcm16": {
      const bytes = new Uint8Array(samples.length * 2);
      const view = viewOf(bytes);
      for (const [i, sample] of samples.entries()) view.setInt16(i * 2, sample, true);
      return bytes;
    }
    case "g711_ulaw":
      return Uint8Array.from(samples, linearToUlaw);
    case "g711_alaw":
      return Uint8Array.from(samples, linearToAlaw);
    case "pcm_f32le": {
      const bytes = new Uint8Array(samples.length * 4);
      const view = viewOf(bytes);
      for (const [i, sample] of samples.entries()) view.setFloat32(i * 4, sample / F32_SCALE, true);
      return bytes;
    }
    default: {
      const unknown: never = format.encoding;
      throw new Error(`unknown audio encoding ${String(unknown)}`);
    }
  }
};

/** How far (ms) a client's `duration_ms` may be from the duration of the bytes it sent: rounding only. */
export const DURATION_TOLERANCE_MS = 1;

/**
 * Why an append's `duration_ms` (the duplex extension; reference, "input_audio_buffer.append") is not the duration of
 * its audio (`samples` at `rate`, `bytes` of `encoding`), or null when it is, within `DURATION_TOLERANCE_MS`, or
 * absent.
 */
export const durationMismatch = (
  durationMs: number | undefined,
  samples: number,
  bytes: number,
  encoding: string,
  rate: number,
): string | null => {
  const actualMs = (samples / rate) * 1000;
  if (durationMs === undefined || Math.abs(durationMs - actualMs) <= DURATION_TOLERANCE_MS) return null;
  return `duration_ms ${durationMs} is not the duration of the audio sent (${actualMs} ms: ${bytes} bytes of ${encoding} at ${rate} Hz)`;
};
