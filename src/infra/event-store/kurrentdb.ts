import { createHash, randomUUID } from "node:crypto";
import {
  ANY,
  binaryEvent,
  excludeSystemEvents,
  FORWARDS,
  KurrentDBClient,
  MaxAppendSizeExceededError,
  NO_STREAM,
  type Position,
  START,
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
  type StreamInfo,
  type SummaryPage,
  type SummaryQuery,
  WrongExpectedRevisionError,
} from "../../engine/ports/event-store.ts";
import {
  initialSessionSummary,
  reduceSessionSummary,
  type SessionSummaryState,
  summaryRowOf,
} from "../../projections/session-summary.ts";
import { decodeData, type EncodedEntry, encodeEntries } from "./codec.ts";
import { EventStoreClosedError } from "./sqlite.ts";
import { selectSummaries } from "./summary-query.ts";

/** Options of `createKurrentDbEventStore`. */
export interface KurrentDbEventStoreOptions {
  /** The client's connection string: `kurrentdb://host:2113?tls=false` (`esdb://` too). */
  readonly url: string;
}

const ALL = "$all";

/**
 * An entry as a KurrentDB binary event's data: the length of its JSON (4 bytes, big-endian), the JSON of
 * `encodeData`, then its binary values. The metadata goes as the event's metadata, JSON bytes.
 */
const frame = (entry: EncodedEntry): Uint8Array => {
  const json = Buffer.from(entry.json, "utf8");
  const out = Buffer.alloc(4 + json.byteLength + (entry.blob?.byteLength ?? 0));
  out.writeUInt32BE(json.byteLength, 0);
  json.copy(out, 4);
  if (entry.blob !== null) out.set(entry.blob, 4 + json.byteLength);
  return out;
};

const unframe = (bytes: Uint8Array): unknown => {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const length = view.readUInt32BE(0);
  const json = view.subarray(4, 4 + length).toString("utf8");
  const blob = view.byteLength > 4 + length ? new Uint8Array(view.subarray(4 + length)) : null;
  return decodeData({ json, blob: json.includes('"$bin"') ? (blob ?? new Uint8Array(0)) : blob });
};

/**
 * The id of an entry's event: derived from the stream, the expected revision, its place in the batch and its
 * content, so that an append repeated after a lost reply carries the same ids and KurrentDB stores it once
 * (its idempotent writes); random for `any`, where KurrentDB does not promise idempotence.
 */
const eventId = (stream: string, expected: ExpectedRevision, index: number, entry: EncodedEntry): string => {
  if (expected === "any") return randomUUID();
  const hash = createHash("sha256")
    .update(`${stream}\n${String(expected)}\n${index}\n${entry.type}\n${entry.metadata}\n${entry.json}\n`)
    .update(entry.blob ?? new Uint8Array(0))
    .digest("hex");
  // A version-4-shaped UUID (the server only needs 128 bits in UUID form).
  const variant = ((Number.parseInt(hash.slice(16, 18), 16) & 0x3f) | 0x80).toString(16);
  return `${hash.slice(0, 8)}-${hash.slice(8, 12)}-4${hash.slice(13, 16)}-${variant}${hash.slice(18, 20)}-${hash.slice(20, 32)}`;
};

/** KurrentDB's position in its log (`commit`), as this port's 1-based global position. */
const positionOf = (position: Position | undefined): number => Number(position?.commit ?? 0n) + 1;

interface KurrentEvent {
  readonly streamId: string;
  readonly revision: bigint;
  readonly type: string;
  readonly data: unknown;
  readonly metadata: unknown;
  readonly position?: Position;
}

const toRecorded = (event: KurrentEvent): RecordedEntry => {
  const metadata =
    event.metadata instanceof Uint8Array
      ? JSON.parse(Buffer.from(event.metadata).toString("utf8"))
      : (event.metadata as RecordedEntry["metadata"]);
  return {
    stream: event.streamId,
    revision: Number(event.revision),
    position: positionOf(event.position),
    type: event.type,
    data: unframe(event.data as Uint8Array),
    metadata,
  };
};

