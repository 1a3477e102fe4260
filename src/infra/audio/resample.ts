/**
 * Sample-rate conversion of mono PCM16. Whole buffers go through the Speex resampler (SpeexDSP's windowed-sinc
 * polyphase filter, `@echogarden/speex-resampler-wasm`, compiled to WebAssembly with SIMD); live streams go through
 * a stateful linear interpolator ({@link createResampler}), which keeps no filter history and adds no delay.
 */
import createSpeexSimd from "@echogarden/speex-resampler-wasm/simd";

/**
 * SpeexDSP's quality (0-10). At 4, 11 s of jfk at 16 kHz -> 24 kHz takes about 7 ms here and lands 74 dB from
 * sox's resampling of it (jfk_24k.wav); libsamplerate's SRC_SINC_FASTEST took 50-80 ms for 62 dB, and
 * wave-resampler was half a sample late (15 dB). Issue 11: the echo runner's resampling had been over a third of
 * the server's busy time at 60 sessions.
 */
const SPEEX_QUALITY = 4;

/**
 * The most output samples per input sample a resampler makes (8 kHz -> 384 kHz): its output is sized from the
 * input's sample count and this ratio, so a rate a caller did not check (a WAV header's 1 Hz, issue 32 part 2)
 * cannot make it allocate gigabytes for a few kilobytes of input.
 */
export const MAX_RESAMPLE_RATIO = 48;

/** The Speex WebAssembly module, compiled once when this module loads. */
const speex = (await createSpeexSimd()) as SpeexModule;

/** A stateful resampler for one stream: each `push` returns the output that its input made available. */
export interface StreamResampler {
  /** Input rate in Hz. */
  readonly fromHz: number;
  /** Output rate in Hz. */
  readonly toHz: number;
  /**
   * Resamples the next chunk of the stream.
   *
   * @param samples mono PCM16 at `fromHz`, any length (0 included).
   * @returns mono PCM16 at `toHz`: after pushes totalling `n` input samples, exactly `floor(n * toHz / fromHz)`
   *   samples have come out in all, so a chunk of `m` samples gives `floor` or `ceil` of `m * toHz / fromHz`.
   */
  push(samples: Int16Array): Int16Array;
}

/**
 * Resamples a whole mono PCM16 buffer with the Speex resampler at quality {@link SPEEX_QUALITY}, aligned with its
 * input: the filter's leading zeros are skipped and its tail is flushed with silence, so output sample `k` is the
 * signal at input time `k * fromHz / toHz`. The input is not modified. Each call treats its input as the whole
 * signal (silence before and after); for a live stream use {@link createResampler} chunk by chunk.
 *
 * @param samples mono PCM16 at `fromHz`.
 * @param fromHz input rate in Hz, a positive integer.
 * @param toHz output rate in Hz, a positive integer.
 * @returns a new array of exactly `floor(samples.length * toHz / fromHz)` samples at `toHz` (Speex rounds and
 *   clamps to PCM16; should it give fewer, the last sample is held); a copy of `samples` when the rates are equal.
 * @throws Error when a rate is not a positive integer or `toHz / fromHz` is over {@link MAX_RESAMPLE_RATIO};
 *   Speex's own error text when it refuses the rates.
 */
export function resamplePcm16(samples: Int16Array, fromHz: number, toHz: number): Int16Array {
  checkRates(fromHz, toHz);
  if (fromHz === toHz) {
    return samples.slice();
  }
  const length = outputLength(samples.length, fromHz, toHz);
  const output = new Int16Array(length);
  if (samples.length === 0 || length === 0) {
    return output;
  }
  const error = speex._malloc(4);
  const state = speex._speex_resampler_init(1, fromHz, toHz, SPEEX_QUALITY, error);
  const code = speex.HEAP32[error >> 2] ?? 0;
  speex._free(error);
  if (state === 0 || code !== 0) {
    throw new Error(`the Speex resampler refused ${fromHz} Hz -> ${toHz} Hz (error ${code})`);
  }
  speex._speex_resampler_skip_zeros(state);
  // The filter holds back `latency` input samples: silence after the signal brings them out.
  const inputLength = samples.length + speex._speex_resampler_get_input_latency(state);
  const input = speex._malloc(inputLength * 2);
  const out = speex._malloc(length * 2);
  const counts = speex._malloc(8);
  try {
    speex.HEAP16.set(samples, input >> 1);
    speex.HEAP16.fill(0, (input >> 1) + samples.length, (input >> 1) + inputLength);
    let consumed = 0;
    let produced = 0;
    // One call normally does it all; loop in case Speex stops early.
    while (consumed < inputLength && produced < length) {
      speex.HEAPU32[counts >> 2] = inputLength - consumed;
      speex.HEAPU32[(counts >> 2) + 1] = length - produced;
      speex._speex_resampler_process_int(state, 0, input + consumed * 2, counts, out + produced * 2, counts + 4);
      const used = speex.HEAPU32[counts >> 2] ?? 0;
      const made = speex.HEAPU32[(counts >> 2) + 1] ?? 0;
      if (used === 0 && made === 0) break;
      consumed += used;
      produced += made;
    }
    output.set(speex.HEAP16.subarray(out >> 1, (out >> 1) + produced));
    output.fill(produced > 0 ? (output[produced - 1] ?? 0) : 0, produced);
    return output;
  } finally {
    speex._free(input);
    speex._free(out);
    speex._free(counts);
    speex._speex_resampler_destroy(state);
  }
}

