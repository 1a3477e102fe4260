/**
 * A session's configuration (`session.update`'s fields in the domain's spelling), the model's capabilities that gate it,
 * their defaults, and the audio formats and rates a session may use. Applying a patch to it is config-patch.ts.
 */

/**
 * The effective configuration of a session, in our own spelling. The codec reads both the beta and the GA
 * spellings of the OpenAI session object into a `SessionPatch`, and renders this back in both
 * (reference/realtime-duplex-api.md, "Tier 1" and "Tier 2"; BEHAVIOUR.md, "Turn-taking").
 */
export interface SessionConfig {
  readonly model: string;
  readonly instructions: string;
  readonly voice: string | null;
  readonly outputModalities: readonly Modality[];
  /** Client input audio: format and rate (Hz). The engine converts it to the runner's input rate. */
  readonly inputAudio: AudioFormat;
  /** Output audio the server sends: format and rate (Hz). */
  readonly outputAudio: AudioFormat;
  readonly turnDetection: ServerVadConfig | null;
  readonly overlapPolicy: OverlapPolicy;
  readonly playbackCommitPolicy: PlaybackCommitPolicy;
  readonly temperature: number | null;
  /** `extra_body.auto_response`: the model-native lane, where the model decides when to answer. */
  readonly autoResponse: boolean;
  /**
   * `extra_body.native_duplex`: the model's native duplex implementation is in use. Always true on a model that has
   * no other (`capabilities.native_duplex: always`); on an `opt_in` model (MiniCPM-o 4.5) false until the session
   * opts in, and the session is then in the chat-fallback (turn) lane.
   */
  readonly nativeDuplex: boolean;
  readonly idleTimeoutS: number | null;
  /**
   * `input_audio_transcription` / `audio.input.transcription` and the noise reduction setting, kept as the client
   * sent them and echoed back: no separate stage runs, transcripts come from the model (reference, "Known
   * Limitations"). Absent in logs recorded before they existed, which read as null.
   */
  readonly inputTranscription?: Readonly<Record<string, unknown>> | null;
  readonly inputNoiseReduction?: Readonly<Record<string, unknown>> | null;
  /** Function tools the model may call (OpenAI `session.tools`); empty on a model without tool calls. */
  readonly tools: readonly ToolDefinition[];
  readonly toolChoice: ToolChoice;
  /** The most output tokens one response may take (1..4096), or "inf" (OpenAI `max_response_output_tokens`). */
  readonly maxResponseOutputTokens: number | "inf";
  /**
   * The assistant voice clip (`ref_audio`, a data URL) in force, described: its bytes are in the log once, in the
   * `session.update` that set it, and reach the runner through `configure` (reference, "Tier 2": ref_audio).
   */
  readonly refAudio: RefAudioInfo | null;
  /**
   * ms a response may go without model output before it ends failed (`response_timeout`): the deployment's
   * `response_timeout_ms`, or the session's `extra_body.response_timeout_ms` (BEHAVIOUR.md, "Defaults and limits").
   */
  readonly responseTimeoutMs: number;
  /**
   * `overlap_short_ack_ms`: user speech overlapping a response for at most this long (ms, in all) is a short remark,
   * acknowledged without interrupting (reference, "session.created": 700).
   */
  readonly overlapShortAckMs: number;
  /**
   * `overlap_barge_in_ms`: overlapping speech longer than this (ms, in all) barges in where the policy and the model
   * allow it (reference default 1200; logs recorded before the field existed decided at 700, and keep deciding so).
   */
  readonly overlapBargeInMs: number;
  /** `overlap_silence_rms`: RMS (0..1 of full scale) from which an append without VAD is speech (0.003). */
  readonly overlapSilenceRms: number;
  /** `audio.output.speed` (beta `speed`): the speaking rate asked of the model, 0.25..1.5 (1: as the model speaks). */
  readonly speed: number;
  /** `tracing`: the client's labels for the session (`"auto"` or workflow name, group id, metadata), kept as given. */
  readonly tracing: TracingConfig | null;
  /**
   * `extra_body.force_listen_count` (reference, "extra_body"; MiniCPM-o's duplex preset): the model listens through the
   * session's first `forceListenCount` chunks of `chunk_period_ms` on the input clock, as if each append in them were
   * `force_listen`. Absent (and in every log recorded before it was read): 0.
   */
  readonly forceListenCount?: number;
}

