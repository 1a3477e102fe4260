import { createHash } from "node:crypto";
import type { RecordedEntry } from "../../engine/ports/event-store.ts";
import { decodeData, type EncodedEntry } from "./codec.ts";

/**
 * How this adapter lays its entries out as KurrentDB events (issue 33, part 6): an entry is one event or several
 * (chunks), so that no event is larger than the bound the adapter is given, and one append of the port may take
 * several appends of KurrentDB, whose `MaxAppendSize` (1 MiB by default, "the size of entire append requests over
 * gRPC", KurrentDB 24.10.4 release notes) bounds a request. Readers put the chunks back together and show a batch only
 * when all of it is stored, so the port's atomic append holds for readers.
 *
 * An event's data: a 34-byte header, then a slice of the entry's frame.
 * - header: `0xD5` (byte 0), kind (byte 1: 1 a chunk, 2 a fence), the entry's revision as the engine sees it (u64
 *   BE), the revisions of the first and last entry of its batch (u64 BE each), the chunk's index and the entry's
 *   chunk count (u32 BE each).
 * - frame: the length of the JSON of `encodeData` (4 bytes, big-endian), that JSON, then its binary values.
 *
 * Events written by the earlier adapter (issue 22) hold a frame alone; a frame's first byte is 0x00 or 0x01 (its JSON
 * is at most `MAX_ENTRY_BYTES`, 16 MiB), never 0xD5, and their revision is the event's own.
 * A fence is written just before a soft delete (see `createKurrentDbEventStore`): a stream whose last event is a fence
 * is deleted.
 */
export const HEADER_BYTES = 34;
const MAGIC = 0xd5;
const KIND_CHUNK = 1;
const KIND_FENCE = 2;

/** The type of a fence event (never an entry's: it is read back from the header, not from the type). */
export const FENCE_TYPE = "duplex.fence";

/** One KurrentDB event to append: its id (a UUID), type, data (header and slice) and metadata (JSON bytes). */
export interface PlannedEvent {
  readonly id: string;
  readonly type: string;
  readonly data: Uint8Array;
  readonly metadata: Uint8Array;
  /** data, metadata and type together, in bytes: what KurrentDB counts towards `MaxAppendSize`. */
  readonly bytes: number;
}

/** An entry's frame: the JSON length (u32 BE), the JSON, the binary values. */
export function frameOf(entry: EncodedEntry): Uint8Array {
  const json = Buffer.from(entry.json, "utf8");
  const out = Buffer.alloc(4 + json.byteLength + (entry.blob?.byteLength ?? 0));
  out.writeUInt32BE(json.byteLength, 0);
  json.copy(out, 4);
  if (entry.blob !== null) out.set(entry.blob, 4 + json.byteLength);
  return out;
}

/**
 * Decodes an entry's frame to its data (`decodeData`).
 * @throws RangeError or SyntaxError when the frame is corrupt.
 */
export function dataOfFrame(bytes: Uint8Array): unknown {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const length = view.readUInt32BE(0);
  const json = view.subarray(4, 4 + length).toString("utf8");
  const blob = view.byteLength > 4 + length ? new Uint8Array(view.subarray(4 + length)) : null;
  return decodeData({ json, blob: json.includes('"$bin"') ? (blob ?? new Uint8Array(0)) : blob });
}

/** A version-4-shaped UUID from a hash: the same content at the same place gets the same id (idempotent retries). */
function uuidOf(hash: string): string {
  const variant = ((Number.parseInt(hash.slice(16, 18), 16) & 0x3f) | 0x80).toString(16);
  return `${hash.slice(0, 8)}-${hash.slice(8, 12)}-4${hash.slice(13, 16)}-${variant}${hash.slice(18, 20)}-${hash.slice(20, 32)}`;
}

function header(kind: number, revision: number, first: number, last: number, chunk: number, chunks: number): Buffer {
  const out = Buffer.alloc(HEADER_BYTES);
  out[0] = MAGIC;
  out[1] = kind;
  out.writeBigUInt64BE(BigInt(revision), 2);
  out.writeBigUInt64BE(BigInt(first), 10);
  out.writeBigUInt64BE(BigInt(last), 18);
  out.writeUInt32BE(chunk, 26);
  out.writeUInt32BE(chunks, 30);
  return out;
}

