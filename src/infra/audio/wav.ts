/**
 * WAV (RIFF/WAVE) reading and writing, PCM16 only. Reading walks the chunk list, so files with `LIST`, `fact`,
 * `bext` or other chunks before or after `data` are read; writing produces the canonical 44-byte header, mono.
 * Every reader is bounded by the bytes present, never by a size a field declares, and takes 8-96 kHz, mono or
 * stereo (issue 32, part 2); `readWav` mixes stereo down to mono.
 */
import { readFile, writeFile } from "node:fs/promises";
import { pcm16FromBytes, pcm16ToBytes } from "./pcm.ts";
import {
  checkRateAndChannels,
  encodingName,
  formatTag,
  fourCC,
  RIFF_HEADER_BYTES,
  WAVE_FORMAT_PCM,
  WavError,
  wavChunks,
} from "./wav-format.ts";

/** What a PCM16 WAV's header says, checked, and where its samples are; nothing is decoded or copied. */
export interface WavHeader {
  /** Sample rate in Hz, within {@link WAV_MIN_RATE_HZ}-{@link WAV_MAX_RATE_HZ}. */
  readonly sampleRate: number;
  /** Channels in the file: 1 or 2. */
  readonly channels: number;
  /** Whole sample frames (one sample per channel) the bytes hold: counted from the bytes present, never declared. */
  readonly frames: number;
  /** Byte offset of the first sample in the file. */
  readonly dataOffset: number;
  /** As {@link WavAudio.missingBytes}. */
  readonly missingBytes: number;
}

/** Decoded PCM16 WAV audio, always mono: a stereo file's two channels are mixed down (their mean). */
export interface WavAudio {
  /** Sample rate in Hz. */
  readonly sampleRate: number;
  /** Channels in the file (1 or 2); `samples` is mono either way. */
  readonly channels: number;
  /** Mono PCM16 samples, one per frame of the file; its own memory, not a view of the input. */
  readonly samples: Int16Array;
  /**
   * Bytes the `data` chunk declares beyond the end of the file (a truncated file), or 0. A streaming size
   * (0 or 0xFFFFFFFF: "unknown") is not counted as truncation.
   */
  readonly missingBytes?: number;
}

/** Options of {@link readWav}. */
export interface ReadWavOptions {
  /** The most seconds of audio accepted (absent: any); checked on the header, before anything is decoded. */
  readonly maxSeconds?: number;
}

/**
 * Reads and checks a PCM16 WAV's header, walking the chunk list (see {@link readWav}), without decoding: memory
 * and time follow the number of chunks, not any size a field declares. A `data` chunk that declares more bytes
 * than there are counts only the whole frames present.
 *
 * @param bytes the whole file.
 * @returns rate (Hz), channels, the frames present, where they start.
 * @throws WavError `not_wav` when the bytes are not RIFF/WAVE; `malformed` when `fmt ` is missing, too short or
 *   after `data`, or there is no `data`; `unsupported_encoding` when the audio is not integer PCM of 16 bits (the
 *   message names what it is: `IEEE float 32-bit`, `PCM 24-bit`, `A-law`, ...); `unsupported_rate` outside
 *   8000-96000 Hz; `unsupported_channels` for none or more than 2. The message says what was expected and found.
 */
export function readWavHeader(bytes: Uint8Array): WavHeader {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < RIFF_HEADER_BYTES) {
    throw new WavError("not_wav", `WAV: expected at least a 12-byte RIFF header, got ${bytes.length} bytes`);
  }
  const riff = fourCC(bytes, 0);
  const wave = fourCC(bytes, 8);
  if (riff !== "RIFF" || wave !== "WAVE") {
    throw new WavError(
      "not_wav",
      `WAV: expected "RIFF" ... "WAVE" at bytes 0 and 8, found ${JSON.stringify(riff)} ... ${JSON.stringify(wave)}`,
    );
  }

  const { fmt, data } = wavChunks(bytes, view);
  const format = fmt === undefined ? undefined : readFormat(view, fmt.body, fmt.size);
  if (data === undefined) {
    throw new WavError(
      "malformed",
      format === undefined
        ? `WAV: expected "fmt " and "data" chunks, found neither in ${bytes.length} bytes`
        : `WAV: expected a "data" chunk, found none in ${bytes.length} bytes`,
    );
  }
  if (format === undefined) {
    throw new WavError(
      "malformed",
      `WAV: expected a "fmt " chunk before the "data" chunk at byte ${data.offset}, found none`,
    );
  }
  return {
    sampleRate: format.sampleRate,
    channels: format.channels,
    frames: Math.floor(data.available / (2 * format.channels)),
    dataOffset: data.body,
    missingBytes: data.missingBytes,
  };
}

