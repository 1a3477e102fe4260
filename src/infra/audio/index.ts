/**
 * Audio utilities: WAV files, PCM16 bytes and levels, sample-rate conversion (whole buffers and live streams).
 */
export { durationMs, pcm16FromBytes, pcm16ToBytes, rms } from "./pcm.ts";
export {
  type ClosableResampler,
  createResampler,
  createSpeexStreamResampler,
  resamplePcm16,
  type StreamResampler,
} from "./resample.ts";
export {
  containerOf,
  type EncodedWav,
  encodeWav,
  readEncodedWav,
  readWav,
  readWavFile,
  type WavAudio,
  type WavEncoding,
  writeWavFile,
} from "./wav.ts";
