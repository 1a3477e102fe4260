/**
 * The Rice coder of blob packing (issue 10, part 4; issue 34, part 5): zigzag residuals (`v >= 0`) coded in blocks
 * of 256 samples, as FLAC codes its residuals (https://xiph.org/flac/format.html,
 * "RESIDUAL_CODING_METHOD_PARTITIONED_RICE"). Bits most significant first: after a header the caller fills in (the
 * sample count as a 32-bit little-endian integer in its first 4 bytes, then what the codec adds), per block a 5-bit
 * Rice parameter `k` (0..17, chosen from the block's mean), then per sample either `v >> k` zero bits, a one bit and
 * the low `k` bits of `v` (when `v >> k < 16`), or 16 zero bits, a one bit and `v` in 18 bits (an escape, for samples
 * far off the block's scale); the last byte is padded with zero bits. The layouts of the codecs: blob-packing.ts.
 */
import { scratch, scratchInts } from "./blob-scratch.ts";

const BLOCK = 256;
/** `v >> k` at or beyond this is escaped: 16 zero bits, a one, then `v` in `RAW_BITS` bits. */
const ESCAPE = 16;
const RAW_BITS = 18;
const K_BITS = 5;
const MAX_K = 17;

/** The Rice parameter of a block whose `count` residuals sum to `sum`: the largest k <= 17 with 2^k <= mean. */
const riceParameter = (sum: number, count: number): number => {
  const mean = sum / count;
  let k = 0;
  while (k < MAX_K && 2 << k <= mean) k++;
  return k;
};

/**
 * Rice-codes the zigzag residuals `res` after a header of `headerBytes` bytes, which the caller fills in; the
 * sample count goes in its first 4 bytes.
 */
export const riceEncode = (res: Int32Array, n: number, headerBytes: number): Uint8Array => {
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
export const riceDecode = (bytes: Uint8Array, headerBytes: number): Int32Array => {
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
