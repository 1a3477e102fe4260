/** The pure wire codec: client frames to commands, domain events to server events, the error envelopes. */
export * from "./audio-formats.ts";
export * from "./catalogue.ts";
export * from "./client-events.ts";
export * from "./decode.ts";
export * from "./dialect.ts";
export * from "./frame-peek.ts";
export * from "./handshake.ts";
export * from "./items.ts";
export * from "./json-depth.ts";
export * from "./realtime-query.ts";
export * from "./server-events.ts";
export * from "./session-object.ts";
export * from "./session-patch.ts";
