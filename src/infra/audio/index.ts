/**
 * Audio utilities: WAV files, PCM16 bytes and levels, sample-rate conversion (whole buffers and live streams).
 */

export { containerOf, type EncodedWav, readEncodedWav, type WavEncoding } from "./encoded-wav.ts";
export { durationMs, pcm16FromBytes, pcm16ToBytes, rms } from "./pcm.ts";
export {
  type ClosableResampler,
  createResampler,
  createSpeexStreamResampler,
  MAX_RESAMPLE_RATIO,
  resamplePcm16,
  type StreamResampler,
} from "./resample.ts";
export {
  encodeWav,
  type ReadWavOptions,
  readWav,
  readWavFile,
  readWavHeader,
  type WavAudio,
  type WavHeader,
  writeWavFile,
} from "./wav.ts";
export {
  encodingName,
  WAV_MAX_CHANNELS,
  WAV_MAX_RATE_HZ,
  WAV_MIN_RATE_HZ,
  WavError,
  type WavErrorKind,
} from "./wav-format.ts";
