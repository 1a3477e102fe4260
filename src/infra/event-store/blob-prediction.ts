/**
 * The predictors of blob packing (issue 10, part 4; issue 24; issue 34, part 5): PCM16 samples to the zigzag
 * residuals the Rice coder (blob-rice.ts) codes, and back. The second order predicts `2 x[n-1] - x[n-2]` (so
 * `|d| < 2^17`); the linear predictor of order 8 is fitted to the blob (its autocorrelation, Levinson-Durbin, as
 * FLAC's "SUBFRAME_LPC") with coefficients quantized to 16-bit integers and a right shift, its first 8 samples
 * predicted by the second order. Also the inverse of the byte planes of `PCM16_BROTLI` (files written before the
 * Rice coder). Zigzag: `d` to `(d << 1) ^ (d >> 31)`, so small magnitudes of either sign give small `v`.
 */
import { riceDecode } from "./blob-rice.ts";
import { scratchInts } from "./blob-scratch.ts";

/** Eight numbers: the order-8 predictor's coefficients, or the last eight samples, held in locals. */
type Eight = [number, number, number, number, number, number, number, number];
/** The linear predictor's order, and the most fraction bits of its quantized coefficients. */
export const LPC_ORDER = 8;
const LPC_PRECISION = 12;
/** The largest order and shift a stored header may name (a corrupt header is refused, not trusted). */
const MAX_STORED_ORDER = 32;
const MAX_STORED_SHIFT = 15;
/** Residuals at or beyond this (before zigzag) do not fit the 18-bit escape: the blob keeps the second order. */
const RESIDUAL_LIMIT = 1 << 17;

/** Zigzag residuals of the second-order predictor, for `samples` (PCM16), in a scratch array (the first n). */
export const residualsOf = (samples: Int16Array): Int32Array => {
  const out = scratchInts("second", samples.length);
  let p1 = 0;
  let p2 = 0;
  for (let i = 0; i < samples.length; i++) {
    const x = samples[i] as number;
    const d = x - 2 * p1 + p2;
    out[i] = (d << 1) ^ (d >> 31);
    p2 = p1;
    p1 = x;
  }
  return out;
};

/** `samples` of the second-order predictor's zigzag residuals `values`, up to `upTo`. */
export const secondOrderSamples = (values: Int32Array, samples: Int16Array, upTo: number): void => {
  let p1 = 0;
  let p2 = 0;
  for (let i = 0; i < upTo; i++) {
    const v = values[i] as number;
    const x = (((v >>> 1) ^ -(v & 1)) + 2 * p1 - p2) | 0;
    samples[i] = x;
    p2 = p1;
    p1 = x;
  }
};

/**
 * The order-`LPC_ORDER` predictor fitted to `samples` (autocorrelation, Levinson-Durbin) with its coefficients
 * quantized, and the zigzag residuals it leaves (in a scratch array: the first n); null when it cannot serve
 * (silence, too few samples, an unstable fit, or a residual beyond the escape's range). Written for order 8 with
 * plain locals: the generic loop over the coefficients took half as long again.
 */
export const lpcOf = (
  samples: Int16Array,
): {
  readonly coefficients: readonly number[];
  readonly shift: number;
  readonly res: Int32Array;
  readonly sum: number;
} | null => {
  const n = samples.length;
  const p = LPC_ORDER;
  if (n <= 4 * p) return null;
  const r: number[] = [];
  for (let lag = 0; lag <= p; lag++) {
    let sum = 0;
    for (let i = lag; i < n; i++) sum += (samples[i] as number) * (samples[i - lag] as number);
    r.push(sum);
  }
  const r0 = r[0] as number;
  if (r0 === 0) return null;
  // Levinson-Durbin: a[0..p-1] with x[n] ~ sum(a[j] x[n-1-j]).
  let a: number[] = [0, 0, 0, 0, 0, 0, 0, 0];
  let error = r0 * (1 + 1e-9);
  for (let m = 0; m < p; m++) {
    let acc = r[m + 1] as number;
    for (let j = 0; j < m; j++) acc -= (a[j] as number) * (r[m - j] as number);
    const k = acc / error;
    if (!(Math.abs(k) < 1)) return null;
    const next = a.slice();
    next[m] = k;
    for (let j = 0; j < m; j++) next[j] = (a[j] as number) - k * (a[m - 1 - j] as number);
    a = next;
    error *= 1 - k * k;
  }
  let largest = 0;
  for (const c of a) largest = Math.max(largest, Math.abs(c));
  let shift = LPC_PRECISION;
  while (shift > 0 && largest * 2 ** shift >= 32767) shift--;
  const coefficients = a.map((c) => Math.round(c * 2 ** shift));
  const [c0, c1, c2, c3, c4, c5, c6, c7] = coefficients as Eight;
  const res = scratchInts("lpc", n);
  // 2^-shift: multiplying by it is exact (a power of two) and cheaper than dividing by 2^shift.
  const unit = 2 ** -shift;
  // The first p samples: the second-order predictor, as the decoder starts.
  let total = 0;
  let p1 = 0;
  let p2 = 0;
  for (let i = 0; i < p; i++) {
    const x = samples[i] as number;
    const d = x - 2 * p1 + p2;
    const v = (d << 1) ^ (d >> 31);
    res[i] = v;
    total += v;
    p2 = p1;
    p1 = x;
  }
  for (let i = p; i < n; i++) {
    const sum =
      c0 * (samples[i - 1] as number) +
      c1 * (samples[i - 2] as number) +
      c2 * (samples[i - 3] as number) +
      c3 * (samples[i - 4] as number) +
      c4 * (samples[i - 5] as number) +
      c5 * (samples[i - 6] as number) +
      c6 * (samples[i - 7] as number) +
      c7 * (samples[i - 8] as number);
    const d = (samples[i] as number) - Math.floor(sum * unit);
    if (d >= RESIDUAL_LIMIT || d < -RESIDUAL_LIMIT) return null;
    const v = (d << 1) ^ (d >> 31);
    res[i] = v;
    total += v;
  }
  return { coefficients, shift, res, sum: total };
};

