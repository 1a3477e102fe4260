/**
 * EventStore adapters (DESIGN.md, "Ports": EventStore): the embedded sqlite store, PostgreSQL (postgres.ts) and
 * KurrentDB (kurrentdb.ts), loaded by `openEventStore` only when configured, and the codec that keeps binary entry
 * data out of the JSON.
 */
export { decodeData, type EncodedData, encodeData } from "./codec.ts";
export { lockStore, StoreInUseError } from "./lock.ts";
export { type OpenedStore, openEventStore, redactUrl } from "./open.ts";
export * from "./session-file.ts";
export { createSqliteEventStore, EventStoreClosedError, type SqliteEventStoreOptions } from "./sqlite.ts";
