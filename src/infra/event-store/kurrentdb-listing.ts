import type { RecordedEntry, StreamInfo, StreamSummary } from "../../engine/ports/event-store.ts";
import {
  initialSessionSummary,
  reduceSessionSummary,
  type SessionSummaryState,
  summaryRowOf,
} from "../../projections/session-summary.ts";

/**
 * The stream of the KurrentDB adapter's own listing (issue 33, part 6): one small event per stream created
 * (`StreamCreated`) or deleted (`StreamDeleted`), data `{"stream": NAME}` as JSON. The listing is read from it, never
 * from `$all` (which keeps a soft-deleted stream's events until a scavenge: KurrentDB docs, "Deleting streams and
 * events"), nor from `$ce-` (the `$by_category` system projection, off unless the server runs with
 * `--run-projections=all --start-standard-projections`).
 */
export const LISTING_STREAM = "duplex-sessions";
export const STREAM_CREATED = "StreamCreated";
export const STREAM_DELETED = "StreamDeleted";

interface Listed {
  /** Creation order: the place of its (last) creation among all streams. */
  readonly seq: number;
  readonly revision: number;
  /** The KurrentDB revision of the last event applied: an entry already applied (echoed by `$all`) is skipped. */
  readonly applied: bigint;
  readonly firstAt: number;
  readonly lastAt: number;
  readonly summary: SessionSummaryState;
}

/**
 * The listing in memory: each live stream's revision, times (`metadata.at`, ms) and summary (the `sessionSummary`
 * fold), in creation order. `apply` takes entries as they are stored (those of this store at once, the others' from
 * `$all`), each once: an entry at or before the KurrentDB revision already applied is skipped, and revision 0 starts
 * the stream anew (a stream made again after a delete).
 */
export function createListing() {
  const streams = new Map<string, Listed>();
  let seq = 0;
  const apply = (entry: RecordedEntry, kurrentRevision: bigint): void => {
    const known = streams.get(entry.stream);
    if (known !== undefined && kurrentRevision <= known.applied) return;
    const at = entry.metadata.at;
    if (known === undefined || entry.revision === 0) {
      seq += 1;
      streams.set(entry.stream, {
        seq,
        revision: entry.revision,
        applied: kurrentRevision,
        firstAt: at,
        lastAt: at,
        summary: reduceSessionSummary(initialSessionSummary, entry),
      });
    } else if (entry.revision === known.revision + 1) {
      streams.set(entry.stream, {
        ...known,
        revision: entry.revision,
        applied: kurrentRevision,
        lastAt: at,
        summary: reduceSessionSummary(known.summary, entry),
      });
    }
  };
  const sorted = (prefix: string) =>
    [...streams.entries()].filter(([name]) => name.startsWith(prefix)).sort((a, b) => a[1].seq - b[1].seq);
  return {
    apply,
    drop: (stream: string): void => void streams.delete(stream),
    clear: (): void => streams.clear(),
    get size(): number {
      return streams.size;
    },
    streams: (prefix: string): StreamInfo[] =>
      sorted(prefix).map(([stream, s]) => ({
        stream,
        revision: s.revision,
        count: s.revision + 1,
        firstAt: s.firstAt,
        lastAt: s.lastAt,
      })),
    summaries: (prefix: string): StreamSummary[] =>
      sorted(prefix).map(([stream, s]) => ({ stream, firstAt: s.summary.firstAt, summary: summaryRowOf(s.summary) })),
  };
}

/**
 * The live streams named by the listing stream's events, in order of their last creation: a `StreamDeleted` drops
 * the stream until a later `StreamCreated`; a repeated `StreamCreated` (a retried creation) keeps the first place.
 */
export function liveStreams(events: readonly { type: string; stream: string }[]): string[] {
  const live = new Map<string, number>();
  events.forEach((event, i) => {
    if (event.type === STREAM_DELETED) live.delete(event.stream);
    else if (event.type === STREAM_CREATED && !live.has(event.stream)) live.set(event.stream, i);
  });
  return [...live.entries()].sort((a, b) => a[1] - b[1]).map(([stream]) => stream);
}
