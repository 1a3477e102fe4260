import {
  binaryEvent,
  excludeSystemEvents,
  jsonEvent,
  KurrentDBClient,
  MaxAppendSizeExceededError,
  StreamNotFoundError,
  WrongExpectedVersionError,
} from "@kurrent/kurrentdb-client";
import { Observable } from "rxjs";
import {
  EntryTooLargeError,
  type EventStore,
  type ExpectedRevision,
  type NewEntry,
  type RecordedEntry,
  type SummaryPage,
  type SummaryQuery,
  WrongExpectedRevisionError,
} from "../../engine/ports/event-store.ts";
import { type EncodedEntry, encodeData, encodeEntries } from "./codec.ts";
import type { KurrentClient, KurrentEventData } from "./kurrentdb-client.ts";
import {
  type AssembledEntry,
  createAssembler,
  endsBatch,
  groupAppends,
  type PlannedEvent,
  planBatch,
  planFence,
  type StoredEvent,
  shapeOf,
} from "./kurrentdb-frames.ts";
import { createListing, LISTING_STREAM, liveStreams, STREAM_CREATED, STREAM_DELETED } from "./kurrentdb-listing.ts";
import { EventStoreClosedError } from "./sqlite.ts";
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

/** Where a stream ends: its last whole entry's revision as the engine sees it, and its last KurrentDB revision. */
interface Tail {
  readonly revision: number | "no_stream";
  /** KurrentDB revision of the stream's last event (a torn batch's or a fence's included); undefined: none readable. */
  readonly kurrent: bigint | undefined;
  /** The last event is a fence: a delete that did not finish. */
  readonly fenced: boolean;
}

const NOT_FOUND: Tail = { revision: "no_stream", kurrent: undefined, fenced: false };
const TAIL_PAGE = 64;
/** How long `close` waits for a subscription's catch-up to be delivered before completing it, ms. */
const CAUGHT_UP_WAIT_MS = 1_000;
const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms).unref());
const APPEND_ATTEMPTS = 3;

