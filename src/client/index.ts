/** The TypeScript client of /v1/realtime, used by the demo, the conformance suite, the benchmarks and users. */

export * from "./connect-error.ts";
export * from "./realtime-client.ts";
