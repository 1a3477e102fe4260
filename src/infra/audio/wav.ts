/**
 * WAV (RIFF/WAVE) reading and writing, PCM16 only. Reading walks the chunk list, so files with `LIST`, `fact`,
 * `bext` or other chunks before or after `data` are read; writing produces the canonical 44-byte header, mono.
 */
import { readFile, writeFile } from "node:fs/promises";
import { pcm16FromBytes, pcm16ToBytes } from "./pcm.ts";

/** Decoded PCM16 WAV audio. `samples` are interleaved when `channels > 1`. */
export interface WavAudio {
  /** Sample rate in Hz. */
  readonly sampleRate: number;
  /** Number of interleaved channels (1 = mono). */
  readonly channels: number;
  /** PCM16 samples, `frames * channels` of them, interleaved; its own memory, not a view of the input. */
  readonly samples: Int16Array;
  /**
   * Bytes the `data` chunk declares beyond the end of the file (a truncated file), or 0. A streaming size
   * (0 or 0xFFFFFFFF: "unknown") is not counted as truncation.
   */
  readonly missingBytes?: number;
}

const RIFF_HEADER_BYTES = 12;
const CHUNK_HEADER_BYTES = 8;
const WAVE_FORMAT_PCM = 0x0001;
const WAVE_FORMAT_EXTENSIBLE = 0xfffe;

/**
 * Decodes a PCM16 WAV file held in memory. Chunks other than `fmt ` and `data` are skipped (with their pad byte
 * when their size is odd). A `data` chunk whose declared size runs past the end of the bytes (a streamed WAV
 * written before its length was known) is read up to the last whole sample frame.
 *
 * @param bytes the whole file.
 * @returns sample rate (Hz), channel count and interleaved samples.
 * @throws Error when the bytes are not RIFF/WAVE, when `fmt ` is missing or comes after `data`, when the format
 *   is not integer PCM (tag 1, or WAVE_FORMAT_EXTENSIBLE with the PCM sub-format) with 16 bits per sample, or
 *   when there is no `data` chunk. The message names what was expected and what was found.
 */
export function readWav(bytes: Uint8Array): WavAudio {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < RIFF_HEADER_BYTES) {
    throw new Error(`WAV: expected at least a 12-byte RIFF header, got ${bytes.length} bytes`);
  }
  const riff = fourCC(bytes, 0);
  const wave = fourCC(bytes, 8);
  if (riff !== "RIFF" || wave !== "WAVE") {
    throw new Error(
      `WAV: expected "RIFF" ... "WAVE" at bytes 0 and 8, found ${JSON.stringify(riff)} ... ${JSON.stringify(wave)}`,
    );
  }

  const { fmt, data } = wavChunks(bytes, view);
  const format = fmt === undefined ? undefined : readFormat(view, fmt.body, fmt.size);
  if (data === undefined) {
    throw new Error(
      format === undefined
        ? `WAV: expected "fmt " and "data" chunks, found neither in ${bytes.length} bytes`
        : `WAV: expected a "data" chunk, found none in ${bytes.length} bytes`,
    );
  }
  if (format === undefined) {
    throw new Error(`WAV: expected a "fmt " chunk before the "data" chunk at byte ${data.offset}, found none`);
  }
  const frameBytes = 2 * format.channels;
  const end = data.body + data.available - (data.available % frameBytes);
  const samples = pcm16FromBytes(bytes.subarray(data.body, end));
  return {
    sampleRate: format.sampleRate,
    channels: format.channels,
    samples: samples.buffer === bytes.buffer ? samples.slice() : samples,
    missingBytes: data.missingBytes,
  };
}

/**
 * The chunks of a RIFF/WAVE file that hold its audio, walking the chunk list from byte 12 (each chunk padded to an
 * even size): the last `fmt ` chunk before the first `data` chunk, and that `data` chunk. Offsets and sizes in bytes;
 * `available` is what of the declared data the bytes hold, `missingBytes` what they lack (0 for a streaming size,
 * 0 or 0xFFFFFFFF: "unknown").
 */
