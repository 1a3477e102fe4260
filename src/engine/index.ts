/** The session host: engine, per-session mailbox, effects, log layout, replay; and the ports it depends on. */
export * from "./chain.ts";
export * from "./connection.ts";
export * from "./connection-parts.ts";
export * from "./connection-takeover.ts";
export * from "./downtime.ts";
export * from "./earlier-releases.ts";
export * from "./effects.ts";
export * from "./engine.ts";
export * from "./engine-api.ts";
export * from "./lifecycle-log.ts";
export * from "./log.ts";
export * from "./ports/index.ts";
export * from "./session-host.ts";
export * from "./step.ts";
export * from "./takeover.ts";
export * from "./upcast.ts";