/** Header bytes of `PCM16_LPC_RICE` with `order` coefficients: count, order, shift, coefficients. */
export const lpcHeaderBytes = (order: number): number => 6 + 2 * order;

/** @throws RangeError for a header out of range or bytes cut short. */
export const lpcDecode = (bytes: Uint8Array): Uint8Array => {
  if (bytes.byteLength < 6) throw new RangeError("entry blob: LPC-coded bytes shorter than their header");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const order = view.getUint8(4);
  const shift = view.getUint8(5);
  if (order === 0 || order > MAX_STORED_ORDER || shift > MAX_STORED_SHIFT) {
    throw new RangeError(`entry blob: LPC order ${order} or shift ${shift} out of range`);
  }
  const header = lpcHeaderBytes(order);
  const values = riceDecode(bytes, header);
  const coefficients = Array.from({ length: order }, (_, j) => view.getInt16(6 + 2 * j, true));
  const n = view.getUint32(0, true);
  const samples = new Int16Array(n);
  secondOrderSamples(values, samples, Math.min(order, n));
  // 2^-shift: multiplying by it is exact (a power of two) and cheaper than dividing by 2^shift.
  const unit = 2 ** -shift;
  const beyond = (): RangeError => new RangeError("entry blob: LPC-coded sample beyond 16 bits");
  if (order === LPC_ORDER && n > order) {
    // The order this version writes, with the last eight samples in locals: the generic loop below took five
    // times as long.
    const [c0, c1, c2, c3, c4, c5, c6, c7] = coefficients as Eight;
    let [s8, s7, s6, s5, s4, s3, s2, s1] = Array.from(samples.subarray(0, 8)) as Eight;
    for (let i = 8; i < n; i++) {
      const v = values[i] as number;
      const x =
        ((v >>> 1) ^ -(v & 1)) +
        Math.floor((c0 * s1 + c1 * s2 + c2 * s3 + c3 * s4 + c4 * s5 + c5 * s6 + c6 * s7 + c7 * s8) * unit);
      if (x > 32767 || x < -32768) throw beyond();
      samples[i] = x;
      s8 = s7;
      s7 = s6;
      s6 = s5;
      s5 = s4;
      s4 = s3;
      s3 = s2;
      s2 = s1;
      s1 = x;
    }
  } else {
    for (let i = order; i < n; i++) {
      let sum = 0;
      for (let j = 0; j < order; j++) sum += (coefficients[j] as number) * (samples[i - 1 - j] as number);
      const v = values[i] as number;
      const x = ((v >>> 1) ^ -(v & 1)) + Math.floor(sum * unit);
      if (x > 32767 || x < -32768) throw beyond();
      samples[i] = x;
    }
  }
  return new Uint8Array(samples.buffer);
};

/** Inverts the byte planes of the brotli codec: planes of residuals back to PCM16 LE. */
export const samplesOfPlanes = (planes: Uint8Array): Uint8Array => {
  const n = planes.byteLength >> 1;
  const out = new Uint8Array(planes.byteLength);
  let p1 = 0;
  let p2 = 0;
  for (let i = 0; i < n; i++) {
    const d = (planes[i] as number) | ((planes[n + i] as number) << 8);
    const x = (((d + 2 * p1 - p2) & 0xffff) << 16) >> 16;
    out[2 * i] = x & 0xff;
    out[2 * i + 1] = (x >> 8) & 0xff;
    p2 = p1;
    p1 = x;
  }
  return out;
};
