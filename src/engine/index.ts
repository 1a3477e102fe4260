/** The session host: engine, per-session mailbox, effects, log layout, replay; and the ports it depends on. */
export * from "./bidi-text.ts";
export * from "./chain.ts";
export * from "./diff.ts";
export * from "./effects.ts";
export * from "./engine.ts";
export * from "./inspect.ts";
export * from "./lifecycle-log.ts";
export * from "./log.ts";
export * from "./ports/index.ts";
export * from "./recompute-vad.ts";
export * from "./redrive.ts";
export * from "./replay.ts";
export * from "./retention.ts";
export * from "./session-host.ts";
export * from "./timeline.ts";
export * from "./trace.ts";
export * from "./upcast.ts";
