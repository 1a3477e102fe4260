/**
 * Appends of the KurrentDB adapter (issue 22, part 3; issue 34, part 5). One port append is one KurrentDB append,
 * or several of at most `maxAppendBytes` chained by expected revision (kurrentdb-frames.ts plans the events); readers
 * show a batch only once whole, so a writer dying between two appends leaves nothing visible. The port's expectation
 * is checked against the stream's tail (its last whole entry), and the append carries the tail's KurrentDB revision,
 * so the server refuses it if anything was written meanwhile. A repeated append is recognised by reading the entries
 * at its place and comparing them. A stream's first append names it in the listing stream first.
 */
import { jsonEvent, MaxAppendSizeExceededError } from "@kurrent/kurrentdb-client";
import {
  EntryTooLargeError,
  type ExpectedRevision,
  type NewEntry,
  WrongExpectedRevisionError,
} from "../../engine/ports/event-store.ts";
import { type EncodedEntry, encodeData, encodeEntries } from "./codec.ts";
import { APPEND_ATTEMPTS, isWrongVersion, toEventData } from "./kurrentdb-client.ts";
import { finishDelete } from "./kurrentdb-deletes.ts";
import { groupAppends, type PlannedEvent, planBatch, type StoredEvent, shapeOf } from "./kurrentdb-frames.ts";
import { LISTING_STREAM, STREAM_CREATED } from "./kurrentdb-listing.ts";
import { readEntries } from "./kurrentdb-reads.ts";
import { type KurrentContext, tailOf } from "./kurrentdb-streams.ts";
import { EventStoreClosedError } from "./store-errors.ts";

/**
 * Appends `groups` in order, each expecting the revision the one before left. Returns the last KurrentDB revision.
 * @throws EntryTooLargeError when the server refuses a group's size; WrongExpectedVersionError, marked `torn` when
 *   a group after the first was refused (the batch stays invisible).
 */
const writeChain = async (
  ctx: KurrentContext,
  stream: string,
  groups: PlannedEvent[][],
  expected: bigint | undefined,
): Promise<bigint> => {
  let state: bigint | "no_stream" = expected ?? "no_stream";
  for (const [i, group] of groups.entries()) {
    try {
      const result = await ctx.client.appendToStream(stream, group.map(toEventData), { streamState: state });
      state = result.nextExpectedRevision;
    } catch (error) {
      if (error instanceof MaxAppendSizeExceededError) {
        const bytes = group.reduce((n, e) => n + e.bytes, 0);
        throw new EntryTooLargeError(stream, bytes, error.maxAppendSize, { cause: error });
      }
      // A later group refused: the batch is torn and stays invisible; the caller reports the conflict.
      if (isWrongVersion(error) && i > 0) throw Object.assign(error, { torn: true });
      throw error;
    }
  }
  return state as bigint;
};

/** Adds `stream` to the listing stream (before its first entry: a name without a readable stream is skipped). */
const listCreated = async (ctx: KurrentContext, stream: string): Promise<void> => {
  await ctx.client.appendToStream(LISTING_STREAM, [jsonEvent({ type: STREAM_CREATED, data: { stream } })], {
    streamState: "any",
  });
};

/** The entries of the batch stored at `from` equal `encoded` (a repeated append whose reply was lost). */
const storedAlready = async (
  ctx: KurrentContext,
  stream: string,
  from: number,
  encoded: readonly EncodedEntry[],
): Promise<boolean> => {
  const stored = await readEntries(ctx, stream, from, encoded.length);
  return (
    stored.length === encoded.length &&
    stored.every((entry, i) => {
      const want = encoded[i] as EncodedEntry;
      const got = encodeData(entry.data);
      return (
        entry.type === want.type &&
        JSON.stringify(entry.metadata) === want.metadata &&
        got.json === want.json &&
        Buffer.compare(got.blob ?? Buffer.alloc(0), want.blob ?? Buffer.alloc(0)) === 0 &&
        (got.blob === null) === (want.blob === null)
      );
    })
  );
};

