import { type Rejection, reject } from "./errors.ts";

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

const isG711 = (format: AudioEncoding): boolean => format === "g711_ulaw" || format === "g711_alaw";

/** Why an input or output format is refused, or null when the session may take it. */
const audioFormatRefusal = (direction: "input" | "output", audio: AudioFormat): string | null => {
  if (isG711(audio.format)) {
    return audio.rate === G711_RATE_HZ
      ? null
      : `${direction} audio format ${audio.format} is ${G711_RATE_HZ} Hz only; got ${audio.rate} Hz`;
  }
  return SUPPORTED_INPUT_RATES.includes(audio.rate)
    ? null
    : `${direction} sample rate ${audio.rate} Hz is not supported for ${audio.format}; use one of ${SUPPORTED_INPUT_RATES.join(", ")}`;
};

/** The hottest sampling temperature a session may ask for. */
export const MAX_TEMPERATURE = 2;

/** Why the tools and tool choice a patch leads to are refused, or null. */
const toolRefusal = (
  tools: readonly ToolDefinition[],
  choice: ToolChoice,
  patch: SessionPatch,
  capabilities: Capabilities,
): Rejection | null => {
  if (patch.tools !== undefined && patch.tools.length > 0 && !capabilities.supportsToolCalls) {
    return reject(
      "tool_calls_unsupported",
      "this model does not call tools (capabilities.supports_tool_calls is false); send tools: []",
      "session.tools",
    );
  }
  const names = new Set<string>();
  for (const [i, tool] of tools.entries()) {
    if (names.has(tool.name)) {
      return reject(
        "bad_event",
        `tools[${i}]: a tool named "${tool.name}" is already declared`,
        `session.tools.${i}.name`,
      );
    }
    names.add(tool.name);
  }
  if (typeof choice === "object" && !names.has(choice.name)) {
    return reject(
      "bad_event",
      `tool_choice names function "${choice.name}", which is not among the session's tools (${[...names].join(", ") || "none"})`,
      "session.tool_choice",
    );
  }
  if (choice === "required" && tools.length === 0) {
    return reject("bad_event", 'tool_choice "required" needs at least one tool', "session.tool_choice");
  }
  return null;
};

/**
 * Applies a patch to a configuration. Returns the new configuration, or the rejection that leaves the session
 * on its previous configuration (BEHAVIOUR.md scenario 17: `semantic_vad` -> `unsupported_turn_detection`).
 * Capability gates (reference, "Capability negotiation by model"): on a model without barge-in,
 * `overlap_policy: barge_in_on_speech` is `barge_in_unsupported`; server VAD is `unsupported_turn_detection` on a
 * model-native one, and on a turn-based one defaults to `interrupt_response: false` (endpointing without
 * interruption; `true` is `barge_in_unsupported`); tools on a model that does not call them are
 * `tool_calls_unsupported`; removing the `ref_audio` a model requires is `ref_audio_required`.
 */
