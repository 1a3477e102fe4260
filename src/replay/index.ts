/** The offline consumer (DESIGN.md, "Layout"): replay, redrive, diff, inspect, timeline, trace, retention, and
 * VAD recomputation, each reading a session's log through the engine's one step (src/engine/step.ts). */
export * from "./bidi-text.ts";
export * from "./diff.ts";
export * from "./inspect.ts";
export * from "./recompute-vad.ts";
export * from "./redrive.ts";
export * from "./replay.ts";
export * from "./retention.ts";
export * from "./timeline.ts";
export * from "./trace.ts";