/**
 * The KurrentDB EventStore adapter (issue 22, part 3; KurrentDB is EventStoreDB renamed, and
 * `@kurrent/kurrentdb-client` the maintained successor of the design card's `@eventstore/db-client`): a stream per
 * session, appends with the expected stream state (a revision, `no_stream`, `any`), each entry a binary event
 * (`frame`), deterministic event ids for idempotent retries, catch-up subscriptions (`subscribeToStream`,
 * `subscribeToAll`), and the stream list kept by a subscription to `$all` (system events excluded) that is read
 * from the start when the store opens.
 *
 * Tested only where a KurrentDB server is reachable (`KURRENTDB_URL`, test/infra/kurrentdb-event-store.test.ts): none
 * can be installed on the machines this project is built on. KurrentDB refuses an append over its `MaxAppendSize`
 * (1 MiB by default): raise it for sessions that send large audio appends; the refusal is an `EntryTooLargeError`.
 *
 * @throws Error from the client when the server cannot be reached (from the factory).
 */
export async function createKurrentDbEventStore(options: KurrentDbEventStoreOptions): Promise<EventStore> {
  const client = KurrentDBClient.connectionString(options.url);
  let closed = false;
  const completers = new Set<() => void>();

  // The stream list: every stream's last revision, first position and first and last `metadata.at`; and its
  // summary (the sessionSummary fold of its entries), both kept in memory from `$all`.
  const streams = new Map<string, { revision: number; firstPosition: number; firstAt: number; lastAt: number }>();
  let summaries = new Map<string, SessionSummaryState>();
  const index = (entry: RecordedEntry): void => {
    const at = entry.metadata.at;
    const known = streams.get(entry.stream);
    if (known === undefined || entry.revision === 0) {
      streams.set(entry.stream, { revision: entry.revision, firstPosition: entry.position, firstAt: at, lastAt: at });
      summaries.set(entry.stream, reduceSessionSummary(initialSessionSummary, entry));
    } else if (entry.revision > known.revision) {
      streams.set(entry.stream, { ...known, revision: entry.revision, lastAt: at });
      summaries.set(entry.stream, reduceSessionSummary(summaries.get(entry.stream) ?? initialSessionSummary, entry));
    }
  };
  /** Reads `$all` from the start into the stream list and the summaries; the position of the last event read. */
  const readIndex = async (): Promise<Position | undefined> => {
    let last: Position | undefined;
    for await (const resolved of client.readAll({ direction: FORWARDS, fromPosition: START })) {
      const event = resolved.event as KurrentEvent | undefined;
      if (event === undefined || event.streamId.startsWith("$") || event.type.startsWith("$")) continue;
      index(toRecorded(event));
      last = event.position;
    }
    return last;
  };
  const indexed = await readIndex();
  const indexer = client.subscribeToAll({
    fromPosition: indexed ?? START,
    filter: excludeSystemEvents(),
  });
  indexer.on("data", (resolved) => {
    const event = resolved.event as KurrentEvent | undefined;
    if (event !== undefined && !event.streamId.startsWith("$")) index(toRecorded(event));
  });
  indexer.on("error", () => undefined);

  const stateOf = (expected: ExpectedRevision) =>
    expected === "any" ? ANY : expected === "no_stream" ? NO_STREAM : BigInt(expected);

  const lastRevision = async (stream: string): Promise<number | "no_stream"> => {
    try {
      for await (const resolved of client.readStream(stream, {
        direction: "backwards",
        fromRevision: "end",
        maxCount: 1,
      }))
        return Number((resolved.event as KurrentEvent).revision);
    } catch (error) {
      if (!(error instanceof StreamNotFoundError)) throw error;
    }
    return "no_stream";
  };

  const append = async (stream: string, entries: readonly NewEntry[], expected: ExpectedRevision): Promise<number> => {
    if (closed) throw new EventStoreClosedError(`append to stream ${stream}`);
    if (stream === ALL) throw new Error(`cannot append to stream ${ALL}: it names every stream in subscribe`);
    const encoded = encodeEntries(stream, entries);
    if (encoded.length === 0) {
      const actual = await lastRevision(stream);
      if (expected !== "any" && expected !== actual) throw new WrongExpectedRevisionError(stream, expected, actual);
      return actual === "no_stream" ? -1 : actual;
    }
    try {
      const result = await client.appendToStream(
        stream,
        encoded.map((entry, i) =>
          binaryEvent({
            id: eventId(stream, expected, i, entry),
            type: entry.type,
            data: frame(entry),
            metadata: Buffer.from(entry.metadata, "utf8"),
          }),
        ),
        { streamState: stateOf(expected) },
      );
      return Number(result.nextExpectedRevision);
    } catch (error) {
      if (error instanceof WrongExpectedVersionError) {
        const actual = error.actualState;
        throw new WrongExpectedRevisionError(
          stream,
          expected,
          typeof actual === "bigint" ? Number(actual) : "no_stream",
          { cause: error },
        );
      }
      if (error instanceof MaxAppendSizeExceededError) {
        const bytes = encoded.reduce((n, e) => n + e.json.length + (e.blob?.byteLength ?? 0) + e.metadata.length, 0);
        throw new EntryTooLargeError(stream, bytes, error.maxAppendSize, { cause: error });
      }
      throw error;
    }
  };

  const read = async (stream: string, from = 0, limit?: number): Promise<RecordedEntry[]> => {
    if (closed) throw new EventStoreClosedError(`read stream ${stream}`);
    const out: RecordedEntry[] = [];
    try {
      const options = { fromRevision: BigInt(from), ...(limit === undefined ? {} : { maxCount: limit }) };
      for await (const resolved of client.readStream(stream, { direction: FORWARDS, ...options }))
        if (resolved.event !== undefined) out.push(toRecorded(resolved.event as KurrentEvent));
    } catch (error) {
      if (!(error instanceof StreamNotFoundError)) throw error;
    }
    return out;
  };

  const subscribe = (stream: string, from?: number): Observable<RecordedEntry> =>
    new Observable<RecordedEntry>((subscriber) => {
      if (closed) {
        subscriber.error(new EventStoreClosedError(`subscribe to ${stream}`));
        return;
      }
      const all = stream === ALL;
      // KurrentDB's subscriptions start after the revision or position they are given: from the start, and what
      // lies before `from` is skipped here.
      const start = from ?? (all ? 1 : 0);
      const subscription = all
        ? client.subscribeToAll({ fromPosition: START, filter: excludeSystemEvents() })
        : client.subscribeToStream(stream, { fromRevision: start === 0 ? START : BigInt(start - 1) });
      subscription.on("data", (resolved) => {
        const event = resolved.event as KurrentEvent | undefined;
        if (event === undefined || event.streamId.startsWith("$")) return;
        const entry = toRecorded(event);
        if ((all ? entry.position : entry.revision) >= start) subscriber.next(entry);
      });
      subscription.on("error", (error) => {
        if (!closed) subscriber.error(error);
      });
      const complete = (): void => subscriber.complete();
      completers.add(complete);
      return () => {
        completers.delete(complete);
        void subscription.unsubscribe();
      };
    });

  const listStreams = async (prefix: string): Promise<StreamInfo[]> => {
    if (closed) throw new EventStoreClosedError(`list streams with prefix ${prefix}`);
    return [...streams.entries()]
      .filter(([name]) => name.startsWith(prefix))
      .sort((a, b) => a[1].firstPosition - b[1].firstPosition)
      .map(([name, s]) => ({
        stream: name,
        revision: s.revision,
        count: s.revision + 1,
        firstAt: s.firstAt,
        lastAt: s.lastAt,
      }));
  };

  /** In memory: the summaries that `$all` delivered (appends of this instance reach them a moment after they settle). */
  const listSummaries = async (query: SummaryQuery): Promise<SummaryPage> => {
    if (closed) throw new EventStoreClosedError(`list summaries with prefix ${query.prefix}`);
    const rows = [...summaries]
      .filter(([name]) => name.startsWith(query.prefix))
      .map(([name, state]) => ({ stream: name, firstAt: state.firstAt, summary: summaryRowOf(state) }));
    return selectSummaries(rows, query);
  };

  /** Folds the summaries again from `$all`, read from the start (the live index goes on meanwhile). */
  const rebuildSummaries = async (): Promise<number> => {
    if (closed) throw new EventStoreClosedError("rebuild the summaries");
    summaries = new Map();
    streams.clear();
    await readIndex();
    return summaries.size;
  };

  const deleteStream = async (stream: string): Promise<boolean> => {
    if (closed) throw new EventStoreClosedError(`delete stream ${stream}`);
    if ((await lastRevision(stream)) === "no_stream") return false;
    await client.deleteStream(stream);
    streams.delete(stream);
    summaries.delete(stream);
    return true;
  };

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    for (const complete of [...completers]) complete();
    completers.clear();
    await indexer.unsubscribe().catch(() => undefined);
    await client.dispose();
  };

  return { append, read, subscribe, listStreams, listSummaries, rebuildSummaries, deleteStream, close };
}