export const applySessionPatch = (
  config: SessionConfig,
  patch: SessionPatch,
  capabilities: Capabilities,
): SessionConfig | Rejection => {
  let turnDetection = config.turnDetection;
  let overlapPolicy = patch.overlapPolicy ?? config.overlapPolicy;
  if (patch.overlapPolicy === "barge_in_on_speech" && !capabilities.supportsBargeIn) {
    return reject(
      "barge_in_unsupported",
      "overlap_policy barge_in_on_speech needs a model that supports barge-in (capabilities.supports_barge_in is false)",
      "session.overlap_policy",
    );
  }
  if (patch.turnDetection === null) {
    turnDetection = null;
  } else if (patch.turnDetection !== undefined) {
    const td = patch.turnDetection;
    const type = td.type ?? config.turnDetection?.type ?? "server_vad";
    if (type !== "server_vad") {
      return reject(
        "unsupported_turn_detection",
        `turn_detection.type "${type}" is not supported; use "server_vad" or null`,
        "session.turn_detection.type",
      );
    }
    const nativeAfter = capabilities.nativeDuplex === "opt_in" ? (patch.nativeDuplex ?? config.nativeDuplex) : true;
    const level = implementationLevelOf(capabilities, { nativeDuplex: nativeAfter });
    if (level === "model_native_duplex" && !capabilities.supportsBargeIn) {
      // The reference gates server VAD behind barge-in: a model-native model without barge-in decides turns itself.
      return reject(
        "unsupported_turn_detection",
        "server VAD needs a model that supports barge-in (capabilities.supports_barge_in is false); this model decides when to speak: use turn_detection null",
        "session.turn_detection.type",
      );
    }
    if (td.interruptResponse === true && !capabilities.supportsBargeIn) {
      return reject(
        "barge_in_unsupported",
        "turn_detection.interrupt_response true needs a model that supports barge-in; omit it or send false",
        "session.turn_detection.interrupt_response",
      );
    }
    const defaults = capabilities.supportsBargeIn
      ? SERVER_VAD_DEFAULTS
      : { ...SERVER_VAD_DEFAULTS, interruptResponse: false };
    const base = config.turnDetection ?? defaults;
    turnDetection = { ...base, ...td, type: "server_vad" };
    if (turnDetection.interruptResponse && !capabilities.supportsBargeIn && patch.overlapPolicy === undefined) {
      overlapPolicy = "listen_only";
    } else if (turnDetection.interruptResponse && patch.overlapPolicy === undefined) {
      overlapPolicy = "barge_in_on_speech";
    }
  }
  if (patch.temperature !== undefined && patch.temperature !== null) {
    const t = patch.temperature;
    if (!(t >= 0 && t <= MAX_TEMPERATURE)) {
      return reject("bad_event", `temperature must be within 0..${MAX_TEMPERATURE}; got ${t}`, "session.temperature");
    }
  }
  const tools = patch.tools ?? config.tools;
  const toolChoice = patch.toolChoice ?? config.toolChoice;
  const toolsRefused = toolRefusal(tools, toolChoice, patch, capabilities);
  if (toolsRefused !== null) return toolsRefused;
  if (patch.refAudio === null && capabilities.refAudio === "required") {
    return reject(
      "ref_audio_required",
      "this model needs a ref_audio voice clip; it cannot be removed",
      "session.ref_audio",
    );
  }
  const inputRefusal = patch.inputAudio === undefined ? null : audioFormatRefusal("input", patch.inputAudio);
  if (inputRefusal !== null) return reject("unsupported_audio_format", inputRefusal, "session.input_audio_format");
  // Output formats are the input's set: the engine resamples and encodes the model's audio per session
  // (BEHAVIOUR.md, "Audio formats").
  const outputRefusal = patch.outputAudio === undefined ? null : audioFormatRefusal("output", patch.outputAudio);
  if (outputRefusal !== null) return reject("unsupported_audio_format", outputRefusal, "session.output_audio_format");
  const voiceFields = voiceFieldsOf(config, patch, capabilities);
  if ("code" in voiceFields) return voiceFields;
  const optIn = capabilities.nativeDuplex === "opt_in";
  const refAudio =
    patch.refAudio === undefined
      ? config.refAudio
      : patch.refAudio === null
        ? null
        : { mimeType: patch.refAudio.mimeType, bytes: patch.refAudio.audio.byteLength, sha256: patch.refAudio.sha256 };
  return {
    model: patch.model ?? config.model,
    instructions: patch.instructions ?? config.instructions,
    voice: patch.voice === undefined ? config.voice : patch.voice,
    outputModalities: patch.outputModalities ?? config.outputModalities,
    inputAudio: patch.inputAudio ?? config.inputAudio,
    outputAudio: patch.outputAudio ?? config.outputAudio,
    turnDetection,
    overlapPolicy,
    playbackCommitPolicy: patch.playbackCommitPolicy ?? config.playbackCommitPolicy,
    temperature: patch.temperature === undefined ? config.temperature : patch.temperature,
    // On an opt_in model native_duplex selects the implementation; elsewhere it is the lane switch it always was.
    autoResponse: patch.autoResponse ?? (optIn ? undefined : patch.nativeDuplex) ?? config.autoResponse,
    nativeDuplex: optIn ? (patch.nativeDuplex ?? config.nativeDuplex) : true,
    idleTimeoutS: patch.idleTimeoutS === undefined ? config.idleTimeoutS : patch.idleTimeoutS,
    ...(patch.inputTranscription === undefined && config.inputTranscription === undefined
      ? {}
      : {
          inputTranscription:
            patch.inputTranscription === undefined ? config.inputTranscription : patch.inputTranscription,
        }),
    ...(patch.inputNoiseReduction === undefined && config.inputNoiseReduction === undefined
      ? {}
      : {
          inputNoiseReduction:
            patch.inputNoiseReduction === undefined ? config.inputNoiseReduction : patch.inputNoiseReduction,
        }),
    tools,
    toolChoice,
    maxResponseOutputTokens: patch.maxResponseOutputTokens ?? config.maxResponseOutputTokens,
    refAudio,
    responseTimeoutMs: patch.responseTimeoutMs ?? config.responseTimeoutMs,
    ...voiceFields,
    tracing: patch.tracing === undefined ? config.tracing : patch.tracing,
  };
};

/**
 * The overlap thresholds and the speaking rate a patch leads to, or why they are refused: `overlap_barge_in_ms` below
 * `overlap_short_ack_ms` is `bad_event` (a short remark could never be one); a `speed` other than 1 on a model that
 * cannot change its rate is `speed_unsupported`, out of 0.25..1.5 `bad_event` (OpenAI's bounds).
 */
const voiceFieldsOf = (
  config: SessionConfig,
  patch: SessionPatch,
  capabilities: Capabilities,
): Pick<SessionConfig, "overlapShortAckMs" | "overlapBargeInMs" | "overlapSilenceRms" | "speed"> | Rejection => {
  const shortAckMs = patch.overlapShortAckMs ?? config.overlapShortAckMs;
  const bargeInMs = patch.overlapBargeInMs ?? config.overlapBargeInMs;
  if (bargeInMs < shortAckMs) {
    return reject(
      "bad_event",
      `overlap_barge_in_ms (${bargeInMs}) must be at least overlap_short_ack_ms (${shortAckMs})`,
      patch.overlapBargeInMs === undefined ? "session.overlap_short_ack_ms" : "session.overlap_barge_in_ms",
    );
  }
  const speed = patch.speed ?? config.speed;
  if (!(speed >= SPEED_RANGE.min && speed <= SPEED_RANGE.max)) {
    return reject(
      "bad_event",
      `speed must be within ${SPEED_RANGE.min}..${SPEED_RANGE.max}; got ${speed}`,
      "session.audio.output.speed",
    );
  }
  if (speed !== 1 && capabilities.supportsSpeed !== true) {
    return reject(
      "speed_unsupported",
      `this model speaks at one rate only (capabilities.supports_speed is false); speed ${speed} cannot be honoured, send 1`,
      "session.audio.output.speed",
    );
  }
  return {
    overlapShortAckMs: shortAckMs,
    overlapBargeInMs: bargeInMs,
    overlapSilenceRms: patch.overlapSilenceRms ?? config.overlapSilenceRms,
    speed,
  };
};
