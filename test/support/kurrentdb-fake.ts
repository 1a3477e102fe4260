import type { AppendResult, DeleteResult, Position } from "@kurrent/kurrentdb-client";
import { MaxAppendSizeExceededError, StreamNotFoundError, WrongExpectedVersionError } from "@kurrent/kurrentdb-client";
import type {
  KurrentClient,
  KurrentEventData,
  KurrentSubscription,
} from "../../src/infra/event-store/kurrentdb-client.ts";
import type { StoredEvent } from "../../src/infra/event-store/kurrentdb-frames.ts";

/**
 * An in-memory KurrentDB behind the part of the client the adapter uses (`KurrentClient`), following the server as
 * documented. Each rule names its source:
 * - [D] KurrentDB docs, "Deleting streams and events" (server docs, v24.10+ and the EventStoreDB page before it).
 * - [T] KurrentDB-Client-Dotnet, test/KurrentDB.Client.Tests/Streams/SoftDeleteTests.cs (the official client's tests
 *   against a real server).
 * - [R] KurrentDB 24.10.4 release notes: `MaxAppendSize` "limits the size of entire append requests over gRPC", and
 *   an event's size counts its data, metadata and type.
 * - [C] @kurrent/kurrentdb-client 1.x typings: a subscription's `fromRevision` is where it starts after; errors are
 *   the client's classes (`StreamNotFoundError`, `WrongExpectedVersionError`, `MaxAppendSizeExceededError`).
 *
 * Not modelled: scavenging, `$maxCount`/`$maxAge`, hard deletes (tombstones), the server's idempotency window (the
 * adapter does not rely on it: it compares stored entries itself), links and projections (`$ce-` is off by default).
 */
export interface FakeKurrent extends KurrentClient {
  /** Every event appended, system ones included (`$$stream` metadata on deletes), in log order. */
  readonly log: readonly StoredEvent[];
  /** How many append requests reached the fake, by stream. */
  readonly appends: ReadonlyMap<string, number>;
  /** Makes the `n`th append request from now on (1-based) fail with a connection error before it is stored. */
  failAppend(n: number): void;
}

interface FakeStream {
  readonly events: StoredEvent[];
  /** Truncate before: events under it are not read [D]. `MAX` when soft-deleted. */
  tb: bigint;
}

const SOFT_DELETED = 2n ** 63n - 1n;