/**
 * The events of one batch whose first entry gets revision `first`: each entry cut in chunks of at most
 * `maxEventBytes` (data, metadata and type together, bytes), each chunk carrying the entry's metadata.
 * `place` (the stream and where it is appended) goes into the ids, so a batch written again at the same place gets
 * the same ids.
 * @throws RangeError when an entry's metadata and type leave no room for data under `maxEventBytes` (the caller
 *   turns it into `EntryTooLargeError`).
 */
export function planBatch(
  encoded: readonly EncodedEntry[],
  first: number,
  maxEventBytes: number,
  place: string,
): PlannedEvent[] {
  const last = first + encoded.length - 1;
  const events: PlannedEvent[] = [];
  encoded.forEach((entry, i) => {
    const metadata = Buffer.from(entry.metadata, "utf8");
    const type = Buffer.byteLength(entry.type, "utf8");
    const room = maxEventBytes - HEADER_BYTES - metadata.byteLength - type;
    if (room < 1) throw new RangeError(`entry ${i}: its metadata and type alone take ${maxEventBytes - room} bytes`);
    const frame = frameOf(entry);
    const chunks = Math.max(1, Math.ceil(frame.byteLength / room));
    for (let c = 0; c < chunks; c += 1) {
      const slice = frame.subarray(c * room, Math.min(frame.byteLength, (c + 1) * room));
      const data = Buffer.concat([header(KIND_CHUNK, first + i, first, last, c, chunks), slice]);
      const hash = createHash("sha256")
        .update(`${place}\n${events.length}\n${entry.type}\n`)
        .update(metadata)
        .update(data)
        .digest("hex");
      events.push({
        id: uuidOf(hash),
        type: entry.type,
        data,
        metadata,
        bytes: data.byteLength + metadata.byteLength + type,
      });
    }
  });
  return events;
}

/** The fence written before a soft delete at `place` (the stream and its last revision). */
export function planFence(place: string): PlannedEvent {
  const data = header(KIND_FENCE, 0, 0, 0, 0, 1);
  const metadata = Buffer.from("{}", "utf8");
  const id = uuidOf(createHash("sha256").update(`fence\n${place}`).digest("hex"));
  return { id, type: FENCE_TYPE, data, metadata, bytes: data.byteLength + metadata.byteLength + FENCE_TYPE.length };
}

/**
 * Groups planned events into appends of at most `maxAppendBytes` each (in order; an event never spans two).
 * Every event is at most `maxEventBytes <= maxAppendBytes`, so each group holds at least one.
 */
export function groupAppends(events: readonly PlannedEvent[], maxAppendBytes: number): PlannedEvent[][] {
  const groups: PlannedEvent[][] = [];
  let current: PlannedEvent[] = [];
  let size = 0;
  for (const event of events) {
    if (current.length > 0 && size + event.bytes > maxAppendBytes) {
      groups.push(current);
      current = [];
      size = 0;
    }
    current.push(event);
    size += event.bytes;
  }
  if (current.length > 0) groups.push(current);
  return groups;
}

/** An event as the client gives it back, the fields this adapter reads. */
export interface StoredEvent {
  readonly streamId: string;
  readonly revision: bigint;
  readonly type: string;
  readonly data: unknown;
  readonly metadata: unknown;
  readonly position?: { readonly commit: bigint; readonly prepare: bigint };
}

/** What an event's data says it is. */
export type EventShape =
  | { readonly kind: "legacy" }
  | { readonly kind: "fence" }
  | {
      readonly kind: "chunk";
      readonly revision: number;
      readonly first: number;
      readonly last: number;
      readonly chunk: number;
      readonly chunks: number;
    };

/** Reads an event's header (`legacy` for a frame of the earlier adapter). */
export function shapeOf(event: StoredEvent): EventShape {
  const data = event.data as Uint8Array;
  if (data.byteLength < HEADER_BYTES || data[0] !== MAGIC) return { kind: "legacy" };
  const view = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (view[1] === KIND_FENCE) return { kind: "fence" };
  return {
    kind: "chunk",
    revision: Number(view.readBigUInt64BE(2)),
    first: Number(view.readBigUInt64BE(10)),
    last: Number(view.readBigUInt64BE(18)),
    chunk: view.readUInt32BE(26),
    chunks: view.readUInt32BE(30),
  };
}

