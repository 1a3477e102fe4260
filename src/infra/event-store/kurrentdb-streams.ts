/**
 * What the KurrentDB adapter knows of each stream (issue 22, part 3; issue 34, part 5): where it ends (its tail: the
 * last whole entry's engine revision and the last KurrentDB revision, read backwards past torn batches and fences),
 * where its batches start (KurrentDB revisions by the engine revision of their first entry, so that a read need not
 * start at the stream's first event), and reading it forwards in whole batches. Also the context the adapter's parts
 * share (kurrentdb.ts makes it): the client, the listing, these two maps, the size limits and whether it is closed.
 */
import { StreamNotFoundError } from "@kurrent/kurrentdb-client";
import type { KurrentClient } from "./kurrentdb-client.ts";
import { type AssembledEntry, createAssembler, endsBatch, shapeOf } from "./kurrentdb-frames.ts";
import type { createListing } from "./kurrentdb-listing.ts";

/** Where a stream ends: its last whole entry's revision as the engine sees it, and its last KurrentDB revision. */
export interface Tail {
  readonly revision: number | "no_stream";
  /** KurrentDB revision of the stream's last event (a torn batch's or a fence's included); undefined: none readable. */
  readonly kurrent: bigint | undefined;
  /** The last event is a fence: a delete that did not finish. */
  readonly fenced: boolean;
}

/** The tail of a stream that does not exist (or was deleted). */
export const NOT_FOUND: Tail = { revision: "no_stream", kurrent: undefined, fenced: false };
/** Events read a page when reading a stream backwards to its tail. */
const TAIL_PAGE = 64;

/** What the parts of one KurrentDB store share. */
export interface KurrentContext {
  readonly client: KurrentClient;
  /** The sessions' summaries and stream names (kurrentdb-listing.ts). */
  readonly listing: ReturnType<typeof createListing>;
  /** Per stream, the tail as this store last wrote or read it (checked by the server on the next append). */
  readonly tails: Map<string, Tail>;
  /** Per stream, KurrentDB revisions where batches start, by the revision of their first entry: where reads start. */
  readonly starts: Map<string, Map<number, bigint>>;
  /** The server's `MaxAppendSize`, bytes: one append request at most. */
  readonly maxAppendBytes: number;
  /** The most bytes of one event (data, metadata and type). */
  readonly maxEventBytes: number;
  /** Completes a subscription on close, after what was stored is delivered; one per open subscription. */
  readonly completers: Set<() => Promise<void>>;
  /** The store was closed: every call throws EventStoreClosedError. */
  readonly isClosed: () => boolean;
}

/** Notes where the batch of `assembled` starts, when it is the first entry of its batch. */
export const noteStart = (ctx: KurrentContext, stream: string, assembled: AssembledEntry): void => {
  if (assembled.batchStart === undefined) return;
  const known = ctx.starts.get(stream) ?? new Map<number, bigint>();
  ctx.starts.set(stream, known);
  known.set(assembled.entry.revision, assembled.batchStart);
};

/** The KurrentDB revision of the latest known batch start at or before entry `from` (START when none is known). */
export const startFor = (ctx: KurrentContext, stream: string, from: number): bigint | "start" => {
  let best: [number, bigint] | undefined;
  for (const [revision, kurrent] of ctx.starts.get(stream) ?? [])
    if (revision <= from && (best === undefined || revision > best[0])) best = [revision, kurrent];
  return best?.[1] ?? "start";
};

/** Reads the stream backwards to its last whole entry (torn batches and fences seen on the way). */
export const tailOf = async (client: KurrentClient, stream: string): Promise<Tail> => {
  let last: bigint | undefined;
  let from: bigint | "end" = "end";
  try {
    for (;;) {
      let read = 0;
      let lowest: bigint | undefined;
      for await (const resolved of client.readStream(stream, {
        direction: "backwards",
        fromRevision: from,
        maxCount: TAIL_PAGE,
      })) {
        const event = resolved.event;
        if (event === undefined) continue;
        read += 1;
        lowest = event.revision;
        last ??= event.revision;
        const shape = shapeOf(event);
        if (shape.kind === "fence") return { revision: "no_stream", kurrent: last, fenced: last === event.revision };
        if (endsBatch(shape)) {
          const revision = shape.kind === "chunk" ? shape.revision : Number(event.revision);
          return { revision, kurrent: last, fenced: false };
        }
      }
      if (read < TAIL_PAGE || lowest === undefined || lowest === 0n) break;
      from = lowest - 1n;
    }
  } catch (error) {
    if (error instanceof StreamNotFoundError) return NOT_FOUND;
    throw error;
  }
  return { revision: "no_stream", kurrent: last, fenced: false };
};

/**
 * Reads whole batches from `from`, calling `each` for every entry at or after it until it returns false.
 * @returns whether the stream's last event read is a fence (false when `each` stopped the read); a missing stream
 *   reads as empty.
 */
export const readAssembled = async (
  ctx: KurrentContext,
  stream: string,
  from: number,
  each: (assembled: AssembledEntry) => boolean,
): Promise<boolean> => {
  const start = startFor(ctx, stream, from);
  const assembler = createAssembler();
  try {
    for await (const resolved of ctx.client.readStream(stream, { direction: "forwards", fromRevision: start })) {
      if (resolved.event === undefined) continue;
      for (const assembled of assembler.push(resolved.event)) {
        noteStart(ctx, stream, assembled);
        if (assembled.entry.revision >= from && !each(assembled)) return false;
      }
    }
  } catch (error) {
    if (!(error instanceof StreamNotFoundError)) throw error;
  }
  return assembler.fenced;
};