/** Applies this store's own append to the listing, with the KurrentDB revision of each entry's last event. */
const indexOwn = (
  ctx: KurrentContext,
  stream: string,
  encoded: readonly EncodedEntry[],
  entries: readonly NewEntry[],
  first: number,
  firstKurrent: bigint,
  events: readonly PlannedEvent[],
): void => {
  let kurrent = firstKurrent - 1n;
  let e = 0;
  encoded.forEach((_, i) => {
    const chunks = shapeOf({ data: events[e]?.data } as StoredEvent);
    const n = chunks.kind === "chunk" ? chunks.chunks : 1;
    e += n;
    kurrent += BigInt(n);
    const entry = entries[i] as NewEntry;
    const recorded = {
      stream,
      revision: first + i,
      position: 0,
      type: entry.type,
      data: entry.data,
      metadata: entry.metadata,
    };
    ctx.listing.apply(recorded, kurrent);
  });
};

/** The events of `encoded` from engine revision `first`, grouped into appends. @throws EntryTooLargeError */
const planAppends = (
  ctx: KurrentContext,
  stream: string,
  encoded: readonly EncodedEntry[],
  first: number,
  kurrent: bigint | undefined,
): PlannedEvent[][] => {
  try {
    return groupAppends(planBatch(encoded, first, ctx.maxEventBytes, `${stream}\n${kurrent}`), ctx.maxAppendBytes);
  } catch (error) {
    const bytes = encoded.reduce((n, e) => n + e.json.length + (e.blob?.byteLength ?? 0) + e.metadata.length, 0);
    throw new EntryTooLargeError(stream, bytes, ctx.maxEventBytes, { cause: error });
  }
};

/**
 * The port's `append`: `entries` after the revision `expected` names, in one batch.
 * @returns the revision of the last entry (of the tail for no entries; -1 for none at all).
 * @throws EventStoreClosedError after close; WrongExpectedRevisionError when the tail is not `expected` (and the
 *   batch is not there already); EntryTooLargeError for an entry over the limits.
 */
export const appendEntries = async (
  ctx: KurrentContext,
  stream: string,
  entries: readonly NewEntry[],
  expected: ExpectedRevision,
): Promise<number> => {
  if (ctx.isClosed()) throw new EventStoreClosedError(`append to stream ${stream}`);
  if (stream === "$all") throw new Error("cannot append to stream $all: it names every stream in subscribe");
  const encoded = encodeEntries(stream, entries);
  for (let attempt = 0; ; attempt += 1) {
    const tail = ctx.tails.get(stream) ?? (await tailOf(ctx.client, stream));
    if (tail.fenced && tail.kurrent !== undefined) {
      await finishDelete(ctx, stream, tail.kurrent);
      continue;
    }
    if (encoded.length === 0) {
      if (expected !== "any" && expected !== tail.revision)
        throw new WrongExpectedRevisionError(stream, expected, tail.revision);
      return tail.revision === "no_stream" ? -1 : tail.revision;
    }
    if (expected !== "any" && expected !== tail.revision) {
      if (ctx.tails.has(stream) && attempt === 0) {
        ctx.tails.delete(stream);
        continue;
      }
      const from = expected === "no_stream" ? 0 : expected + 1;
      if (await storedAlready(ctx, stream, from, encoded)) return from + encoded.length - 1;
      throw new WrongExpectedRevisionError(stream, expected, tail.revision);
    }
    const first = tail.revision === "no_stream" ? 0 : tail.revision + 1;
    const groups = planAppends(ctx, stream, encoded, first, tail.kurrent);
    if (tail.revision === "no_stream") await listCreated(ctx, stream);
    try {
      const last = await writeChain(ctx, stream, groups, tail.kurrent);
      const count = groups.reduce((n, g) => n + g.length, 0);
      ctx.tails.set(stream, { revision: first + encoded.length - 1, kurrent: last, fenced: false });
      if (first === 0) ctx.starts.delete(stream);
      indexOwn(ctx, stream, encoded, entries, first, last - BigInt(count - 1), groups.flat());
      return first + encoded.length - 1;
    } catch (error) {
      if (!isWrongVersion(error)) throw error;
      ctx.tails.delete(stream);
      const torn = (error as { torn?: boolean }).torn === true;
      if (torn || attempt >= APPEND_ATTEMPTS) {
        const actual = await tailOf(ctx.client, stream);
        throw new WrongExpectedRevisionError(stream, expected, actual.revision, { cause: error });
      }
    }
  }
};
