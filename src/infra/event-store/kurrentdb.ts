import { KurrentDBClient } from "@kurrent/kurrentdb-client";
import type {
  EventStore,
  ExpectedRevision,
  NewEntry,
  SummaryPage,
  SummaryQuery,
} from "../../engine/ports/event-store.ts";
import { appendEntries } from "./kurrentdb-appends.ts";
import type { KurrentClient } from "./kurrentdb-client.ts";
import { deleteStream } from "./kurrentdb-deletes.ts";
import { createListing } from "./kurrentdb-listing.ts";
import { readEntries, readListing } from "./kurrentdb-reads.ts";
import type { KurrentContext } from "./kurrentdb-streams.ts";
import { followOthers, subscribeEntries } from "./kurrentdb-subscriptions.ts";
import { EventStoreClosedError } from "./store-errors.ts";
import { selectSummaries } from "./summary-query.ts";

/** KurrentDB's default `MaxAppendSize`, bytes: the most one append request may carry (data, metadata and types). */
export const KURRENTDB_MAX_APPEND_BYTES = 1024 * 1024;
/** The most bytes one event of this adapter takes (data, metadata and type): half the default append limit. */
export const KURRENTDB_MAX_EVENT_BYTES = 512 * 1024;

/** Options of `createKurrentDbEventStore`. */
export interface KurrentDbEventStoreOptions {
  /** The client's connection string: `kurrentdb://host:2113?tls=false` (`esdb://` too). */
  readonly url?: string;
  /** A client to use instead of one made from `url` (tests give a fake); the store disposes of it on close. */
  readonly client?: KurrentClient;
  /** The server's `MaxAppendSize`, bytes (default `KURRENTDB_MAX_APPEND_BYTES`): one append request at most. */
  readonly maxAppendBytes?: number;
  /** The most bytes of one event (default `KURRENTDB_MAX_EVENT_BYTES`, at most `maxAppendBytes`). */
  readonly maxEventBytes?: number;
}

/**
 * The KurrentDB EventStore adapter (issue 22, part 3; issue 33, part 6), following KurrentDB 24.10 LTS and 25.x as
 * documented ("Deleting streams and events", the 24.10.4 release notes on `MaxAppendSize`) and as the official
 * client's tests pin them (KurrentDB-Client-Dotnet, `SoftDeleteTests`). KurrentDB is EventStoreDB renamed.
 *
 * - A stream per session. Each entry is one or more binary events of at most `maxEventBytes` (kurrentdb-frames.ts),
 *   and one port append is one KurrentDB append, or several of at most `maxAppendBytes` chained by expected
 *   revision; readers show a batch only once whole, so a writer dying between two appends leaves nothing visible.
 *   Revisions are the engine's (in each event's header), whatever the KurrentDB revisions.
 * - Expected revisions: the port's expectation is checked against the stream's tail (its last whole entry), and the
 *   append carries the tail's KurrentDB revision, so the server refuses it if anything was written meanwhile. A
 *   repeated append is recognised by reading the entries at its place and comparing them.
 * - Delete: a fence event (with the tail's revision expected), then a soft delete expecting the fence. A soft-deleted
 *   stream reads as StreamNotFound and any append with `no_stream`, `any` or its last revision makes it again
 *   (continuing its revisions); with the fence as its last event, a writer still holding the old revision is refused,
 *   so a deleted session cannot come back by a late append. A stream whose last event is a fence reads as deleted,
 *   and the next delete or creation finishes the soft delete.
 * - Listing: the `duplex-sessions` stream (kurrentdb-listing.ts) names the streams created and deleted; when the
 *   store opens it reads that stream and each live stream, then follows `$all` from its end (system events excluded)
 *   for what other stores append.
 *
 * Where each part lives (issue 34, part 5): what it knows of each stream, its tail and where batches start
 * (kurrentdb-streams.ts); appends (kurrentdb-appends.ts); deletes (kurrentdb-deletes.ts); reads and the listing's
 * load (kurrentdb-reads.ts); subscriptions and the follower of `$all` (kurrentdb-subscriptions.ts); the events'
 * layout (kurrentdb-frames.ts) and the listing (kurrentdb-listing.ts).
 *
 * No KurrentDB server runs in this project's CI: the adapter is tested against an in-memory fake of the client that
 * follows the documented semantics (test/support/kurrentdb-fake.ts), and against a real server where one is
 * reachable (`KURRENTDB_URL`).
 *
 * @throws Error from the client when the server cannot be reached (from the factory).
 */
export async function createKurrentDbEventStore(options: KurrentDbEventStoreOptions): Promise<EventStore> {
  const client: KurrentClient =
    options.client ?? (KurrentDBClient.connectionString(options.url ?? "") as unknown as KurrentClient);
  const maxAppendBytes = options.maxAppendBytes ?? KURRENTDB_MAX_APPEND_BYTES;
  let closed = false;
  const ctx: KurrentContext = {
    client,
    listing: createListing(),
    tails: new Map(),
    starts: new Map(),
    maxAppendBytes,
    maxEventBytes: Math.min(options.maxEventBytes ?? KURRENTDB_MAX_EVENT_BYTES, maxAppendBytes),
    completers: new Set(),
    isClosed: () => closed,
  };
  await readListing(ctx);
  // What other stores append from now on: $all from its end, system events excluded by the server.
  const follower = followOthers(ctx);

  /** In memory: this store's appends at once, other stores' a moment after they settle (from `$all`). */
  const listSummaries = async (query: SummaryQuery): Promise<SummaryPage> => {
    if (closed) throw new EventStoreClosedError(`list summaries with prefix ${query.prefix}`);
    return selectSummaries(ctx.listing.summaries(query.prefix), query);
  };

  /** Folds the summaries again: the listing stream, then every live stream, read from the start. */
  const rebuildSummaries = async (): Promise<number> => {
    if (closed) throw new EventStoreClosedError("rebuild the summaries");
    ctx.listing.clear();
    await readListing(ctx);
    return ctx.listing.size;
  };

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await Promise.all([...ctx.completers].map((complete) => complete()));
    ctx.completers.clear();
    await follower.unsubscribe().catch(() => undefined);
    await client.dispose();
  };

  return {
    append: (stream: string, entries: readonly NewEntry[], expected: ExpectedRevision) =>
      appendEntries(ctx, stream, entries, expected),
    read: (stream: string, from?: number, limit?: number) => readEntries(ctx, stream, from, limit),
    subscribe: (stream: string, from?: number) => subscribeEntries(ctx, stream, from),
    listStreams: async (prefix: string) => {
      if (closed) throw new EventStoreClosedError(`list streams with prefix ${prefix}`);
      return ctx.listing.streams(prefix);
    },
    listSummaries,
    rebuildSummaries,
    deleteStream: (stream: string) => deleteStream(ctx, stream),
    close,
  };
}