const isWrongVersion = (error: unknown): error is WrongExpectedVersionError =>
  error instanceof WrongExpectedVersionError;

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
  const maxEventBytes = Math.min(options.maxEventBytes ?? KURRENTDB_MAX_EVENT_BYTES, maxAppendBytes);
  let closed = false;
  const completers = new Set<() => Promise<void>>();
  const listing = createListing();
  /** Per stream, the tail as this store last wrote or read it (checked by the server on the next append). */
  const tails = new Map<string, Tail>();
  /** Per stream, KurrentDB revisions where batches start, by the revision of their first entry: where reads start. */
  const starts = new Map<string, Map<number, bigint>>();

  const noteStart = (stream: string, assembled: AssembledEntry): void => {
    if (assembled.batchStart === undefined) return;
    const known = starts.get(stream) ?? new Map<number, bigint>();
    starts.set(stream, known);
    known.set(assembled.entry.revision, assembled.batchStart);
  };
  /** The KurrentDB revision of the latest known batch start at or before entry `from` (START when none is known). */
  const startFor = (stream: string, from: number): bigint | "start" => {
    let best: [number, bigint] | undefined;
    for (const [revision, kurrent] of starts.get(stream) ?? [])
      if (revision <= from && (best === undefined || revision > best[0])) best = [revision, kurrent];
    return best?.[1] ?? "start";
  };

  /** Reads the stream backwards to its last whole entry (torn batches and fences seen on the way). */
  const tailOf = async (stream: string): Promise<Tail> => {
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

  const toEventData = (event: PlannedEvent): KurrentEventData =>
    binaryEvent({ id: event.id, type: event.type, data: event.data, metadata: event.metadata }) as KurrentEventData;

  /** Appends `groups` in order, each expecting the revision the one before left. Returns the last KurrentDB revision. */
  const writeChain = async (
    stream: string,
    groups: PlannedEvent[][],
    expected: bigint | undefined,
  ): Promise<bigint> => {
    let state: bigint | "no_stream" = expected ?? "no_stream";
    for (const [i, group] of groups.entries()) {
      try {
        const result = await client.appendToStream(stream, group.map(toEventData), { streamState: state });
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
  const listCreated = async (stream: string): Promise<void> => {
    await client.appendToStream(LISTING_STREAM, [jsonEvent({ type: STREAM_CREATED, data: { stream } })], {
      streamState: "any",
    });
  };

  /** The entries of the batch stored at `from` equal `encoded` (a repeated append whose reply was lost). */
  const storedAlready = async (stream: string, from: number, encoded: readonly EncodedEntry[]): Promise<boolean> => {
    const stored = await read(stream, from, encoded.length);
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

  /** Soft-deletes a fenced stream (its fence is its last event, at `fence`). */
  const finishDelete = async (stream: string, fence: bigint): Promise<void> => {
    try {
      await client.deleteStream(stream, { expectedRevision: fence });
    } catch (error) {
      if (!(error instanceof StreamNotFoundError)) throw error;
    }
    tails.set(stream, NOT_FOUND);
  };

  const append = async (stream: string, entries: readonly NewEntry[], expected: ExpectedRevision): Promise<number> => {
    if (closed) throw new EventStoreClosedError(`append to stream ${stream}`);
    if (stream === "$all") throw new Error("cannot append to stream $all: it names every stream in subscribe");
    const encoded = encodeEntries(stream, entries);
    for (let attempt = 0; ; attempt += 1) {
      const tail = tails.get(stream) ?? (await tailOf(stream));
      if (tail.fenced && tail.kurrent !== undefined) {
        await finishDelete(stream, tail.kurrent);
        continue;
      }
      if (encoded.length === 0) {
        if (expected !== "any" && expected !== tail.revision)
          throw new WrongExpectedRevisionError(stream, expected, tail.revision);
        return tail.revision === "no_stream" ? -1 : tail.revision;
      }
      if (expected !== "any" && expected !== tail.revision) {
        if (tails.has(stream) && attempt === 0) {
          tails.delete(stream);
          continue;
        }
        const from = expected === "no_stream" ? 0 : expected + 1;
        if (await storedAlready(stream, from, encoded)) return from + encoded.length - 1;
        throw new WrongExpectedRevisionError(stream, expected, tail.revision);
      }
      const first = tail.revision === "no_stream" ? 0 : tail.revision + 1;
      let groups: PlannedEvent[][];
      try {
        groups = groupAppends(planBatch(encoded, first, maxEventBytes, `${stream}\n${tail.kurrent}`), maxAppendBytes);
      } catch (error) {
        const bytes = encoded.reduce((n, e) => n + e.json.length + (e.blob?.byteLength ?? 0) + e.metadata.length, 0);
        throw new EntryTooLargeError(stream, bytes, maxEventBytes, { cause: error });
      }
      if (tail.revision === "no_stream") await listCreated(stream);
      try {
        const last = await writeChain(stream, groups, tail.kurrent);
        const count = groups.reduce((n, g) => n + g.length, 0);
        tails.set(stream, { revision: first + encoded.length - 1, kurrent: last, fenced: false });
        if (first === 0) starts.delete(stream);
        indexOwn(stream, encoded, entries, first, last - BigInt(count - 1), groups.flat());
        return first + encoded.length - 1;
      } catch (error) {
        if (!isWrongVersion(error)) throw error;
        tails.delete(stream);
        const torn = (error as { torn?: boolean }).torn === true;
        if (torn || attempt >= APPEND_ATTEMPTS) {
          const actual = await tailOf(stream);
          throw new WrongExpectedRevisionError(stream, expected, actual.revision, { cause: error });
        }
      }
    }
  };

  /** Applies this store's own append to the listing, with the KurrentDB revision of each entry's last event. */
  const indexOwn = (
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
      listing.apply(recorded, kurrent);
    });
  };

  /** Reads whole batches from `from`, calling `each` for every entry at or after it until it returns false. */
  const readAssembled = async (
    stream: string,
    from: number,
    each: (assembled: AssembledEntry) => boolean,
  ): Promise<boolean> => {
    const start = startFor(stream, from);
    const assembler = createAssembler();
    try {
      for await (const resolved of client.readStream(stream, { direction: "forwards", fromRevision: start })) {
        if (resolved.event === undefined) continue;
        for (const assembled of assembler.push(resolved.event)) {
          noteStart(stream, assembled);
          if (assembled.entry.revision >= from && !each(assembled)) return false;
        }
      }
    } catch (error) {
      if (!(error instanceof StreamNotFoundError)) throw error;
    }
    return assembler.fenced;
  };

  const read = async (stream: string, from = 0, limit?: number): Promise<RecordedEntry[]> => {
    if (closed) throw new EventStoreClosedError(`read stream ${stream}`);
    const out: RecordedEntry[] = [];
    if (limit !== undefined && limit <= 0) return out;
    let whole = true;
    const fencedAtEnd = await readAssembled(stream, from, (assembled) => {
      out.push(assembled.entry);
      whole = limit === undefined || out.length < limit;
      return whole;
    });
    // A fence as the last event: a delete under way (or cut short), and the stream reads as deleted.
    const fenced = whole ? fencedAtEnd : out.length > 0 && (tails.get(stream) ?? (await tailOf(stream))).fenced;
    return fenced ? [] : out;
  };

  const subscribe = (stream: string, from?: number): Observable<RecordedEntry> =>
    new Observable<RecordedEntry>((subscriber) => {
      if (closed) {
        subscriber.error(new EventStoreClosedError(`subscribe to ${stream}`));
        return;
      }
      const all = stream === "$all";
      const start = from ?? (all ? 1 : 0);
      const subscription = all
        ? client.subscribeToAll({ fromPosition: "start", filter: excludeSystemEvents() })
        : client.subscribeToStream(stream, { fromRevision: catchUpFrom(startFor(stream, start)) });
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
        if (!closed) subscriber.error(error);
      });
      // On close, what was stored is delivered first (bounded: a server before 23.10 never says caughtUp).
      const complete = async (): Promise<void> => {
        if (!caught) await Promise.race([caughtUp, delay(CAUGHT_UP_WAIT_MS)]);
        subscriber.complete();
      };
      completers.add(complete);
      return () => {
        completers.delete(complete);
        void subscription.unsubscribe();
      };
    });

  /** Reads the listing stream, then every live stream it names, into the listing. */
  const readListing = async (): Promise<void> => {
    const named: { type: string; stream: string }[] = [];
    try {
      for await (const resolved of client.readStream(LISTING_STREAM, {
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
      const fenced = await readAssembled(stream, 0, (assembled) => entries.push(assembled) > 0);
      if (entries.length === 0 || fenced) continue;
      for (const { entry, lastRevision } of entries) listing.apply(entry, lastRevision);
    }
  };

  await readListing();
  // What other stores append from now on: $all from its end, system events excluded by the server.
  const follower = client.subscribeToAll({ fromPosition: "end", filter: excludeSystemEvents() });
  const followed = new Map<string, ReturnType<typeof createAssembler>>();
  follower.on("data", (resolved) => {
    const event = resolved.event;
    if (event === undefined || event.streamId.startsWith("$")) return;
    if (event.streamId === LISTING_STREAM) {
      const data = dataOfJson(event.data);
      if (event.type === STREAM_DELETED && typeof data?.stream === "string") {
        listing.drop(data.stream);
        tails.delete(data.stream);
        starts.delete(data.stream);
      }
      return;
    }
    const assembler = followed.get(event.streamId) ?? createAssembler();
    followed.set(event.streamId, assembler);
    for (const { entry, lastRevision } of assembler.push(event)) listing.apply(entry, lastRevision);
  });
  follower.on("error", () => undefined);

  const listStreams = async (prefix: string) => {
    if (closed) throw new EventStoreClosedError(`list streams with prefix ${prefix}`);
    return listing.streams(prefix);
  };

  /** In memory: this store's appends at once, other stores' a moment after they settle (from `$all`). */
  const listSummaries = async (query: SummaryQuery): Promise<SummaryPage> => {
    if (closed) throw new EventStoreClosedError(`list summaries with prefix ${query.prefix}`);
    return selectSummaries(listing.summaries(query.prefix), query);
  };

  /** Folds the summaries again: the listing stream, then every live stream, read from the start. */
  const rebuildSummaries = async (): Promise<number> => {
    if (closed) throw new EventStoreClosedError("rebuild the summaries");
    listing.clear();
    await readListing();
    return listing.size;
  };

  const deleteStream = async (stream: string): Promise<boolean> => {
    if (closed) throw new EventStoreClosedError(`delete stream ${stream}`);
    for (let attempt = 0; ; attempt += 1) {
      const tail = await tailOf(stream);
      if (tail.kurrent === undefined) return false;
      if (tail.fenced) {
        await finishDelete(stream, tail.kurrent);
        return false;
      }
      if (tail.revision === "no_stream") return false;
      try {
        const fence = toEventData(planFence(`${stream}\n${tail.kurrent}`));
        const result = await client.appendToStream(stream, [fence], { streamState: tail.kurrent });
        await finishDelete(stream, result.nextExpectedRevision);
      } catch (error) {
        if (isWrongVersion(error) && attempt < APPEND_ATTEMPTS) continue;
        throw error;
      }
      await client.appendToStream(LISTING_STREAM, [jsonEvent({ type: STREAM_DELETED, data: { stream } })], {
        streamState: "any",
      });
      listing.drop(stream);
      starts.delete(stream);
      tails.set(stream, NOT_FOUND);
      return true;
    }
  };

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await Promise.all([...completers].map((complete) => complete()));
    completers.clear();
    await follower.unsubscribe().catch(() => undefined);
    await client.dispose();
  };

  return { append, read, subscribe, listStreams, listSummaries, rebuildSummaries, deleteStream, close };
}

/** A subscription's `fromRevision` for a catch-up from KurrentDB revision `start` (it starts after what it is given). */
const catchUpFrom = (start: bigint | "start"): bigint | "start" =>
  start === "start" || start === 0n ? "start" : start - 1n;

/** A JSON event's data as the client gives it (parsed), or its bytes parsed. */
function dataOfJson(data: unknown): { stream?: unknown } | undefined {
  if (data instanceof Uint8Array) {
    try {
      return JSON.parse(Buffer.from(data).toString("utf8"));
    } catch {
      return undefined;
    }
  }
  return typeof data === "object" && data !== null ? (data as { stream?: unknown }) : undefined;
}