/** OpenAI's `tracing` session field: `"auto"`, or the labels a client gives its session. */
export type TracingConfig =
  | "auto"
  | {
      readonly workflowName?: string;
      readonly groupId?: string;
      readonly metadata?: Readonly<Record<string, unknown>>;
    };

/** The overlap thresholds of the reference's session object (ms, and RMS of full scale). */
export const OVERLAP_DEFAULTS = { shortAckMs: 700, bargeInMs: 1200, silenceRms: 0.003 } as const;

/** `overlap_barge_in_ms` of a log recorded before the field existed: barge-in after the short remark's 700 ms. */
const RECORDED_BARGE_IN_MS = 700;

/** OpenAI's bounds of `speed`. */
export const SPEED_RANGE = { min: 0.25, max: 1.5 } as const;

/** BEHAVIOUR.md, "Defaults and limits": response_timeout_ms. */
export const DEFAULT_RESPONSE_TIMEOUT_MS = 30_000;

/** A function tool (OpenAI `session.tools[]`): `parameters` is a JSON Schema object. */
export interface ToolDefinition {
  readonly type: "function";
  readonly name: string;
  readonly description: string;
  readonly parameters: Readonly<Record<string, unknown>>;
}

/** OpenAI `tool_choice`: a mode, or one function by name. */
export type ToolChoice = "auto" | "none" | "required" | { readonly type: "function"; readonly name: string };

/** What a session shows of its `ref_audio`: the clip's media type, size (bytes of the decoded clip) and SHA-256. */
export interface RefAudioInfo {
  readonly mimeType: string;
  readonly bytes: number;
  readonly sha256: string;
}

/**
 * A `ref_audio` as `session.update` carries it: the decoded bytes of a data URL. `sha256` (hex) is stamped by the
 * engine before the command is recorded; the decider compares clips by it.
 */
export interface RefAudioInput {
  readonly mimeType: string;
  readonly audio: Uint8Array;
  readonly sha256: string;
}

export type Modality = "audio" | "text";
export type OverlapPolicy = "listen_only" | "barge_in_on_speech";
export type PlaybackCommitPolicy = "ack_only" | "commit_all_on_done";

/**
 * The encodings of session audio: `pcm16` (signed 16-bit little-endian), G.711 `g711_ulaw` / `g711_alaw` (one
 * byte a sample, always 8000 Hz) and `pcm_f32le` (32-bit float little-endian in [-1, 1]); all mono. The codec's
 * `WireEncoding` is the same union.
 */
export type AudioEncoding = "pcm16" | "g711_ulaw" | "g711_alaw" | "pcm_f32le";

/**
 * An audio format: `format` is the encoding, `rate` the sample rate in Hz. The key stays `format` (not
 * `encoding`, the codec's spelling) because it is recorded in `SessionCreated` and `SessionConfigured`: renaming
 * it would make every recorded session diverge on replay (BEHAVIOUR.md scenario 15).
 */
export interface AudioFormat {
  readonly format: AudioEncoding;
  readonly rate: number;
}

/** `turn_detection: {type: "server_vad", ...}`; times in ms, threshold a probability in 0..1. */
export interface ServerVadConfig {
  readonly type: "server_vad";
  readonly threshold: number;
  readonly prefixPaddingMs: number;
  readonly silenceDurationMs: number;
  readonly minSpeechDurationMs: number;
  readonly createResponse: boolean;
  readonly interruptResponse: boolean;
}

