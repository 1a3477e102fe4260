import { brotliDecompressSync } from "node:zlib";

/**
 * Lossless packing of an entry's blob on disk (issue 10, part 4: the log's size; issue 11: the writer's CPU).
 * Blobs are mostly PCM16 audio (client appends at the model's rate, the model's output), so a blob of even length
 * is read as little-endian 16-bit samples and replaced by the residual of a second-order predictor
 * (`d = x[n] - 2 x[n-1] + x[n-2]`, so `|d| < 2^17`), zigzag-mapped to `v >= 0` and Rice-coded in blocks of 256
 * samples, as FLAC codes its residuals (https://xiph.org/flac/format.html, "RESIDUAL_CODING_METHOD_PARTITIONED_RICE").
 *
 * Layout of `PCM16_RICE` bytes, bits most significant first: the sample count as a 32-bit little-endian integer,
 * then per block a 5-bit Rice parameter `k` (0..17, chosen from the block's mean), then per sample either `v >> k`
 * zero bits, a one bit and the low `k` bits of `v` (when `v >> k < 16`), or 16 zero bits, a one bit and `v` in 18
 * bits (an escape, for samples far off the block's scale); the last byte is padded with zero bits.
 *
 * Why our own coder: measured on the 20 s of speech_60s_16k.wav in 100 ms chunks (docs/benchmarks.md, "Load"),
 * brotli quality 1 on the residual kept 68.7% of the bytes at 47-49 us a chunk to pack and 42 to unpack, deflate
 * level 1 69.2% at 93 us, and this coder keeps 55.7% at 20-26 us to pack and 19 to unpack. No maintained npm
 * package codes raw PCM chunks losslessly without a container around each (libFLAC builds add stream headers and a
 * WebAssembly call per chunk).
 *
 * `PCM16_LPC_RICE` (issue 24: the log's size) predicts each sample from the 8 before it, with coefficients fitted
 * to the blob (its autocorrelation, Levinson-Durbin, as FLAC's LPC subframes: "SUBFRAME_LPC" of the format above)
 * and quantized to 16-bit integers with a right shift; the first 8 samples keep the second-order predictor. Its
 * layout: the sample count (32-bit LE), the order (one byte), the shift (one byte), the coefficients (16-bit LE,
 * `c[0]` weighing the previous sample), then the Rice-coded residual as above. The prediction is
 * `floor(sum(c[j] x[n-1-j]) / 2^shift)`, exact in doubles (|sum| < 2^34). A blob takes it when the sum of its
 * zigzag residuals is more than 3% below the second order's (about what the 22-byte header costs on a 100 ms
 * chunk; a blob neither shrinks is stored raw): on the soak's conversation (docs/benchmarks.md, "The log's size") it
 * keeps 5% fewer bytes of 16 kHz speech and room tone, and 10% fewer of the echo's 24 kHz output, for about twice
 * the time to pack.
 *
 * Codecs (the SQLite store keeps an id for each beside the blob, sqlite-writer.ts `binCodecs`): `null` (raw bytes),
 * `PCM16_RICE`, `PCM16_LPC_RICE`, and `PCM16_BROTLI` (read only: files written before the Rice coder).
 */
export const PCM16_RICE = "pcm16-d2-rice";
/** Linear prediction of order 8 fitted to the blob, then the same Rice coding. */
export const PCM16_LPC_RICE = "pcm16-lpc8-rice";
/** Files written before the Rice coder: the residual in byte planes (low bytes, then high), brotli-compressed. */
export const PCM16_BROTLI = "pcm16-d2-brotli";

export type BlobCodec = typeof PCM16_RICE | typeof PCM16_LPC_RICE | null;

/** Blobs shorter than this (bytes) are stored raw: the header and block parameters would eat what packing saves. */
const MIN_PACKED_BYTES = 64;
const BLOCK = 256;
/** `v >> k` at or beyond this is escaped: 16 zero bits, a one, then `v` in `RAW_BITS` bits. */
const ESCAPE = 16;
const RAW_BITS = 18;
const K_BITS = 5;
const MAX_K = 17;
/** Eight numbers: the order-8 predictor's coefficients, or the last eight samples, held in locals. */
type Eight = [number, number, number, number, number, number, number, number];
/** The linear predictor's order, and the most fraction bits of its quantized coefficients. */
const LPC_ORDER = 8;
const LPC_PRECISION = 12;
/** The largest order and shift a stored header may name (a corrupt header is refused, not trusted). */
const MAX_STORED_ORDER = 32;
const MAX_STORED_SHIFT = 15;
/** Residuals at or beyond this (before zigzag) do not fit the 18-bit escape: the blob keeps the second order. */
const RESIDUAL_LIMIT = 1 << 17;

/**
 * Scratch arrays reused from call to call (packing runs synchronously on one thread): allocating a typed array of
 * a few KB took about 20 us on the machines this runs on, as long as coding its samples (docs/benchmarks.md, "The
 * log's size"). Grown when a longer blob comes.
 */
