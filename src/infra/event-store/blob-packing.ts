import { brotliCompressSync, brotliDecompressSync, constants } from "node:zlib";

/**
 * Lossless packing of an entry's blob on disk (issue 10, part 4: the log at most about 100 MB per session-hour).
 * Blobs are mostly PCM16 audio (client appends at the model's rate, the model's output), so a blob of even length
 * is read as little-endian 16-bit samples and replaced by the residual of a second-order predictor
 * (`x[n] - (2 x[n-1] - x[n-2])`, modulo 2^16), low bytes first, then high bytes; that is compressed with brotli
 * from node:zlib, at quality 1 (issue 11: on 100-200 ms chunks quality 5 packed 17-21 MB/s and quality 1 40-110 MB/s,
 * for 4-9% more bytes). The 20 s of speech_60s_16k.wav in 100 ms chunks keep under 70% of their bytes. A blob the
 * packing does not shrink (a JPEG frame, noise) is stored as it is.
 *
 * Codecs, as stored beside the blob: `null` (raw bytes) or `PCM16_BROTLI`.
 */
export const PCM16_BROTLI = "pcm16-d2-brotli";

export type BlobCodec = typeof PCM16_BROTLI | null;

const BROTLI_OPTIONS = {
  params: { [constants.BROTLI_PARAM_QUALITY]: 1, [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_GENERIC },
};

/** Blobs shorter than this (bytes) are stored raw: brotli's framing would eat what it saves. */
const MIN_PACKED_BYTES = 64;

/** The predictor's residual of `bytes` (even length, PCM16 LE) as two byte planes: low bytes, then high bytes. */
const residualPlanes = (bytes: Uint8Array): Uint8Array => {
  const n = bytes.byteLength >> 1;
  const out = new Uint8Array(bytes.byteLength);
  let p1 = 0;
  let p2 = 0;
  for (let i = 0; i < n; i++) {
    const x = (((bytes[2 * i] as number) | ((bytes[2 * i + 1] as number) << 8)) << 16) >> 16;
    const d = (x - (2 * p1 - p2)) & 0xffff;
    out[i] = d & 0xff;
    out[n + i] = d >> 8;
    p2 = p1;
    p1 = x;
  }
  return out;
};

/** Inverts `residualPlanes`. */
const samplesOf = (planes: Uint8Array): Uint8Array => {
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
 * Packs `blob` for storage, synchronously: the file store calls it on its writer thread (sqlite-writer.ts), where
 * a blocking call costs the event loop nothing and node:zlib's stream machinery (which the async call builds per
 * blob) is not needed.
 * @returns the bytes to store and their codec (`null`: `bytes` is `blob` itself).
 */
export const packBlob = (blob: Uint8Array): { readonly bytes: Uint8Array; readonly codec: BlobCodec } => {
  if (blob.byteLength < MIN_PACKED_BYTES || blob.byteLength % 2 !== 0) return { bytes: blob, codec: null };
  const packed = brotliCompressSync(residualPlanes(blob), BROTLI_OPTIONS);
  if (packed.byteLength >= blob.byteLength) return { bytes: blob, codec: null };
  return { bytes: new Uint8Array(packed.buffer, packed.byteOffset, packed.byteLength), codec: PCM16_BROTLI };
};

/**
 * Unpacks stored bytes into the blob that was packed.
 * @throws RangeError for a codec this version does not know; Error from node:zlib for corrupt bytes.
 */
export const unpackBlob = (bytes: Uint8Array, codec: string | null): Uint8Array => {
  if (codec === null) return bytes;
  if (codec !== PCM16_BROTLI) throw new RangeError(`entry blob: unknown codec ${JSON.stringify(codec)}`);
  return samplesOf(brotliDecompressSync(bytes));
};
