import { join } from "node:path";
import { readWavFile, resamplePcm16 } from "../infra/audio/index.ts";
import { encodeAudio, G711_RATE_HZ } from "../protocol/index.ts";
import type { AudioStream } from "./scenario.ts";

/** One append of a `stream_audio` step: its bytes in the stream's format and its length (ms). */
export interface AudioChunk {
  readonly bytes: Uint8Array;
  readonly ms: number;
}

/**
 * Cuts the WAV file of a `stream_audio` step into appends: mono PCM16 read from `audioDir` (../shared/audio),
 * cut to `maxMs`, padded with `silenceBeforeMs` / `silenceAfterMs` of silence, resampled to `rate` (G.711 is always
 * 8000 Hz) and encoded in `format`, in chunks of `chunkMs` (the last one may be shorter).
 * @throws Error when the file cannot be read or is not mono PCM16 WAV.
 */
export const audioChunks = async (stream: AudioStream, audioDir: string): Promise<AudioChunk[]> => {
  const wav = await readWavFile(join(audioDir, stream.file));
  const g711 = stream.format === "g711_ulaw" || stream.format === "g711_alaw";
  const rate = g711 ? G711_RATE_HZ : (stream.rate ?? wav.sampleRate);
  const source = stream.maxMs === null ? wav.samples : wav.samples.subarray(0, (stream.maxMs * wav.sampleRate) / 1000);
  const speech = rate === wav.sampleRate ? source : resamplePcm16(source, wav.sampleRate, rate);
  const before = Math.round((stream.silenceBeforeMs * rate) / 1000);
  const after = Math.round((stream.silenceAfterMs * rate) / 1000);
  const all = new Int16Array(before + speech.length + after);
  all.set(speech, before);
  const perChunk = Math.max(1, Math.round((stream.chunkMs * rate) / 1000));
  const chunks: AudioChunk[] = [];
  for (let offset = 0; offset < all.length; offset += perChunk) {
    const samples = all.subarray(offset, Math.min(all.length, offset + perChunk));
    chunks.push({ bytes: encodeAudio({ encoding: stream.format, rate }, samples), ms: (samples.length / rate) * 1000 });
  }
  return chunks;
};
