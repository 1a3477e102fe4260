import {
  type AppendResult,
  binaryEvent,
  type DeleteResult,
  type Position,
  WrongExpectedVersionError,
} from "@kurrent/kurrentdb-client";
import type { PlannedEvent, StoredEvent } from "./kurrentdb-frames.ts";

/**
 * An event to append, as `binaryEvent` (data and metadata bytes) or `jsonEvent` (data a JSON value, metadata absent)
 * of `@kurrent/kurrentdb-client` make it.
 */
export interface KurrentEventData {
  readonly id: string;
  readonly contentType: "application/octet-stream" | "application/json";
  readonly type: string;
  readonly data: unknown;
  readonly metadata?: unknown;
}

/** A catch-up subscription: `data` for each event (stored, then live), `error` once; `unsubscribe` stops it. */
export interface KurrentSubscription {
  on(event: "data", listener: (resolved: { readonly event?: StoredEvent }) => void): this;
  on(event: "error", listener: (error: Error) => void): this;
  /** Once the stored events are delivered (KurrentDB 23.10 and later). */
  on(event: "caughtUp", listener: () => void): this;
  unsubscribe(): Promise<void>;
}

/**
 * The part of `KurrentDBClient` (`@kurrent/kurrentdb-client` 1.x) that the adapter uses, so that tests can give a
 * faithful fake of it (test/support/kurrentdb-fake.ts). Signatures and semantics are the client's: revisions are
 * bigints, `fromRevision` of a subscription is exclusive (it starts after it), reads of a soft-deleted or missing
 * stream throw `StreamNotFoundError`, a wrong expected state throws `WrongExpectedVersionError`.
 */
export interface KurrentClient {
  appendToStream(
    stream: string,
    events: KurrentEventData[],
    options: { streamState: "any" | "no_stream" | bigint },
  ): Promise<AppendResult>;
  readStream(
    stream: string,
    options: { direction: "forwards" | "backwards"; fromRevision: "start" | "end" | bigint; maxCount?: number },
  ): AsyncIterable<{ readonly event?: StoredEvent }>;
  subscribeToStream(stream: string, options: { fromRevision: "start" | "end" | bigint }): KurrentSubscription;
  subscribeToAll(options: { fromPosition: "start" | "end" | Position; filter?: unknown }): KurrentSubscription;
  deleteStream(stream: string, options?: { expectedRevision?: "any" | "no_stream" | bigint }): Promise<DeleteResult>;
  dispose(): Promise<void>;
}

/** How many times the adapter writes again when the server refuses the revision it expected (appends, deletes). */
export const APPEND_ATTEMPTS = 3;

/** The server refused a write's expected revision (someone else wrote the stream meanwhile). */
export const isWrongVersion = (error: unknown): error is WrongExpectedVersionError =>
  error instanceof WrongExpectedVersionError;

/** A planned event (kurrentdb-frames.ts) as the client appends it: a binary event, its id the plan's. */
export const toEventData = (event: PlannedEvent): KurrentEventData =>
  binaryEvent({ id: event.id, type: event.type, data: event.data, metadata: event.metadata }) as KurrentEventData;
