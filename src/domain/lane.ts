import { implementationLevelOf, inModelNativeLane } from "./config.ts";
import type { SessionState } from "./state.ts";

/**
 * The lane of a session (BEHAVIOUR.md, "Turn-taking"): `native` when the model decides (auto_response on a
 * model-native runner, no turn detection), else `turn`, where commits create items and only `response.create` or a
 * server-VAD commit with `create_response` starts a response.
 */
export const laneOf = (state: SessionState): "native" | "turn" =>
  inModelNativeLane(state.config) && implementationLevelOf(state.capabilities, state.config) === "model_native_duplex"
    ? "native"
    : "turn";