function wavChunks(
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

/**
 * Reads and decodes a PCM16 WAV file.
 *
 * @param path file path.
 * @returns as {@link readWav}.
 * @throws the file system's error when the file cannot be read, and as {@link readWav} when it is not PCM16 WAV
 *   (the message then starts with the path).
 */
export async function readWavFile(path: string | URL): Promise<WavAudio> {
  const bytes = await readFile(path);
  try {
    return readWav(bytes);
  } catch (error) {
    throw new Error(`${String(path)}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * Encodes mono PCM16 samples as a WAV file with the canonical 44-byte header (`RIFF`, `fmt ` PCM, `data`).
 *
 * @param samples mono PCM16 samples.
 * @param sampleRate in Hz, a positive integer.
 * @returns `44 + samples.length * 2` bytes.
 * @throws Error when `sampleRate` is not a positive integer or the audio does not fit a RIFF file (4 GiB).
 */
export function encodeWav(samples: Int16Array, sampleRate: number): Uint8Array {
  if (!Number.isInteger(sampleRate) || sampleRate <= 0) {
    throw new Error(`WAV: expected a positive integer sample rate in Hz, got ${sampleRate}`);
  }
  const dataBytes = samples.length * 2;
  if (44 + dataBytes > 0xffffffff) {
    throw new Error(`WAV: expected at most ${(0xffffffff - 44) / 2} samples, got ${samples.length}`);
  }
  const bytes = new Uint8Array(44 + dataBytes);
  const view = new DataView(bytes.buffer);
  writeFourCC(bytes, 0, "RIFF");
  view.setUint32(4, 36 + dataBytes, true);
  writeFourCC(bytes, 8, "WAVE");
  writeFourCC(bytes, 12, "fmt ");
  view.setUint32(16, 16, true);
  view.setUint16(20, WAVE_FORMAT_PCM, true);
  view.setUint16(22, 1, true);
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  writeFourCC(bytes, 36, "data");
  view.setUint32(40, dataBytes, true);
  bytes.set(pcm16ToBytes(samples), 44);
  return bytes;
}

/**
 * Encodes mono PCM16 samples as WAV (see {@link encodeWav}) and writes the file, replacing any existing one.
 *
 * @param path file path.
 * @param samples mono PCM16 samples.
 * @param sampleRate in Hz.
 * @throws as {@link encodeWav}, and the file system's error when the file cannot be written.
 */
export async function writeWavFile(path: string | URL, samples: Int16Array, sampleRate: number): Promise<void> {
  await writeFile(path, encodeWav(samples, sampleRate));
}

function readFormat(view: DataView, body: number, size: number): { sampleRate: number; channels: number } {
  if (size < 16 || body + 16 > view.byteLength) {
    throw new Error(`WAV: expected a "fmt " chunk of at least 16 bytes, found ${size} bytes`);
  }
  let tag = view.getUint16(body, true);
  const channels = view.getUint16(body + 2, true);
  const sampleRate = view.getUint32(body + 4, true);
  const bitsPerSample = view.getUint16(body + 14, true);
  if (tag === WAVE_FORMAT_EXTENSIBLE && size >= 26 && body + 26 <= view.byteLength) {
    // The sub-format GUID starts at byte 24 of the chunk; its first two bytes are the real format tag.
    tag = view.getUint16(body + 24, true);
  }
  if (tag !== WAVE_FORMAT_PCM || bitsPerSample !== 16) {
    throw new Error(
      `WAV: expected PCM16 (format tag 1, 16 bits per sample), found format tag ${tag} with ${bitsPerSample} bits per sample`,
    );
  }
  if (channels < 1 || sampleRate < 1) {
    throw new Error(
      `WAV: expected at least 1 channel and a positive sample rate, found ${channels} channels at ${sampleRate} Hz`,
    );
  }
  return { sampleRate, channels };
}

function fourCC(bytes: Uint8Array, offset: number): string {
  return String.fromCharCode(...bytes.subarray(offset, offset + 4));
}

function writeFourCC(bytes: Uint8Array, offset: number, id: string): void {
  for (let i = 0; i < 4; i++) {
    bytes[offset + i] = id.charCodeAt(i);
  }
}

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

/** The name of a WAV encoding by its format tag and bits per sample: `24-bit PCM`, `64-bit float`, `mu-law`. */
const encodingName = (tag: number, bits: number): string =>
  tag === 1
    ? `${bits}-bit PCM`
    : tag === 3
      ? `${bits}-bit float`
      : tag === 6
        ? `${bits}-bit A-law`
        : tag === 7
          ? `${bits}-bit mu-law`
          : `WAV format tag ${tag} (${bits} bits per sample)`;

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
 * 32-bit (tag 3), A-law (tag 6) and mu-law (tag 7), WAVE_FORMAT_EXTENSIBLE included.
 * @throws Error naming what the file is when it is not RIFF/WAVE or holds another encoding.
 */
export function readEncodedWav(bytes: Uint8Array): EncodedWav {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < RIFF_HEADER_BYTES || fourCC(bytes, 0) !== "RIFF" || fourCC(bytes, 8) !== "WAVE") {
    throw new Error(
      `not a RIFF/WAVE file: ${containerOf(bytes) ?? `${bytes.length} bytes of a format not known here`}`,
    );
  }
  const { fmt, data } = wavChunks(bytes, view);
  let format: { encoding: WavEncoding; sampleRate: number; channels: number } | undefined;
  if (fmt !== undefined) {
    const { body, size } = fmt;
    if (body + 16 > bytes.length) throw new Error(`truncated: the file ends inside its "fmt " chunk`);
    if (size < 16) throw new Error(`a "fmt " chunk of ${size} bytes is too short`);
    let tag = view.getUint16(body, true);
    if (tag === WAVE_FORMAT_EXTENSIBLE && size >= 26 && body + 26 <= bytes.length)
      tag = view.getUint16(body + 24, true);
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
      throw new Error(`${encodingName(tag, bits)} (PCM16, float32, A-law or mu-law are sent)`);
    format = { encoding, sampleRate: view.getUint32(body + 4, true), channels: view.getUint16(body + 2, true) };
  }
  if (data === undefined) {
    throw new Error(format === undefined ? 'no "fmt " and "data" chunks' : 'truncated: no "data" chunk');
  }
  if (format === undefined) throw new Error(`a "data" chunk before any "fmt " chunk`);
  return {
    ...format,
    data: bytes.slice(data.body, data.body + data.available),
    missingBytes: data.missingBytes,
  };
}