/** What the client may change with `session.update`; absent keys keep their value. */
export interface SessionPatch {
  readonly model?: string;
  readonly instructions?: string;
  readonly voice?: string | null;
  readonly outputModalities?: readonly Modality[];
  readonly inputAudio?: AudioFormat;
  readonly outputAudio?: AudioFormat;
  /**
   * `null` disables turn detection; `type` other than server_vad is kept so the decider can refuse it. Without
   * `type` the patch tunes the detector in force (OpenAI's schema allows it), or server VAD when none is.
   */
  readonly turnDetection?: (Partial<Omit<ServerVadConfig, "type">> & { readonly type?: string }) | null;
  readonly overlapPolicy?: OverlapPolicy;
  readonly playbackCommitPolicy?: PlaybackCommitPolicy;
  readonly temperature?: number | null;
  readonly autoResponse?: boolean;
  /** `extra_body.native_duplex`; on an `always` model it stands for `auto_response` when that is not given. */
  readonly nativeDuplex?: boolean;
  readonly idleTimeoutS?: number | null;
  readonly inputTranscription?: Readonly<Record<string, unknown>> | null;
  readonly inputNoiseReduction?: Readonly<Record<string, unknown>> | null;
  readonly tools?: readonly ToolDefinition[];
  readonly toolChoice?: ToolChoice;
  readonly maxResponseOutputTokens?: number | "inf";
  /** `null` removes the clip (refused where the profile requires one). */
  readonly refAudio?: RefAudioInput | null;
  readonly responseTimeoutMs?: number;
  readonly overlapShortAckMs?: number;
  readonly overlapBargeInMs?: number;
  readonly overlapSilenceRms?: number;
  readonly speed?: number;
  readonly tracing?: TracingConfig | null;
  readonly forceListenCount?: number;
  /**
   * `extra_body.duplex_initial_user_text` (reference, "extra_body"): a user text item placed in the conversation as
   * the session is configured, before any input; refused once the session has any. Not part of the configuration.
   */
  readonly initialUserText?: string;
}

/**
 * What the model stage can do, announced in `session.created` (reference/realtime-duplex-api.md,
 * "Capability negotiation by model"). Rates in Hz, `chunkPeriodMs` in ms.
 */
export interface Capabilities {
  readonly implementationLevel: "model_native_duplex" | "turn_based";
  readonly chunkPeriodMs: number;
  readonly supportsBargeIn: boolean;
  readonly supportsSessionResume: boolean;
  readonly supportsAudioTruncate: boolean;
  readonly supportsToolCalls: boolean;
  readonly supportsVideo: boolean;
  /** Whether the model speaks at another rate when asked (`audio.output.speed`); absent: no. */
  readonly supportsSpeed?: boolean;
  readonly inputSampleRateHz: number;
  readonly outputSampleRateHz: number;
  /**
   * `always`: the model-native lane is the model's only implementation; `opt_in` (MiniCPM-o 4.5): the session is in
   * the chat-fallback (turn) lane until it opts in with `extra_body.native_duplex` (or `auto_response`), and
   * `implementation_level` says which. Absent (older logs): `always`.
   */
  readonly nativeDuplex?: "always" | "opt_in";
  /** `required` (MiniCPM-o 4.5): a session needs a `ref_audio` clip; absent: optional. */
  readonly refAudio?: "required" | "optional";
  /** The model profile these capabilities come from (deploy YAML `runner.profile`), or null for the runner's own. */
  readonly profile?: string | null;
}

/**
 * The implementation level a session runs at (reference, "Capability negotiation by model"): on an `opt_in` model
 * the model-native lane only once the session opted in, else the chat-fallback lane (`turn_based`).
 */
export const implementationLevelOf = (
  capabilities: Capabilities,
  config: Pick<SessionConfig, "nativeDuplex">,
): Capabilities["implementationLevel"] =>
  capabilities.implementationLevel === "model_native_duplex" && config.nativeDuplex !== false
    ? "model_native_duplex"
    : "turn_based";

/**
 * Whether a configuration puts its session in the model-native lane, as far as the configuration tells: the model
 * answers by itself (`auto_response`), its native implementation is in use, and no turn detection commits. What a
 * runner checks; the decider also checks the model's level (`laneOf`).
 */
export const inModelNativeLane = (config: SessionConfig): boolean =>
  config.autoResponse && config.nativeDuplex !== false && config.turnDetection === null;

