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
 * Where each part lives: the predictors in blob-prediction.ts, the Rice coder in blob-rice.ts, their scratch arrays
 * in blob-scratch.ts (issue 34, part 5).
 *
 * Codecs (the SQLite store keeps an id for each beside the blob, sqlite-writer.ts `binCodecs`): `null` (raw bytes),
 * `PCM16_RICE`, `PCM16_LPC_RICE`, and `PCM16_BROTLI` (read only: files written before the Rice coder).
 */
import { brotliDecompressSync } from "node:zlib";
import {
  LPC_ORDER,
  lpcDecode,
  lpcHeaderBytes,
  lpcOf,
  residualsOf,
  samplesOfPlanes,
  secondOrderSamples,
} from "./blob-prediction.ts";
import { riceDecode, riceEncode } from "./blob-rice.ts";

export const PCM16_RICE = "pcm16-d2-rice";
/** Linear prediction of order 8 fitted to the blob, then the same Rice coding. */
export const PCM16_LPC_RICE = "pcm16-lpc8-rice";
/** Files written before the Rice coder: the residual in byte planes (low bytes, then high), brotli-compressed. */
export const PCM16_BROTLI = "pcm16-d2-brotli";

export type BlobCodec = typeof PCM16_RICE | typeof PCM16_LPC_RICE | null;

/** Blobs shorter than this (bytes) are stored raw: the header and block parameters would eat what packing saves. */
const MIN_PACKED_BYTES = 64;

/** `blob`'s PCM16 samples, a view where its offset allows, else a copy of exactly its bytes. */
const samplesOf = (blob: Uint8Array): Int16Array => {
  const n = blob.byteLength >> 1;
  return blob.byteOffset % 2 === 0
    ? new Int16Array(blob.buffer, blob.byteOffset, n)
    : // A copy of exactly its bytes (a Buffer's slice() would share the whole buffer).
      new Int16Array(new Uint8Array(blob).buffer, 0, n);
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
