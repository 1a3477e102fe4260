/**
 * PCM16 helpers: little-endian bytes <-> samples, level and duration. Samples are signed 16-bit, mono unless a
 * caller says otherwise; "samples" always counts samples, never bytes (one sample = 2 bytes).
 */

/** Full-scale magnitude of a PCM16 sample, used to normalise levels to 0..1. */
const FULL_SCALE = 32768;

/** Whether typed arrays use little-endian byte order here (true on every platform Node supports in practice). */
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Reads little-endian PCM16 bytes as samples. The result shares memory with `bytes` when its offset is 2-byte
 * aligned and the platform is little-endian; otherwise the samples are copied.
 *
 * @param bytes PCM16 little-endian audio, 2 bytes per sample.
 * @returns `bytes.length / 2` samples.
 * @throws Error when `bytes.length` is odd (a PCM16 stream is a whole number of 2-byte samples).
 */
export function pcm16FromBytes(bytes: Uint8Array): Int16Array {
  if (bytes.length % 2 !== 0) {
    throw new Error(`PCM16 bytes must have an even length (2 bytes per sample), got ${bytes.length} bytes`);
  }
  const count = bytes.length / 2;
  if (LITTLE_ENDIAN && bytes.byteOffset % 2 === 0) {
    return new Int16Array(bytes.buffer, bytes.byteOffset, count);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const samples = new Int16Array(count);
  for (let i = 0; i < count; i++) {
    samples[i] = view.getInt16(i * 2, true);
  }
  return samples;
}

/**
 * Writes samples as little-endian PCM16 bytes. The result shares memory with `samples` on a little-endian
 * platform (a view, not a copy); copy it if the samples will change afterwards.
 *
 * @param samples PCM16 samples.
 * @returns `samples.length * 2` bytes.
 */
export function pcm16ToBytes(samples: Int16Array): Uint8Array {
  if (LITTLE_ENDIAN) {
    return new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);
  }
  const bytes = new Uint8Array(samples.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < samples.length; i++) {
    view.setInt16(i * 2, samples[i] ?? 0, true);
  }
  return bytes;
}

/**
 * Root mean square level of PCM16 samples, normalised to full scale: 0 for digital silence, ~0.707 for a
 * full-scale sine, 1 for a full-scale square wave (-32768 gives exactly 1).
 *
 * @param samples PCM16 samples; an empty array gives 0.
 * @returns RMS in 0..1.
 */
export function rms(samples: Int16Array): number {
  if (samples.length === 0) {
    return 0;
  }
  let sum = 0;
  for (let i = 0; i < samples.length; i++) {
    const s = (samples[i] ?? 0) / FULL_SCALE;
    sum += s * s;
  }
  return Math.sqrt(sum / samples.length);
}

/**
 * Duration of a number of samples at a sample rate.
 *
 * @param samples count of samples (per channel), not bytes.
 * @param sampleRate in Hz.
 * @returns duration in ms (not rounded).
 * @throws Error when `sampleRate` is not a positive number.
 */
export function durationMs(samples: number, sampleRate: number): number {
  if (!(sampleRate > 0)) {
    throw new Error(`sample rate must be a positive number of Hz, got ${sampleRate}`);
  }
  return (samples * 1000) / sampleRate;
}