/**
 * Creates a streaming resampler by linear interpolation, carrying between chunks the position in the input (as an
 * exact integer ratio, so it never drifts) and the last input sample. Output sample `k` is taken at input position
 * `(k + 1) * fromHz / toHz - 1`, with the sample before the stream taken as 0; this delays the signal by less than
 * one input sample and lets every output be produced as soon as the input sample after it has arrived.
 *
 * Linear interpolation is chosen over `wave-resampler` because that library cannot run chunk by chunk without
 * edge artefacts (see the file comment). It has no anti-aliasing filter: downsampling folds content above the
 * output Nyquist frequency back into the band, and upsampling attenuates high frequencies (a 4 kHz tone at
 * 16 kHz -> 24 kHz comes out at ~13 dB SNR; speech below 2 kHz is fine). Use {@link resamplePcm16} for whole
 * buffers.
 *
 * @param fromHz input rate in Hz, a positive integer.
 * @param toHz output rate in Hz, a positive integer.
 * @returns a resampler whose pushes, over a whole stream of `n` input samples, return exactly
 *   `floor(n * toHz / fromHz)` output samples; each push returns a new array.
 * @throws Error when a rate is not a positive integer or `toHz / fromHz` is over {@link MAX_RESAMPLE_RATIO}.
 */
export function createResampler(fromHz: number, toHz: number): StreamResampler {
  checkRates(fromHz, toHz);
  const divisor = gcd(fromHz, toHz);
  /** Input samples per `up` output samples, in lowest terms. */
  const down = fromHz / divisor;
  const up = toHz / divisor;
  let inputCount = 0;
  let outputCount = 0;
  let last = 0;

  return {
    fromHz,
    toHz,
    push(samples: Int16Array): Int16Array {
      if (up === down) return samples.slice();
      const base = inputCount;
      inputCount += samples.length;
      const target = floorDiv(inputCount * up, down);
      const output = new Int16Array(target - outputCount);
      // Input sample j: j >= base is samples[j - base]; j = base - 1 is `last` (0 before the stream starts).
      for (let i = 0; i < output.length; i++) {
        // Position (k + 1) * down / up - 1 in the input, split into an index and a fraction over `up`.
        const numerator = (outputCount + i + 1) * down;
        const remainder = numerator % up;
        const index = (numerator - remainder) / up - 1 - base;
        const a = index >= 0 ? (samples[index] ?? 0) : last;
        if (remainder === 0) {
          output[i] = a;
          continue;
        }
        const b = index + 1 >= 0 ? (samples[index + 1] ?? 0) : last;
        output[i] = toPcm16(a + ((b - a) * remainder) / up);
      }
      outputCount = target;
      if (samples.length > 0) {
        last = samples[samples.length - 1] ?? 0;
      }
      return output;
    },
  };
}

/** A stateful resampler that holds memory outside the JavaScript heap until it is closed. */
export interface ClosableResampler extends StreamResampler {
  /** Frees the filter's state; a push after it throws. Idempotent. */
  close(): void;
}

/**
 * Creates a streaming resampler with SpeexDSP's windowed-sinc filter (quality {@link SPEEX_QUALITY}): unlike
 * {@link createResampler} it filters, so downsampling (24 kHz model speech to 8 kHz telephony) does not fold the
 * content above the output's Nyquist frequency back into the band. The filter's leading zeros are skipped, so the
 * output starts with the signal; the filter holds back about half its length of the stream's last input (4 ms from
 * 24 to 8 kHz at quality 4), which a stream that ends without more input never gives out.
 *
 * @param fromHz input rate in Hz, a positive integer.
 * @param toHz output rate in Hz, a positive integer.
 * @returns a resampler whose pushes return, over a whole stream, about `n * toHz / fromHz` output samples for `n`
 *   input samples (less the held-back tail); each push returns a new array. Call `close()` when the stream ends:
 *   the state lives in the WebAssembly heap.
 * @throws Error when a rate is not a positive integer or `toHz / fromHz` is over {@link MAX_RESAMPLE_RATIO}, or
 *   Speex refuses the rates.
 */
