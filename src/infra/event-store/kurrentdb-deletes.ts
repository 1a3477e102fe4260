/**
 * Deleting a KurrentDB stream (issue 22, part 3; issue 34, part 5): a fence event (with the tail's revision
 * expected), then a soft delete expecting the fence, then a `StreamDeleted` event in the listing stream. With the
 * fence as its last event, a writer still holding the old revision is refused, so a deleted session cannot come back
 * by a late append; a stream whose last event is a fence reads as deleted, and the next delete or creation finishes
 * the soft delete (`finishDelete`).
 */
import { jsonEvent, StreamNotFoundError } from "@kurrent/kurrentdb-client";
import { APPEND_ATTEMPTS, isWrongVersion, toEventData } from "./kurrentdb-client.ts";
import { planFence } from "./kurrentdb-frames.ts";
import { LISTING_STREAM, STREAM_DELETED } from "./kurrentdb-listing.ts";
import { type KurrentContext, NOT_FOUND, tailOf } from "./kurrentdb-streams.ts";
import { EventStoreClosedError } from "./store-errors.ts";

/** Soft-deletes a fenced stream (its fence is its last event, at KurrentDB revision `fence`). */
export const finishDelete = async (ctx: KurrentContext, stream: string, fence: bigint): Promise<void> => {
  try {
    await ctx.client.deleteStream(stream, { expectedRevision: fence });
  } catch (error) {
    if (!(error instanceof StreamNotFoundError)) throw error;
  }
  ctx.tails.set(stream, NOT_FOUND);
};

/**
 * The port's `deleteStream`: fences and soft-deletes `stream`, and names it deleted in the listing stream.
 * @returns false when there was nothing to delete (no stream, or one already fenced, whose delete it finishes).
 * @throws EventStoreClosedError after close; WrongExpectedVersionError when writers keep appending past the retries.
 */
export const deleteStream = async (ctx: KurrentContext, stream: string): Promise<boolean> => {
  if (ctx.isClosed()) throw new EventStoreClosedError(`delete stream ${stream}`);
  for (let attempt = 0; ; attempt += 1) {
    const tail = await tailOf(ctx.client, stream);
    if (tail.kurrent === undefined) return false;
    if (tail.fenced) {
      await finishDelete(ctx, stream, tail.kurrent);
      return false;
    }
    if (tail.revision === "no_stream") return false;
    try {
      const fence = toEventData(planFence(`${stream}\n${tail.kurrent}`));
      const result = await ctx.client.appendToStream(stream, [fence], { streamState: tail.kurrent });
      await finishDelete(ctx, stream, result.nextExpectedRevision);
    } catch (error) {
      if (isWrongVersion(error) && attempt < APPEND_ATTEMPTS) continue;
      throw error;
    }
    await ctx.client.appendToStream(LISTING_STREAM, [jsonEvent({ type: STREAM_DELETED, data: { stream } })], {
      streamState: "any",
    });
    ctx.listing.drop(stream);
    ctx.starts.delete(stream);
    ctx.tails.set(stream, NOT_FOUND);
    return true;
  }
};