const scratch = {
  second: new Int32Array(4800),
  lpc: new Int32Array(4800),
  values: new Int32Array(4800),
  out: new Uint8Array(24000),
};
const scratchInts = (key: "second" | "lpc" | "values", n: number): Int32Array => {
  if (scratch[key].length < n) scratch[key] = new Int32Array(n);
  return scratch[key];
};

/** Zigzag residuals of the second-order predictor, for `samples` (PCM16), in a scratch array (the first n). */
const residualsOf = (samples: Int16Array): Int32Array => {
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

/** The Rice parameter of a block whose `count` residuals sum to `sum`: the largest k <= 17 with 2^k <= mean. */
const riceParameter = (sum: number, count: number): number => {
  const mean = sum / count;
  let k = 0;
  while (k < MAX_K && 2 << k <= mean) k++;
  return k;
};

/** `blob`'s PCM16 samples, a view where its offset allows, else a copy of exactly its bytes. */
const samplesOf = (blob: Uint8Array): Int16Array => {
  const n = blob.byteLength >> 1;
  return blob.byteOffset % 2 === 0
    ? new Int16Array(blob.buffer, blob.byteOffset, n)
    : // A copy of exactly its bytes (a Buffer's slice() would share the whole buffer).
      new Int16Array(new Uint8Array(blob).buffer, 0, n);
};

/**
 * Rice-codes the zigzag residuals `res` after a header of `headerBytes` bytes, which the caller fills in; the
 * sample count goes in its first 4 bytes.
 */
const riceEncode = (res: Int32Array, n: number, headerBytes: number): Uint8Array => {
  // At worst every sample is escaped (35 bits), plus the header and the blocks' parameters: a scratch buffer of that
  // size, and the bytes written copied out of it at the end.
  const worst = headerBytes + Math.ceil((n * (ESCAPE + 1 + RAW_BITS) + Math.ceil(n / BLOCK) * K_BITS) / 8);
  if (scratch.out.length < worst) scratch.out = new Uint8Array(worst);
  const out = scratch.out;
  new DataView(out.buffer).setUint32(0, n, true);
  let pos = headerBytes;
  // `acc` holds the `bits` not yet flushed to `out`: fewer than 8 after a code, up to 12 after a block's k.
  let acc = 0;
  let bits = 0;
  for (let b = 0; b < n; b += BLOCK) {
    const end = Math.min(b + BLOCK, n);
    let sum = 0;
    for (let i = b; i < end; i++) sum += res[i] as number;
    const k = riceParameter(sum, end - b);
    acc = (acc << K_BITS) | k;
    bits += K_BITS;
    const mask = (1 << k) - 1;
    for (let i = b; i < end; i++) {
      const v = res[i] as number;
      const q = v >>> k;
      let nb: number;
      let code: number;
      if (q < ESCAPE) {
        nb = q + 1 + k;
        code = (1 << k) | (v & mask);
      } else {
        nb = ESCAPE + 1 + RAW_BITS;
        code = (1 << RAW_BITS) | v;
      }
      // At most 16 bits at a time, so that `acc` stays within 28 bits (clear of the sign bit). Only an escape needs
      // the loop; the last piece is written apart, as one loop for every piece packed 15% slower.
      while (nb > 16) {
        nb -= 16;
        acc = (acc << 16) | ((code >>> nb) & 0xffff);
        bits += 16;
        while (bits >= 8) {
          bits -= 8;
          out[pos++] = acc >>> bits;
        }
        acc &= (1 << bits) - 1;
      }
      acc = (acc << nb) | (code & ((1 << nb) - 1));
      bits += nb;
      while (bits >= 8) {
        bits -= 8;
        out[pos++] = acc >>> bits;
      }
      acc &= (1 << bits) - 1;
    }
  }
  if (bits > 0) out[pos++] = acc << (8 - bits);
  return out.slice(0, pos);
};

const cutShort = (): RangeError => new RangeError("entry blob: Rice-coded bytes end before their samples");

/**
 * The zigzag residuals Rice-coded in `bytes` after a header of `headerBytes` bytes (the sample count in its first 4).
 * @throws RangeError when `bytes` end before their sample count is decoded, or hold a malformed escape.
 */
const riceDecode = (bytes: Uint8Array, headerBytes: number): Int32Array => {
  if (bytes.byteLength < headerBytes) throw new RangeError("entry blob: Rice-coded bytes shorter than their header");
  const n = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0, true);
  const length = bytes.byteLength;
  // Every sample takes at least one bit: a larger count is corrupt (and would allocate for nothing).
  if (n > (length - headerBytes) * 8) throw cutShort();
  const values = scratchInts("values", n);
  let pos = headerBytes;
  // `acc` holds the next `bits` bits, most significant first; refilled a byte at a time up to 24-31 bits. The refill
  // is written out where it is needed: as a closure over `acc`, `bits` and `pos` it made unpacking 1.7 times slower.
  let acc = 0;
  let bits = 0;
  for (let b = 0; b < n; b += BLOCK) {
    const end = Math.min(b + BLOCK, n);
    while (bits <= 23 && pos < length) {
      acc = (acc << 8) | (bytes[pos++] as number);
      bits += 8;
    }
    if (bits < K_BITS) throw cutShort();
    bits -= K_BITS;
    const k = acc >>> bits;
    acc &= (1 << bits) - 1;
    if (k > MAX_K) throw new RangeError(`entry blob: Rice parameter ${k} is beyond ${MAX_K}`);
    for (let i = b; i < end; i++) {
      while (bits <= 23 && pos < length) {
        acc = (acc << 8) | (bytes[pos++] as number);
        bits += 8;
      }
      // Leading zero bits among the `bits` held (all of them when `acc` is 0).
      const zeros = acc === 0 ? bits : Math.clz32(acc) - (32 - bits);
      let v: number;
      if (zeros < ESCAPE) {
        if (zeros === bits) throw cutShort();
        bits -= zeros + 1;
        acc &= (1 << bits) - 1;
        if (k > bits) {
          while (bits <= 23 && pos < length) {
            acc = (acc << 8) | (bytes[pos++] as number);
            bits += 8;
          }
          if (k > bits) throw cutShort();
        }
        bits -= k;
        v = (zeros << k) + (acc >>> bits);
        acc &= (1 << bits) - 1;
      } else {
        // The escape: 16 zero bits and a one (held: bits >= 24 here unless cut short), then 18 bits of `v`.
        if (bits < ESCAPE + 1) throw cutShort();
        bits -= ESCAPE + 1;
        if (((acc >>> bits) & 1) !== 1) throw new RangeError("entry blob: malformed Rice escape");
        acc &= (1 << bits) - 1;
        while (bits <= 23 && pos < length) {
          acc = (acc << 8) | (bytes[pos++] as number);
          bits += 8;
        }
        if (bits < RAW_BITS) throw cutShort();
        bits -= RAW_BITS;
        v = acc >>> bits;
        acc &= (1 << bits) - 1;
      }
      values[i] = v;
    }
  }
  return values;
};

