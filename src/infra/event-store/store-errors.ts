/** The errors every store adapter throws (sqlite, PostgreSQL, KurrentDB): a closed store used, a read-only store written. */

/** Thrown (as a rejection) by a write to a store opened with `readOnly`. `code` is `"event_store_read_only"`. */
export class ReadOnlyStoreError extends Error {
  readonly code = "event_store_read_only";
  constructor(
    readonly path: string,
    operation: string,
  ) {
    super(`event store ${path} was opened read-only: cannot ${operation}`);
    this.name = "ReadOnlyStoreError";
  }
}

/**
 * Thrown (as a rejection, or as the error of a subscription) when a closed store is used.
 * `code` is `"event_store_closed"`.
 */
export class EventStoreClosedError extends Error {
  readonly code = "event_store_closed";
  constructor(operation: string) {
    super(`event store is closed: cannot ${operation}`);
    this.name = "EventStoreClosedError";
  }
}