export function createSpeexStreamResampler(fromHz: number, toHz: number): ClosableResampler {
  checkRates(fromHz, toHz);
  if (fromHz === toHz) return { fromHz, toHz, push: (samples) => samples.slice(), close: () => undefined };
  const error = speex._malloc(4);
  let state = speex._speex_resampler_init(1, fromHz, toHz, SPEEX_QUALITY, error);
  const code = speex.HEAP32[error >> 2] ?? 0;
  speex._free(error);
  if (state === 0 || code !== 0) {
    throw new Error(`the Speex resampler refused ${fromHz} Hz -> ${toHz} Hz (error ${code})`);
  }
  speex._speex_resampler_skip_zeros(state);
  return {
    fromHz,
    toHz,
    push(samples) {
      if (state === 0) throw new Error("the resampler is closed");
      // Room for what these samples make, and what the filter held back from earlier pushes.
      const room = Math.ceil(((samples.length + 64) * toHz) / fromHz) + 16;
      const input = speex._malloc(Math.max(2, samples.length * 2));
      const out = speex._malloc(room * 2);
      const counts = speex._malloc(8);
      try {
        speex.HEAP16.set(samples, input >> 1);
        let consumed = 0;
        let produced = 0;
        while (consumed < samples.length && produced < room) {
          speex.HEAPU32[counts >> 2] = samples.length - consumed;
          speex.HEAPU32[(counts >> 2) + 1] = room - produced;
          speex._speex_resampler_process_int(state, 0, input + consumed * 2, counts, out + produced * 2, counts + 4);
          const used = speex.HEAPU32[counts >> 2] ?? 0;
          const made = speex.HEAPU32[(counts >> 2) + 1] ?? 0;
          if (used === 0 && made === 0) break;
          consumed += used;
          produced += made;
        }
        return speex.HEAP16.slice(out >> 1, (out >> 1) + produced);
      } finally {
        speex._free(input);
        speex._free(out);
        speex._free(counts);
      }
    },
    close() {
      if (state === 0) return;
      speex._speex_resampler_destroy(state);
      state = 0;
    },
  };
}

function outputLength(inputSamples: number, fromHz: number, toHz: number): number {
  const divisor = gcd(fromHz, toHz);
  return floorDiv(inputSamples * (toHz / divisor), fromHz / divisor);
}

/** Integer floor division of non-negative integers, exact while `a < 2^53`. */
function floorDiv(a: number, b: number): number {
  return (a - (a % b)) / b;
}

function gcd(a: number, b: number): number {
  let x = a;
  let y = b;
  while (y !== 0) {
    [x, y] = [y, x % y];
  }
  return x;
}

/** The parts of the Speex WebAssembly module used here (SpeexDSP's `speex_resampler.h`; pointers are byte offsets). */
interface SpeexModule {
  readonly HEAP16: Int16Array;
  readonly HEAP32: Int32Array;
  readonly HEAPU32: Uint32Array;
  _malloc(bytes: number): number;
  _free(pointer: number): void;
  _speex_resampler_init(channels: number, inRate: number, outRate: number, quality: number, error: number): number;
  _speex_resampler_skip_zeros(state: number): number;
  _speex_resampler_get_input_latency(state: number): number;
  _speex_resampler_process_int(
    state: number,
    channel: number,
    input: number,
    inputLength: number,
    output: number,
    outputLength: number,
  ): number;
  _speex_resampler_destroy(state: number): void;
}

function toPcm16(value: number): number {
  const rounded = Math.round(value);
  return Math.min(32767, Math.max(-32768, rounded));
}

function checkRate(name: string, hz: number): void {
  if (!Number.isInteger(hz) || hz <= 0) {
    throw new Error(`${name} must be a positive integer number of Hz, got ${hz}`);
  }
}

/** @throws Error when a rate is not a positive integer, or `toHz` is more than {@link MAX_RESAMPLE_RATIO} x `fromHz`. */
function checkRates(fromHz: number, toHz: number): void {
  checkRate("fromHz", fromHz);
  checkRate("toHz", toHz);
  if (toHz > fromHz * MAX_RESAMPLE_RATIO) {
    throw new Error(
      `${fromHz} Hz -> ${toHz} Hz would make more than ${MAX_RESAMPLE_RATIO} output samples per input sample`,
    );
  }
}
