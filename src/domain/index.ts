/** The pure domain of a duplex session: commands, inputs, domain events, the decider and its policies. */
export type { Decision } from "./builder.ts";
export * from "./commands.ts";
export * from "./config.ts";
export * from "./decider.ts";
export * from "./endpointing.ts";
export * from "./errors.ts";
export * from "./events.ts";
export * from "./evolve.ts";
export * from "./history.ts";
export * from "./ids.ts";
export * from "./input-flow.ts";
export * from "./item-flow.ts";
export * from "./lane.ts";
export * from "./playback.ts";
export * from "./profiles.ts";
export * from "./response-flow.ts";
export * from "./stage.ts";
export * from "./state.ts";