/**
 * Decodes a PCM16 WAV file held in memory, mono or stereo, to mono. Chunks other than `fmt ` and `data` are
 * skipped (with their pad byte when their size is odd). A `data` chunk whose declared size runs past the end of
 * the bytes (a streamed WAV written before its length was known, or a header that lies) is read up to the last
 * whole sample frame present: the samples allocated are never more than the bytes hold. Stereo is mixed down to
 * the mean of its two channels (rounded towards minus infinity), so a tone on both channels keeps its level and
 * its length.
 *
 * @param bytes the whole file.
 * @param options `maxSeconds`: the most audio accepted.
 * @returns sample rate (Hz), the file's channel count and mono samples, one per frame.
 * @throws WavError as {@link readWavHeader}, and `too_long` when the audio is longer than `options.maxSeconds`
 *   (checked before decoding).
 */
export function readWav(bytes: Uint8Array, options: ReadWavOptions = {}): WavAudio {
  const header = readWavHeader(bytes);
  const seconds = header.frames / header.sampleRate;
  if (options.maxSeconds !== undefined && seconds > options.maxSeconds) {
    throw new WavError(
      "too_long",
      `WAV: expected at most ${options.maxSeconds} s of audio, found ${seconds.toFixed(1)} s (${header.frames} frames at ${header.sampleRate} Hz)`,
    );
  }
  return {
    sampleRate: header.sampleRate,
    channels: header.channels,
    samples: monoSamples(bytes, header),
    missingBytes: header.missingBytes,
  };
}

/** The frames of `header` as mono samples in new memory: copied when mono, the mean of the two channels when stereo. */
function monoSamples(bytes: Uint8Array, header: WavHeader): Int16Array {
  const { frames, channels, dataOffset } = header;
  if (channels === 1) {
    const samples = pcm16FromBytes(bytes.subarray(dataOffset, dataOffset + frames * 2));
    return samples.buffer === bytes.buffer ? samples.slice() : samples;
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset + dataOffset, frames * 4);
  const mono = new Int16Array(frames);
  for (let i = 0; i < frames; i++) {
    mono[i] = (view.getInt16(i * 4, true) + view.getInt16(i * 4 + 2, true)) >> 1;
  }
  return mono;
}

/**
 * Reads and decodes a PCM16 WAV file, mono or stereo, to mono (see {@link readWav}).
 *
 * @param path file path.
 * @param options as {@link readWav}'s.
 * @returns as {@link readWav}.
 * @throws the file system's error when the file cannot be read, and a WavError as {@link readWav} (of the same
 *   kind, the message then starting with the path).
 */
export async function readWavFile(path: string | URL, options: ReadWavOptions = {}): Promise<WavAudio> {
  const bytes = await readFile(path);
  try {
    return readWav(bytes, options);
  } catch (error) {
    if (!(error instanceof WavError)) throw error;
    throw new WavError(error.kind, `${String(path)}: ${error.message}`, { cause: error });
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

/**
 * The `fmt ` chunk of a PCM16 WAV: its rate (Hz) and channels, checked.
 * @throws WavError `malformed`, `unsupported_encoding`, `unsupported_rate` or `unsupported_channels`.
 */
function readFormat(view: DataView, body: number, size: number): { sampleRate: number; channels: number } {
  if (size < 16 || body + 16 > view.byteLength) {
    throw new WavError("malformed", `WAV: expected a "fmt " chunk of at least 16 bytes, found ${size} bytes`);
  }
  const tag = formatTag(view, body, size);
  const channels = view.getUint16(body + 2, true);
  const sampleRate = view.getUint32(body + 4, true);
  const bitsPerSample = view.getUint16(body + 14, true);
  if (tag !== WAVE_FORMAT_PCM || bitsPerSample !== 16) {
    throw new WavError(
      "unsupported_encoding",
      `WAV: expected PCM 16-bit, found ${encodingName(tag, bitsPerSample)} (format tag ${tag}, ${bitsPerSample} bits per sample)`,
    );
  }
  checkRateAndChannels(sampleRate, channels, "WAV: expected");
  return { sampleRate, channels };
}

function writeFourCC(bytes: Uint8Array, offset: number, id: string): void {
  for (let i = 0; i < 4; i++) {
    bytes[offset + i] = id.charCodeAt(i);
  }
}
