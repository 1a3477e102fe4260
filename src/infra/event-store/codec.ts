import { EntryTooLargeError, MAX_ENTRY_BYTES, type NewEntry } from "../../engine/ports/event-store.ts";

/**
 * An entry's `data` as stored: JSON text in which every `Uint8Array` became a reference `{"$bin":[offset,length]}`
 * (offset and length in bytes) into `blob`, the concatenation of all of them in the order met.
 * `blob` is `null` when `data` holds no `Uint8Array` at all (and may be empty when it holds only empty ones).
 */
export interface EncodedData {
  readonly json: string;
  readonly blob: Uint8Array | null;
}

/** The key of a binary reference. User keys starting with `$` are escaped with one more `$`, so none can clash. */
const BIN_KEY = "$bin";

/**
 * Encodes a JSON-compatible value in which `Uint8Array` (and so `Buffer`) values may appear at any depth.
 *
 * Algorithm: `JSON.stringify` with a replacer, depth first; each `Uint8Array` becomes `{"$bin":[offset,length]}`
 * and its bytes are collected; every object key that starts with `$` gets one more `$` (`"$bin"` -> `"$$bin"`,
 * `"$$x"` -> `"$$$x"`), so the only unescaped `$` key in the output is a binary reference; `toJSON` is called where
 * a value has it (a `Date` becomes its ISO string). Everything else follows `JSON.stringify`: `undefined`
 * and functions are dropped from objects and become `null` in arrays (a top-level `undefined` becomes `null`),
 * `-0` becomes `0`, `NaN` and infinities become `null`.
 *
 * @throws TypeError when `data` holds another binary view (`Int16Array`, `DataView`, ...) or an `ArrayBuffer`: the
 *   store keeps bytes as `Uint8Array` only, and guessing an encoding would corrupt audio silently.
 * @throws TypeError from `JSON.stringify` for a `bigint` or a cycle.
 */
export function encodeData(data: unknown): EncodedData {
  const chunks: Uint8Array[] = [];
  let size = 0;
  // A replacer rather than a copy of the value (issue 11: half the time): JSON.stringify walks the value once. It
  // calls `toJSON` before the replacer sees a value, so bytes are recognised on the holder's own value (a Buffer's
  // toJSON would otherwise turn it into {type, data}).
  const json =
    JSON.stringify(data, function (this: unknown, key: string, value: unknown): unknown {
      const raw = (this as Record<string, unknown>)[key];
      if (raw instanceof Uint8Array) {
        const ref = { [BIN_KEY]: [size, raw.byteLength] };
        chunks.push(raw);
        size += raw.byteLength;
        return ref;
      }
      if (ArrayBuffer.isView(raw) || raw instanceof ArrayBuffer) {
        throw new TypeError(`entry data: expected binary values as Uint8Array, got ${raw.constructor.name}`);
      }
      if (typeof value !== "object" || value === null || Array.isArray(value)) return value;
      const keys = Object.keys(value);
      if (!keys.some((k) => k.startsWith("$"))) return value;
      return Object.fromEntries(keys.map((k) => [escapeKey(k), (value as Record<string, unknown>)[k]]));
    }) ?? "null";
  if (chunks.length === 0) return { json, blob: null };
  const blob = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    blob.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { json, blob };
}

/**
 * Decodes what `encodeData` produced. Every binary reference becomes a fresh plain `Uint8Array` (a copy, never a
 * `Buffer` nor a view sharing `blob`'s memory), and escaped keys lose their extra `$`. A `null` blob reads as empty.
 *
 * @throws SyntaxError when `json` is not JSON.
 * @throws RangeError when a binary reference is malformed or points outside `blob`.
 */
export function decodeData(encoded: EncodedData): unknown {
  const blob = encoded.blob ?? new Uint8Array(0);
  const walk = (value: unknown): unknown => {
    if (typeof value !== "object" || value === null) return value;
    if (Array.isArray(value)) return value.map(walk);
    const ref = binaryRef(value);
    if (ref !== undefined) {
      const [offset, length] = ref;
      if (offset + length > blob.byteLength) {
        throw new RangeError(
          `entry data: binary reference [${offset}, ${length}] runs past the blob of ${blob.byteLength} bytes`,
        );
      }
      return new Uint8Array(blob.subarray(offset, offset + length));
    }
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [unescapeKey(key), walk(inner)]));
  };
  return walk(JSON.parse(encoded.json));
}

function escapeKey(key: string): string {
  return key.startsWith("$") ? `$${key}` : key;
}

function unescapeKey(key: string): string {
  return key.startsWith("$") ? key.slice(1) : key;
}

/**
 * `[offset, length]` when `value` is a binary reference, `undefined` when it is a plain object. Only a reference has
 * an unescaped `$bin` key, so any other shape with that key is corrupt.
 * @throws RangeError when `value` has a `$bin` key but is not `{"$bin":[offset,length]}` with non-negative integers.
 */
function binaryRef(value: object): readonly [number, number] | undefined {
  if (!Object.hasOwn(value, BIN_KEY)) return undefined;
  const ref = (value as Record<string, unknown>)[BIN_KEY];
  if (Object.keys(value).length === 1 && Array.isArray(ref) && ref.length === 2) {
    const [offset, length] = ref as unknown[];
    if (isByteCount(offset) && isByteCount(length)) return [offset, length];
  }
  throw new RangeError(`entry data: expected {"$bin":[offset,length]}, got ${JSON.stringify(value)}`);
}

function isByteCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

/** One entry encoded for a store: its type, data (`encodeData`), metadata as JSON, and `metadata.at` (ms). */
export interface EncodedEntry {
  readonly type: string;
  readonly json: string;
  readonly blob: Uint8Array | null;
  readonly metadata: string;
  /** `metadata.at`, ms since the Unix epoch. */
  readonly at: number;
}

/**
 * Encodes the entries of one append (`encodeData`, metadata as JSON) and checks each against `MAX_ENTRY_BYTES`.
 * @throws EntryTooLargeError for an entry over the limit (JSON, binary values and metadata together, bytes).
 * @throws TypeError from `encodeData`.
 */
export function encodeEntries(stream: string, entries: readonly NewEntry[], limit = MAX_ENTRY_BYTES): EncodedEntry[] {
  return entries.map((entry) => {
    const { json, blob } = encodeData(entry.data);
    const metadata = JSON.stringify(entry.metadata);
    const bytes = Buffer.byteLength(json) + (blob?.byteLength ?? 0) + Buffer.byteLength(metadata);
    if (bytes > limit) throw new EntryTooLargeError(stream, bytes, limit);
    return { type: entry.type, json, blob, metadata, at: entry.metadata.at };
  });
}