/** True when `event` ends a whole batch (the last chunk of its last entry), or is an entry of the earlier adapter. */
export function endsBatch(shape: EventShape): boolean {
  return (
    shape.kind === "legacy" ||
    (shape.kind === "chunk" && shape.revision === shape.last && shape.chunk === shape.chunks - 1)
  );
}

/**
 * The port's global position of an event: KurrentDB's prepare position + 1 (1-based). The prepare position is the
 * event's own place in the log; the events of one append may share a commit position.
 */
export const positionOf = (event: StoredEvent): number => Number(event.position?.prepare ?? 0n) + 1;

function metadataOf(event: StoredEvent): RecordedEntry["metadata"] {
  return event.metadata instanceof Uint8Array
    ? JSON.parse(Buffer.from(event.metadata).toString("utf8"))
    : (event.metadata as RecordedEntry["metadata"]);
}

/** An entry put back together, with the KurrentDB revision of its first event (a place a read may start from). */
export interface AssembledEntry {
  readonly entry: RecordedEntry;
  /** KurrentDB revision of the first event of the entry's batch, when the entry is its batch's first. */
  readonly batchStart?: bigint;
  /** KurrentDB revision of the entry's last event. */
  readonly lastRevision: bigint;
}

/**
 * Puts one stream's events back into entries, in order: `push` each event as read; it returns the entries of a batch
 * once its last chunk arrives (nothing before). A batch whose chunks stop (its writer died between two appends) is
 * dropped when the next batch starts; a fence drops everything before it (`fenced` turns true). Events of the earlier
 * adapter are entries at once, their revision the event's.
 *
 * `push` may start in the middle of a stream only at a batch's first event (or a legacy one); chunks met before any
 * batch start are skipped.
 */
export function createAssembler(): {
  push(event: StoredEvent): AssembledEntry[];
  readonly fenced: boolean;
} {
  interface Pending {
    readonly first: number;
    readonly last: number;
    readonly startRevision: bigint;
    done: AssembledEntry[];
    parts: Uint8Array[];
    next: { revision: number; chunk: number };
  }
  let pending: Pending | undefined;
  let fenced = false;
  const push = (event: StoredEvent): AssembledEntry[] => {
    const shape = shapeOf(event);
    if (shape.kind === "fence") {
      pending = undefined;
      fenced = true;
      return [];
    }
    fenced = false;
    if (shape.kind === "legacy") {
      pending = undefined;
      const entry: RecordedEntry = {
        stream: event.streamId,
        revision: Number(event.revision),
        position: positionOf(event),
        type: event.type,
        data: dataOfFrame(event.data as Uint8Array),
        metadata: metadataOf(event),
      };
      return [{ entry, batchStart: event.revision, lastRevision: event.revision }];
    }
    const continues =
      pending !== undefined && pending.next.revision === shape.revision && pending.next.chunk === shape.chunk;
    if (!continues) {
      pending = undefined;
      if (shape.revision !== shape.first || shape.chunk !== 0) return [];
      pending = {
        first: shape.first,
        last: shape.last,
        startRevision: event.revision,
        done: [],
        parts: [],
        next: { revision: shape.revision, chunk: 0 },
      };
    }
    const p = pending as Pending;
    p.parts.push((event.data as Uint8Array).subarray(HEADER_BYTES));
    if (shape.chunk < shape.chunks - 1) {
      p.next = { revision: shape.revision, chunk: shape.chunk + 1 };
      return [];
    }
    const frame = p.parts.length === 1 ? (p.parts[0] as Uint8Array) : Buffer.concat(p.parts);
    p.parts = [];
    const entry: RecordedEntry = {
      stream: event.streamId,
      revision: shape.revision,
      position: positionOf(event),
      type: event.type,
      data: dataOfFrame(frame),
      metadata: metadataOf(event),
    };
    p.done.push({
      entry,
      ...(shape.revision === p.first ? { batchStart: p.startRevision } : {}),
      lastRevision: event.revision,
    });
    p.next = { revision: shape.revision + 1, chunk: 0 };
    if (shape.revision < p.last) return [];
    const done = p.done;
    pending = undefined;
    return done;
  };
  return {
    push,
    get fenced() {
      return fenced;
    },
  };
}
