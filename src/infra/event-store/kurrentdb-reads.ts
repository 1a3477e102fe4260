/**
 * Reads of the KurrentDB adapter (issue 22, part 3; issue 34, part 5): a stream's entries in whole batches (a batch
 * shows only once every event of it is stored; a stream whose last event is a fence reads as deleted), and the
 * listing read when the store opens or rebuilds its summaries: the `duplex-sessions` stream, then every live stream
 * it names, folded into the listing (kurrentdb-listing.ts).
 */
import { StreamNotFoundError } from "@kurrent/kurrentdb-client";
import type { RecordedEntry } from "../../engine/ports/event-store.ts";
import type { AssembledEntry } from "./kurrentdb-frames.ts";
import { LISTING_STREAM, liveStreams } from "./kurrentdb-listing.ts";
import { type KurrentContext, readAssembled, tailOf } from "./kurrentdb-streams.ts";
import { EventStoreClosedError } from "./store-errors.ts";

/**
 * The port's `read`: the entries of `stream` from revision `from`, at most `limit` of them.
 * @throws EventStoreClosedError after close; Error from the client when the server cannot be reached.
 */
export const readEntries = async (
  ctx: KurrentContext,
  stream: string,
  from = 0,
  limit?: number,
): Promise<RecordedEntry[]> => {
  if (ctx.isClosed()) throw new EventStoreClosedError(`read stream ${stream}`);
  const out: RecordedEntry[] = [];
  if (limit !== undefined && limit <= 0) return out;
  let whole = true;
  const fencedAtEnd = await readAssembled(ctx, stream, from, (assembled) => {
    out.push(assembled.entry);
    whole = limit === undefined || out.length < limit;
    return whole;
  });
  // A fence as the last event: a delete under way (or cut short), and the stream reads as deleted.
  const fenced = whole
    ? fencedAtEnd
    : out.length > 0 && (ctx.tails.get(stream) ?? (await tailOf(ctx.client, stream))).fenced;
  return fenced ? [] : out;
};

/** Reads the listing stream, then every live stream it names, into the listing. */
export const readListing = async (ctx: KurrentContext): Promise<void> => {
  const named: { type: string; stream: string }[] = [];
  try {
    for await (const resolved of ctx.client.readStream(LISTING_STREAM, {
      direction: "forwards",
      fromRevision: "start",
    })) {
      const event = resolved.event;
      if (event === undefined) continue;
      const data = dataOfJson(event.data);
      if (typeof data?.stream === "string") named.push({ type: event.type, stream: data.stream });
    }
  } catch (error) {
    if (!(error instanceof StreamNotFoundError)) throw error;
  }
  for (const stream of liveStreams(named)) {
    const entries: AssembledEntry[] = [];
    const fenced = await readAssembled(ctx, stream, 0, (assembled) => entries.push(assembled) > 0);
    if (entries.length === 0 || fenced) continue;
    for (const { entry, lastRevision } of entries) ctx.listing.apply(entry, lastRevision);
  }
};

/** A JSON event's data as the client gives it (parsed), or its bytes parsed; undefined when neither. */
export function dataOfJson(data: unknown): { stream?: unknown } | undefined {
  if (data instanceof Uint8Array) {
    try {
      return JSON.parse(Buffer.from(data).toString("utf8"));
    } catch {
      return undefined;
    }
  }
  return typeof data === "object" && data !== null ? (data as { stream?: unknown }) : undefined;
}
