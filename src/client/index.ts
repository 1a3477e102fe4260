/**
 * The TypeScript client of /v1/realtime, used by the demo, the conformance suite, the benchmarks and users
 * (DESIGN.md, src/client). `DuplexClient` is the client API (reference/realtime-duplex-api.md, "Using
 * DuplexClient"): a session that resumes by itself, response handles, an event collector. `RealtimeClient` is the
 * thin one-socket client the tests drive the wire with.
 */

export * from "./connect-error.ts";
export * from "./connection-types.ts";
export * from "./duplex-client.ts";
export * from "./errors.ts";
export * from "./event-collector.ts";
export * from "./heartbeats.ts";
export * from "./realtime-client.ts";
export * from "./reconnect-policy.ts";
export * from "./response-handle.ts";
export * from "./resumable-connection.ts";
export * from "./transport.ts";
