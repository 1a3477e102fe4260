/**
 * Subscriptions of the KurrentDB adapter (issue 22, part 3; issue 34, part 5): the port's `subscribe` on the
 * client's catch-up subscriptions (a stream from a revision, or `$all` from a position, entries assembled from their
 * events per stream), and the follower that keeps this store's listing current with what other stores append
 * (`$all` from its end, system events excluded by the server).
 */
import { excludeSystemEvents } from "@kurrent/kurrentdb-client";
import { Observable } from "rxjs";
import type { RecordedEntry } from "../../engine/ports/event-store.ts";
import type { KurrentSubscription } from "./kurrentdb-client.ts";
import { createAssembler } from "./kurrentdb-frames.ts";
import { LISTING_STREAM, STREAM_DELETED } from "./kurrentdb-listing.ts";
import { dataOfJson } from "./kurrentdb-reads.ts";
import { type KurrentContext, startFor } from "./kurrentdb-streams.ts";
import { EventStoreClosedError } from "./store-errors.ts";

/** How long `close` waits for a subscription's catch-up to be delivered before completing it, ms. */
const CAUGHT_UP_WAIT_MS = 1_000;
const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms).unref());

/** A subscription's `fromRevision` for a catch-up from KurrentDB revision `start` (it starts after what it is given). */
const catchUpFrom = (start: bigint | "start"): bigint | "start" =>
  start === "start" || start === 0n ? "start" : start - 1n;

/**
 * The port's `subscribe`: entries of `stream` from revision `from` (or of every stream from position `from` for
 * `$all`), stored then live; completes on close once what was stored is delivered.
 * @throws (as the observable's error) EventStoreClosedError after close; the client's subscription error.
 */
export const subscribeEntries = (ctx: KurrentContext, stream: string, from?: number): Observable<RecordedEntry> =>
  new Observable<RecordedEntry>((subscriber) => {
    if (ctx.isClosed()) {
      subscriber.error(new EventStoreClosedError(`subscribe to ${stream}`));
      return;
    }
    const all = stream === "$all";
    const start = from ?? (all ? 1 : 0);
    const subscription = all
      ? ctx.client.subscribeToAll({ fromPosition: "start", filter: excludeSystemEvents() })
      : ctx.client.subscribeToStream(stream, { fromRevision: catchUpFrom(startFor(ctx, stream, start)) });
    const assemblers = new Map<string, ReturnType<typeof createAssembler>>();
    subscription.on("data", (resolved) => {
      const event = resolved.event;
      if (event === undefined || event.streamId.startsWith("$") || event.streamId === LISTING_STREAM) return;
      const assembler = assemblers.get(event.streamId) ?? createAssembler();
      assemblers.set(event.streamId, assembler);
      for (const { entry } of assembler.push(event))
        if ((all ? entry.position : entry.revision) >= start) subscriber.next(entry);
    });
    let caught = false;
    const caughtUp = new Promise<void>((resolve) =>
      subscription.on("caughtUp", () => {
        caught = true;
        resolve();
      }),
    );
    subscription.on("error", (error) => {
      if (!ctx.isClosed()) subscriber.error(error);
    });
    // On close, what was stored is delivered first (bounded: a server before 23.10 never says caughtUp).
    const complete = async (): Promise<void> => {
      if (!caught) await Promise.race([caughtUp, delay(CAUGHT_UP_WAIT_MS)]);
      subscriber.complete();
    };
    ctx.completers.add(complete);
    return () => {
      ctx.completers.delete(complete);
      void subscription.unsubscribe();
    };
  });

/**
 * Follows what other stores append from now on into the listing: `$all` from its end, a `StreamDeleted` of the
 * listing stream dropping what this store knows of that stream. Its errors are ignored (the listing only lags).
 * @returns the subscription, to unsubscribe on close.
 */
export const followOthers = (ctx: KurrentContext): KurrentSubscription => {
  const follower = ctx.client.subscribeToAll({ fromPosition: "end", filter: excludeSystemEvents() });
  const followed = new Map<string, ReturnType<typeof createAssembler>>();
  follower.on("data", (resolved) => {
    const event = resolved.event;
    if (event === undefined || event.streamId.startsWith("$")) return;
    if (event.streamId === LISTING_STREAM) {
      const data = dataOfJson(event.data);
      if (event.type === STREAM_DELETED && typeof data?.stream === "string") {
        ctx.listing.drop(data.stream);
        ctx.tails.delete(data.stream);
        ctx.starts.delete(data.stream);
      }
      return;
    }
    const assembler = followed.get(event.streamId) ?? createAssembler();
    followed.set(event.streamId, assembler);
    for (const { entry, lastRevision } of assembler.push(event)) ctx.listing.apply(entry, lastRevision);
  });
  follower.on("error", () => undefined);
  return follower;
};
