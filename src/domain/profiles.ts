import type { Capabilities } from "./config.ts";

/**
 * Model profiles: the capability table of the reference system (reference/realtime-duplex-api.md, "Capability
 * negotiation by model" and "Known Limitations"). A profile is put on a runner (deploy YAML `runner.profile`), so a
 * session shows that model's capabilities and is gated by them, whatever runs behind it: the gates can be tested on
 * the CPU echo runner. Rates stay the runner's own (the engine resamples to them).
 */
export interface ModelProfile {
  /** The profile's name, as `runner.profile` spells it. */
  readonly name: string;
  /** The model id the session and `GET /v1/models` report. */
  readonly model: string;
  readonly implementationLevel: "model_native_duplex";
  /** `opt_in`: the chat-fallback lane until the session sets `extra_body.native_duplex` (MiniCPM-o 4.5). */
  readonly nativeDuplex: "always" | "opt_in";
  /** The model unit that listen decisions and camera frames align to, ms. */
  readonly chunkPeriodMs: number;
  readonly supportsSessionResume: boolean;
  readonly supportsBargeIn: boolean;
  readonly supportsAudioTruncate: boolean;
  /** Camera frames (`video_frames` on an append) are consumed; elsewhere they are ignored. */
  readonly supportsVideo: boolean;
  /** Tool calls are produced (function_call items, `response.function_call_arguments.*`). */
  readonly supportsToolCalls: boolean;
  /** Whether the model speaks at a session's `speed` (absent: no; the reference's models speak at one rate). */
  readonly supportsSpeed?: boolean;
  /** `required`: a session needs a `ref_audio` voice clip in its first `session.update` (`ref_audio_required`). */
  readonly refAudio: "required" | "optional";
}

/** The three models of the reference's capability table. */
export const MODEL_PROFILES = {
  minicpmo_4_5: {
    name: "minicpmo_4_5",
    model: "openbmb/MiniCPM-o-4_5",
    implementationLevel: "model_native_duplex",
    nativeDuplex: "opt_in",
    chunkPeriodMs: 1000,
    supportsSessionResume: true,
    supportsBargeIn: true,
    supportsAudioTruncate: true,
    supportsVideo: true,
    supportsToolCalls: false,
    refAudio: "required",
  },
  personaplex: {
    name: "personaplex",
    model: "nvidia/personaplex-7b-v1",
    implementationLevel: "model_native_duplex",
    nativeDuplex: "always",
    chunkPeriodMs: 80,
    supportsSessionResume: false,
    supportsBargeIn: false,
    supportsAudioTruncate: false,
    supportsVideo: false,
    supportsToolCalls: false,
    refAudio: "optional",
  },
  nemotron_voicechat: {
    name: "nemotron_voicechat",
    model: "nvidia/nemotron-voicechat",
    implementationLevel: "model_native_duplex",
    nativeDuplex: "always",
    chunkPeriodMs: 80,
    supportsSessionResume: true,
    supportsBargeIn: false,
    supportsAudioTruncate: false,
    supportsVideo: false,
    supportsToolCalls: true,
    refAudio: "optional",
  },
} as const satisfies Record<string, ModelProfile>;

export type ProfileName = keyof typeof MODEL_PROFILES;

/** True when `name` is a built-in profile. */
export const isProfileName = (name: string): name is ProfileName => Object.hasOwn(MODEL_PROFILES, name);

/**
 * The capabilities a runner shows under `profile`: every gate, the chunk period and the lane rule are the
 * profile's; the input and output rates stay the runner's.
 */
export const withProfile = (runner: Capabilities, profile: ModelProfile): Capabilities => ({
  ...runner,
  implementationLevel: profile.implementationLevel,
  chunkPeriodMs: profile.chunkPeriodMs,
  supportsBargeIn: profile.supportsBargeIn,
  supportsSessionResume: profile.supportsSessionResume,
  supportsAudioTruncate: profile.supportsAudioTruncate,
  supportsToolCalls: profile.supportsToolCalls,
  supportsSpeed: profile.supportsSpeed ?? false,
  supportsVideo: profile.supportsVideo,
  nativeDuplex: profile.nativeDuplex,
  refAudio: profile.refAudio,
  profile: profile.name,
});
