import type { Observable } from "rxjs";
import type { SessionSummaryRow } from "../../projections/session-summary.ts";

/**
 * Metadata of every log entry. `at` is the engine's clock when the input arrived (ms since the Unix epoch);
 * `epoch` and `turnId` are the session's fence after the entry. Adapters store extra keys untouched.
 * See DESIGN.md, "The session stream".
 */
export interface EntryMetadata {
  readonly at: number;
  readonly epoch: number;
  readonly turnId: number;
  readonly [key: string]: unknown;
}

/**
 * One entry to append. `data` is any JSON-compatible value in which `Uint8Array` values may appear at any depth;
 * adapters store those as binary (never base64 inside the log) and give them back as `Uint8Array`.
 */
export interface NewEntry {
  readonly type: string;
  readonly data: unknown;
  readonly metadata: EntryMetadata;
}

/** An entry as read back: its stream, its revision in the stream (0-based) and its global position (1-based). */
export interface RecordedEntry extends NewEntry {
  readonly stream: string;
  readonly revision: number;
  readonly position: number;
}

/**
 * What the caller believes the stream's last revision is: a revision number (0-based), `"no_stream"` (the stream
 * must not exist yet) or `"any"` (no check).
 */
export type ExpectedRevision = number | "no_stream" | "any";

/** A summary of one stream, for listings. Times are ms since the Unix epoch, from the entries' `metadata.at`. */
export interface StreamInfo {
  readonly stream: string;
  readonly revision: number;
  readonly count: number;
  readonly firstAt: number;
  readonly lastAt: number;
}

/**
 * One stream's summary as the store keeps it: the `sessionSummary` projection (src/projections/session-summary.ts)
 * of its entries, folded as they are appended. `firstAt` (ms, the first entry's `metadata.at`) and `stream` are the
 * list's order and its cursor.
 */
export interface StreamSummary {
  readonly stream: string;
  readonly firstAt: number;
  readonly summary: SessionSummaryRow;
}

/**
 * Which summaries `listSummaries` gives, in which order, from where. Every filter is optional; a row passes when it
 * passes all of them.
 */
export interface SummaryQuery {
  /** Streams whose name starts with it (`session-`). */
  readonly prefix: string;
  /** The first word of `summary.state` (`open`, `detached`, `closed`, `expired`, `failed`, `unused`, ...). */
  readonly state?: string;
  /** `summary.model`, exactly. */
  readonly model?: string;
  /** A code among `summary.error_codes`. */
  readonly error?: string;
  /** `firstAt` at or after / at or before, ms since the Unix epoch. */
  readonly since?: number;
  readonly until?: number;
  /** By `firstAt`, then by stream name (code-point order); `desc` reverses both. Default `asc`. */
  readonly order?: "asc" | "desc";
  /** The last row of the page before: the page starts with the first row after it in `order`. */
  readonly after?: { readonly firstAt: number; readonly stream: string };
  /** The most rows, at least 1. */
  readonly limit: number;
}

/** A page of summaries: `hasMore` is true only when another row passes the same filters after the last one. */
export interface SummaryPage {
  readonly summaries: readonly StreamSummary[];
  readonly hasMore: boolean;
}

/**
 * Thrown by `append` when the stream's actual revision differs from the expected one (optimistic concurrency).
 * Adapters translate their driver's error into this one (STYLE.md, "Adapters translate driver errors").
 */
export class WrongExpectedRevisionError extends Error {
  readonly code = "wrong_expected_revision";
  constructor(
    readonly stream: string,
    readonly expected: ExpectedRevision,
    readonly actual: number | "no_stream",
    options?: { cause?: unknown },
  ) {
    super(`stream ${stream}: expected revision ${String(expected)}, found ${String(actual)}`, options);
    this.name = "WrongExpectedRevisionError";
  }
}

/**
 * The most bytes one entry may take as stored: its data's JSON, its binary values and its metadata's JSON. Above
 * every entry the protocol can cause (a WebSocket frame is at most 15 MiB of base64, about 11 MiB of audio).
 */