/** Server VAD defaults of BEHAVIOUR.md, "Turn-taking". */
export const SERVER_VAD_DEFAULTS: ServerVadConfig = {
  type: "server_vad",
  threshold: 0.5,
  prefixPaddingMs: 300,
  silenceDurationMs: 500,
  minSpeechDurationMs: 96,
  createResponse: true,
  interruptResponse: true,
};

/**
 * The input rate a session assumes until the client declares one: 24 kHz, what OpenAI's `pcm16` and
 * `{type: "audio/pcm"}` mean, so a stock client that never states a rate is heard at the right speed. The engine
 * resamples to the runner's rate.
 */
export const DEFAULT_INPUT_RATE_HZ = 24000;

/**
 * The configuration a session starts with, before the client's first `session.update` is applied. `idleTimeoutS`
 * is the deployment's `idle_ttl_s` (null: no idle expiry).
 */
export const defaultSessionConfig = (
  model: string,
  capabilities: Capabilities,
  idleTimeoutS: number | null = 300,
  responseTimeoutMs: number = DEFAULT_RESPONSE_TIMEOUT_MS,
): SessionConfig => ({
  model,
  instructions: "",
  voice: null,
  outputModalities: ["audio", "text"],
  inputAudio: { format: "pcm16", rate: DEFAULT_INPUT_RATE_HZ },
  outputAudio: { format: "pcm16", rate: capabilities.outputSampleRateHz },
  turnDetection: null,
  overlapPolicy: "listen_only",
  playbackCommitPolicy: "ack_only",
  temperature: null,
  autoResponse: capabilities.implementationLevel === "model_native_duplex",
  nativeDuplex: capabilities.nativeDuplex !== "opt_in",
  idleTimeoutS,
  tools: [],
  toolChoice: "auto",
  maxResponseOutputTokens: "inf",
  refAudio: null,
  responseTimeoutMs,
  overlapShortAckMs: OVERLAP_DEFAULTS.shortAckMs,
  overlapBargeInMs: OVERLAP_DEFAULTS.bargeInMs,
  overlapSilenceRms: OVERLAP_DEFAULTS.silenceRms,
  speed: 1,
  tracing: null,
});

/**
 * A recorded configuration with the fields added since it was recorded filled with their defaults (a log written
 * before `tools` existed folds into a configuration that has them).
 */
export const withConfigDefaults = (config: SessionConfig): SessionConfig => ({
  ...config,
  nativeDuplex: config.nativeDuplex ?? true,
  tools: config.tools ?? [],
  toolChoice: config.toolChoice ?? "auto",
  maxResponseOutputTokens: config.maxResponseOutputTokens ?? "inf",
  refAudio: config.refAudio ?? null,
  responseTimeoutMs: config.responseTimeoutMs ?? DEFAULT_RESPONSE_TIMEOUT_MS,
  overlapShortAckMs: config.overlapShortAckMs ?? OVERLAP_DEFAULTS.shortAckMs,
  overlapBargeInMs: config.overlapBargeInMs ?? RECORDED_BARGE_IN_MS,
  overlapSilenceRms: config.overlapSilenceRms ?? OVERLAP_DEFAULTS.silenceRms,
  speed: config.speed ?? 1,
  tracing: config.tracing ?? null,
});

/** Sample rates (Hz) a client may declare for pcm16 and pcm_f32le, input and output. */
export const SUPPORTED_INPUT_RATES: readonly number[] = [8000, 16000, 24000, 48000];

/** Bytes per (mono) sample of an encoding: 2 for pcm16, 1 for G.711, 4 for pcm_f32le. */
export const BYTES_PER_SAMPLE: Readonly<Record<AudioEncoding, number>> = {
  pcm16: 2,
  g711_ulaw: 1,
  g711_alaw: 1,
  pcm_f32le: 4,
};

/** The rate of G.711 (`g711_ulaw`, `g711_alaw`) in Hz: ITU-T G.711 is 8000 samples per second, nothing else. */
export const G711_RATE_HZ = 8000;

/** The hottest sampling temperature a session may ask for. */
export const MAX_TEMPERATURE = 2;
