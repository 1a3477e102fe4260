import { isProfileName, MODEL_PROFILES, type ModelProfile, withProfile } from "../../domain/index.ts";
import type { ModelRunner } from "../../engine/ports/index.ts";
import type { ProfileConfig } from "../config.ts";

/** The profile a deployment names or writes out (deploy YAML `runner.profile`), in our spelling. */
export const resolveProfile = (config: ProfileConfig): ModelProfile => {
  if (typeof config === "string") {
    if (!isProfileName(config)) throw new Error(`unknown model profile ${config}`);
    return MODEL_PROFILES[config];
  }
  return {
    name: config.name,
    model: config.model,
    implementationLevel: config.implementation_level,
    nativeDuplex: config.native_duplex,
    chunkPeriodMs: config.chunk_period_ms,
    supportsSessionResume: config.supports_session_resume,
    supportsBargeIn: config.supports_barge_in,
    supportsAudioTruncate: config.supports_audio_truncate,
    supportsVideo: config.supports_video_input,
    supportsToolCalls: config.supports_tool_calls,
    ...(config.supports_speed === undefined ? {} : { supportsSpeed: config.supports_speed }),
    refAudio: config.ref_audio,
  };
};

/**
 * Puts a model profile on a runner (DESIGN.md, "Ports": ModelRunner): the runner keeps its behaviour and its rates,
 * and the sessions it serves show, and are gated by, the profile's capabilities (src/domain/profiles.ts). The
 * runner's name becomes the profile's model id, which sessions and `GET /v1/models` report.
 */
export const withModelProfile = (runner: ModelRunner, profile: ModelProfile): ModelRunner => ({
  name: profile.model,
  capabilities: withProfile(runner.capabilities, profile),
  open: (session, emit) => runner.open(session, emit),
  close: () => runner.close(),
});