export const MAX_ENTRY_BYTES = 16 * 1024 * 1024;

/**
 * Thrown by `append` when an entry is larger than the store takes (`MAX_ENTRY_BYTES`, or a smaller limit of the
 * database behind the adapter); nothing of the batch is stored. `code` is `"entry_too_large"`.
 */
export class EntryTooLargeError extends Error {
  readonly code = "entry_too_large";
  constructor(
    readonly stream: string,
    readonly bytes: number,
    readonly limit: number,
    options?: { cause?: unknown },
  ) {
    super(`stream ${stream}: an entry of ${bytes} bytes is larger than the store takes (${limit} bytes)`, options);
    this.name = "EntryTooLargeError";
  }
}

/**
 * The EventStore port (DESIGN.md, "Ports"). One writer per stream; appends are atomic (all entries or none) and
 * one call is one transaction, which is how the engine group-commits a mailbox drain.
 */
export interface EventStore {
  /**
   * Appends `entries` to `stream` atomically. Returns the revision of the last entry appended.
   *
   * Idempotent retry: an append whose entries are already stored right after `expectedRevision` (the same type,
   * data, binary values and metadata: the call is repeated after its reply was lost) stores nothing again and
   * returns the revision of the last of them, as the first call would have.
   * @throws WrongExpectedRevisionError when `expectedRevision` does not match (and the batch is not such a retry).
   * @throws EntryTooLargeError when an entry is larger than the store takes; nothing of the batch is stored.
   */
  append(stream: string, entries: readonly NewEntry[], expectedRevision: ExpectedRevision): Promise<number>;
  /**
   * Reads `stream` from revision `from` (inclusive, default 0) in order, at most `limit` entries (default: all, to
   * its end). An unknown stream reads as empty.
   */
  read(stream: string, from?: number, limit?: number): Promise<RecordedEntry[]>;
  /**
   * Entries of `stream` (or of every stream for `"$all"`) from revision / position `from` (inclusive), first
   * those already stored, then each new one as it is appended. Completes when the store closes.
   */
  subscribe(stream: string | "$all", from?: number, options?: SubscribeOptions): Observable<RecordedEntry>;
  /** Every stream whose name starts with `prefix`, in order of creation. */
  listStreams(prefix: string): Promise<StreamInfo[]>;
  /**
   * A page of the streams' summaries (issue 32), filtered, ordered and cut in the store (for SQL stores: WHERE,
   * ORDER BY and LIMIT `limit + 1`), never by reading logs. The summary of a stream follows every append committed
   * before the call.
   */
  listSummaries(query: SummaryQuery): Promise<SummaryPage>;
  /**
   * Folds every stream's summary again from its log (`duplex reindex`: after a summary's definition changed, or for
   * a store some other program wrote to). Returns how many streams it summarised. Seconds for a store of GBs.
   */
  rebuildSummaries(): Promise<number>;
  /**
   * Removes `stream`, all its entries and its summary (retention: `duplex gc`). Returns false when there was no such stream. A
   * later append with `no_stream` creates it anew from revision 0. Live subscriptions to it are not told.
   */
  deleteStream(stream: string): Promise<boolean>;
  /**
   * Fences `stream` for a takeover by the node of this store instance (issue 33, part 2), in stores that nodes
   * share (PostgreSQL); absent in stores of one process. Resolves once every append of another instance that was in
   * flight is committed or refused, with the stream's revision then (`"no_stream"`): from then on, for `ms` (the
   * store's clock), every append to `stream` through another instance is refused with WrongExpectedRevisionError,
   * until this instance appends to it (its append lifts the fence). Resolves null, fencing nothing, while another
   * instance's fence holds the stream.
   */
  fence?(stream: string, ms: number): Promise<number | "no_stream" | null>;
  close(): Promise<void>;
}

/**
 * Options of `subscribe`. `types`: the entry types the subscriber reads; a store may deliver only those (and skip
 * decoding the others), so a subscriber filters again. Absent: every entry.
 */
export interface SubscribeOptions {
  readonly types?: readonly string[];
}