/** A fake KurrentDB client; `maxAppendSize` is the server's `MaxAppendSize` (bytes, default 1 MiB [R]). */
export function createFakeKurrent(options: { maxAppendSize?: number } = {}): FakeKurrent {
  const maxAppendSize = options.maxAppendSize ?? 1024 * 1024;
  const streams = new Map<string, FakeStream>();
  const log: StoredEvent[] = [];
  const appends = new Map<string, number>();
  const live = new Set<(event: StoredEvent) => void>();
  let prepare = 0n;
  let failIn = 0;

  const sizeOf = (e: KurrentEventData): number => {
    const bytes = (v: unknown) =>
      v === undefined ? 0 : v instanceof Uint8Array ? v.byteLength : Buffer.byteLength(JSON.stringify(v));
    return bytes(e.data) + bytes(e.metadata) + Buffer.byteLength(e.type);
  };
  const lastOf = (s: FakeStream): bigint => BigInt(s.events.length - 1);
  const write = (streamId: string, events: readonly KurrentEventData[], s: FakeStream): Position => {
    // The events of one append share a commit position; each has its own prepare position.
    const commit = prepare;
    let position: Position = { commit, prepare };
    for (const e of events) {
      position = { commit, prepare };
      const stored: StoredEvent = {
        streamId,
        revision: BigInt(s.events.length),
        type: e.type,
        data: e.data,
        metadata: e.metadata,
        position,
      };
      s.events.push(stored);
      log.push(stored);
      prepare += 100n;
      for (const listener of live) listener(stored);
    }
    return position;
  };
  const metadataEvent = (stream: string, tb: bigint): void => {
    const meta: FakeStream = streams.get(`$$${stream}`) ?? { events: [], tb: 0n };
    streams.set(`$$${stream}`, meta);
    write(
      `$$${stream}`,
      [{ id: "", contentType: "application/json", type: "$metadata", data: { $tb: String(tb) } }],
      meta,
    );
  };

  const appendToStream: KurrentClient["appendToStream"] = async (stream, events, { streamState }) => {
    await Promise.resolve();
    appends.set(stream, (appends.get(stream) ?? 0) + 1);
    if (failIn > 0 && --failIn === 0) throw new Error("14 UNAVAILABLE: connection dropped (fake)");
    // [R] the whole request counts: data, metadata and type of every event.
    if (events.reduce((n, e) => n + sizeOf(e), 0) > maxAppendSize)
      throw MaxAppendSizeExceededError.fromMaxAppendSize(maxAppendSize);
    const s = streams.get(stream);
    const deleted = s !== undefined && s.tb === SOFT_DELETED;
    const current = s === undefined ? "no_stream" : lastOf(s);
    // [T] a soft-deleted stream takes `no_stream`, `any` or its last revision, and is made again
    // (recreated_with_any_expected_version, recreated_with_expected_version); `no_stream` only on that first write
    // (allows_recreating_for_first_write_only_throws_wrong_expected_version).
    const ok =
      streamState === "any" ||
      (streamState === "no_stream" && (s === undefined || deleted)) ||
      (typeof streamState === "bigint" && s !== undefined && lastOf(s) === streamState);
    if (!ok) {
      throw new WrongExpectedVersionError(undefined, { streamName: stream, current, expected: streamState } as never);
    }
    const target = s ?? { events: [], tb: 0n };
    streams.set(stream, target);
    if (deleted) {
      // [D] "continuing from where it left off": the next event is the last revision + 1, and only events from it
      // on are read; [T] `$tb` becomes that revision.
      target.tb = BigInt(target.events.length);
      metadataEvent(stream, target.tb);
    }
    const position = write(stream, events, target);
    return { success: true, nextExpectedRevision: lastOf(target), position } as AppendResult;
  };

  async function* readStream(
    stream: string,
    { direction, fromRevision, maxCount }: Parameters<KurrentClient["readStream"]>[1],
  ): AsyncGenerator<{ event: StoredEvent }> {
    await Promise.resolve();
    const s = streams.get(stream);
    // [D] "When you read a soft deleted stream, the read returns a StreamNotFound".
    if (s === undefined || s.tb === SOFT_DELETED) throw new StreamNotFoundError(undefined, stream);
    const visible = s.events.filter((e) => e.revision >= s.tb);
    const ordered =
      direction === "forwards"
        ? visible.filter((e) => fromRevision === "start" || fromRevision === "end" || e.revision >= fromRevision)
        : [...visible]
            .reverse()
            .filter((e) => fromRevision === "end" || fromRevision === "start" || e.revision <= fromRevision);
    let n = 0;
    for (const event of direction === "forwards" && fromRevision === "end" ? [] : ordered) {
      if (maxCount !== undefined && n >= maxCount) return;
      n += 1;
      yield { event };
    }
  }

  const subscription = (catchUp: () => StoredEvent[], wanted: (event: StoredEvent) => boolean): KurrentSubscription => {
    const listeners: ((resolved: { event: StoredEvent }) => void)[] = [];
    const caughtUp: (() => void)[] = [];
    const queue: (StoredEvent | "caughtUp")[] = [];
    let stopped = false;
    let scheduled = false;
    const drain = (): void => {
      scheduled = false;
      while (!stopped && queue.length > 0) {
        const event = queue.shift() as StoredEvent | "caughtUp";
        if (event === "caughtUp") for (const listener of caughtUp) listener();
        else for (const listener of listeners) listener({ event });
      }
    };
    const enqueue = (event: StoredEvent | "caughtUp"): void => {
      if (event !== "caughtUp" && !wanted(event)) return;
      queue.push(event);
      if (!scheduled) {
        scheduled = true;
        setImmediate(drain);
      }
    };
    // Catch-up and live in one order: what is stored now, then what is appended later.
    // [C] a catch-up subscription says `caughtUp` once the stored events are delivered.
    for (const event of catchUp()) enqueue(event);
    enqueue("caughtUp");
    live.add(enqueue);
    const sub: KurrentSubscription = {
      on(event: "data" | "error" | "caughtUp", listener: never) {
        if (event === "data") listeners.push(listener);
        if (event === "caughtUp") caughtUp.push(listener);
        return sub;
      },
      async unsubscribe() {
        stopped = true;
        live.delete(enqueue);
      },
    } as KurrentSubscription;
    return sub;
  };

  const subscribeToStream: KurrentClient["subscribeToStream"] = (stream, { fromRevision }) => {
    const after = fromRevision === "start" ? -1n : fromRevision === "end" ? undefined : fromRevision;
    const visible = (e: StoredEvent): boolean => {
      const s = streams.get(stream);
      return e.streamId === stream && s !== undefined && e.revision >= s.tb;
    };
    return subscription(
      () => {
        const s = streams.get(stream);
        if (s === undefined || after === undefined) return [];
        // [C] it starts after `fromRevision`.
        return s.events.filter((e) => visible(e) && e.revision > after);
      },
      (e) => e.streamId === stream,
    );
  };

  const subscribeToAll: KurrentClient["subscribeToAll"] = ({ fromPosition, filter }) => {
    // excludeSystemEvents() is an event-type filter with the regex "^[^$].*" [C].
    const regex = (filter as { regex?: string } | undefined)?.regex;
    const pass = (e: StoredEvent): boolean => regex === undefined || new RegExp(regex).test(e.type);
    // [D] "$all bypasses the index": events of soft-deleted streams are still delivered.
    return subscription(() => (fromPosition === "start" ? log.filter(pass) : []), pass);
  };

  const deleteStream: KurrentClient["deleteStream"] = async (stream, options) => {
    await Promise.resolve();
    const s = streams.get(stream);
    const expected = options?.expectedRevision ?? "any";
    const current = s === undefined || s.tb === SOFT_DELETED ? "no_stream" : lastOf(s);
    if (typeof expected === "bigint" && current !== expected)
      throw new WrongExpectedVersionError(undefined, { streamName: stream, current, expected } as never);
    if (s === undefined) throw new StreamNotFoundError(undefined, stream);
    // [D] a soft delete sets the stream's truncate-before; the events stay (and in $all) until a scavenge.
    s.tb = SOFT_DELETED;
    metadataEvent(stream, SOFT_DELETED);
    return {} as DeleteResult;
  };

  return {
    log,
    appends,
    failAppend: (n: number) => {
      failIn = n;
    },
    appendToStream,
    readStream,
    subscribeToStream,
    subscribeToAll,
    deleteStream,
    // The fake is the server too: a client's dispose leaves it for the next store opened on it.
    dispose: async () => undefined,
  };
}