/** `samples` of the second-order predictor's zigzag residuals `values`, up to `upTo`. */
const secondOrderSamples = (values: Int32Array, samples: Int16Array, upTo: number): void => {
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
const lpcOf = (
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
const lpcHeaderBytes = (order: number): number => 6 + 2 * order;

/** @throws RangeError for a header out of range or bytes cut short. */
const lpcDecode = (bytes: Uint8Array): Uint8Array => {
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
const samplesOfPlanes = (planes: Uint8Array): Uint8Array => {
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

/**
 * Packs `blob` for storage, synchronously: the file store calls it on its writer thread (sqlite-writer.ts).
 * A blob the packing does not shrink (a JPEG frame, noise, an odd length) is stored as it is.
 * @returns the bytes to store and their codec (`null`: `bytes` is `blob` itself).
 */
export const packBlob = (blob: Uint8Array): { readonly bytes: Uint8Array; readonly codec: BlobCodec } => {
  if (blob.byteLength < MIN_PACKED_BYTES || blob.byteLength % 2 !== 0) return { bytes: blob, codec: null };
  const samples = samplesOf(blob);
  const n = samples.length;
  const second = residualsOf(samples);
  const lpc = lpcOf(samples);
  let secondSum = 0;
  for (let i = 0; i < n; i++) secondSum += second[i] as number;
  // Rice codes take about log2(mean) bits a sample: the fit pays when it shrinks the mean residual by more than its
  // header's bytes spread over the samples would cost (a 3% margin covers 22 bytes on a 100 ms chunk).
  let packed: Uint8Array;
  let codec: BlobCodec;
  if (lpc !== null && lpc.sum < secondSum * 0.97) {
    packed = riceEncode(lpc.res, n, lpcHeaderBytes(LPC_ORDER));
    const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
    view.setUint8(4, LPC_ORDER);
    view.setUint8(5, lpc.shift);
    for (const [j, c] of lpc.coefficients.entries()) view.setInt16(6 + 2 * j, c, true);
    codec = PCM16_LPC_RICE;
  } else {
    packed = riceEncode(second, n, 4);
    codec = PCM16_RICE;
  }
  if (packed.byteLength >= blob.byteLength) return { bytes: blob, codec: null };
  return { bytes: packed, codec };
};

/**
 * Unpacks stored bytes into the blob that was packed.
 * @throws RangeError for a codec this version does not know, Rice-coded bytes that are cut short, or an LPC header
 *   out of range; Error from node:zlib for corrupt brotli bytes.
 */
export const unpackBlob = (bytes: Uint8Array, codec: string | null): Uint8Array => {
  if (codec === null) return bytes;
  if (codec === PCM16_RICE) {
    const values = riceDecode(bytes, 4);
    const n = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0, true);
    const samples = new Int16Array(n);
    secondOrderSamples(values, samples, n);
    return new Uint8Array(samples.buffer);
  }
  if (codec === PCM16_LPC_RICE) return lpcDecode(bytes);
  if (codec === PCM16_BROTLI) return samplesOfPlanes(brotliDecompressSync(bytes));
  throw new RangeError(`entry blob: unknown codec ${JSON.stringify(codec)}`);
};
