/**
 * RxJS projections of a session's domain event stream: session view, playback ledger, history, turn ledger, wire
 * events, and the session summary a session list reads.
 */
export * from "./committed.ts";
export * from "./envelope.ts";
export * from "./playback-truth.ts";
export * from "./session-report.ts";
export * from "./session-summary.ts";
export * from "./session-view.ts";
export * from "./turn-ledger.ts";
export * from "./wire.ts";
