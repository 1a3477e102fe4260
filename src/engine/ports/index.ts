/** The ports the engine depends on; adapters in src/infra implement them. */

export * from "./audio.ts";
export * from "./event-store.ts";
export * from "./node-leases.ts";
export * from "./runner.ts";
export * from "./vad.ts";
