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
  readonly idleTimeoutS: number | null;
  /**
   * `input_audio_transcription` / `audio.input.transcription` and the noise reduction setting, kept as the client
   * sent them and echoed back: no separate stage runs, transcripts come from the model (reference, "Known
   * Limitations"). Absent in logs recorded before they existed, which read as null.
   */
  readonly inputTranscription?: Readonly<Record<string, unknown>> | null;
  readonly inputNoiseReduction?: Readonly<Record<string, unknown>> | null;
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
  /** `null` disables turn detection; `type` other than server_vad is kept so the decider can refuse it. */
  readonly turnDetection?: (Partial<Omit<ServerVadConfig, "type">> & { readonly type: string }) | null;
  readonly overlapPolicy?: OverlapPolicy;
  readonly playbackCommitPolicy?: PlaybackCommitPolicy;
  readonly temperature?: number | null;
  readonly autoResponse?: boolean;
  readonly idleTimeoutS?: number | null;
  readonly inputTranscription?: Readonly<Record<string, unknown>> | null;
  readonly inputNoiseReduction?: Readonly<Record<string, unknown>> | null;
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
  readonly inputSampleRateHz: number;
  readonly outputSampleRateHz: number;
}

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
  idleTimeoutS,
});

/** Input sample rates (Hz) a client may declare for pcm16 and pcm_f32le. */
export const SUPPORTED_INPUT_RATES: readonly number[] = [8000, 16000, 24000, 48000];

/** The rate of G.711 (`g711_ulaw`, `g711_alaw`) in Hz: ITU-T G.711 is 8000 samples per second, nothing else. */
export const G711_RATE_HZ = 8000;

const isG711 = (format: AudioEncoding): boolean => format === "g711_ulaw" || format === "g711_alaw";

/** Why an input format is refused, or null when the session may take it. */
const inputAudioRefusal = (audio: AudioFormat): string | null => {
  if (isG711(audio.format)) {
    return audio.rate === G711_RATE_HZ
      ? null
      : `input audio format ${audio.format} is ${G711_RATE_HZ} Hz only; got ${audio.rate} Hz`;
  }
  return SUPPORTED_INPUT_RATES.includes(audio.rate)
    ? null
    : `input sample rate ${audio.rate} Hz is not supported for ${audio.format}; use one of ${SUPPORTED_INPUT_RATES.join(", ")}`;
};

/**
 * Applies a patch to a configuration. Returns the new configuration, or the rejection that leaves the session
 * on its previous configuration (BEHAVIOUR.md scenario 17: `semantic_vad` -> `unsupported_turn_detection`).
 */
export const applySessionPatch = (
  config: SessionConfig,
  patch: SessionPatch,
  capabilities: Capabilities,
): SessionConfig | Rejection => {
  let turnDetection = config.turnDetection;
  let overlapPolicy = patch.overlapPolicy ?? config.overlapPolicy;
  if (patch.turnDetection === null) {
    turnDetection = null;
  } else if (patch.turnDetection !== undefined) {
    const td = patch.turnDetection;
    if (td.type !== "server_vad") {
      return reject(
        "unsupported_turn_detection",
        `turn_detection.type "${td.type}" is not supported; use "server_vad" or null`,
        "session.turn_detection.type",
      );
    }
    const base = config.turnDetection ?? SERVER_VAD_DEFAULTS;
    turnDetection = { ...base, ...td, type: "server_vad" };
    if (turnDetection.interruptResponse && !capabilities.supportsBargeIn && patch.overlapPolicy === undefined) {
      overlapPolicy = "listen_only";
    } else if (turnDetection.interruptResponse && patch.overlapPolicy === undefined) {
      overlapPolicy = "barge_in_on_speech";
    }
  }
  const inputRefusal = patch.inputAudio === undefined ? null : inputAudioRefusal(patch.inputAudio);
  if (inputRefusal !== null) return reject("unsupported_audio_format", inputRefusal, "session.input_audio_format");
  // For now the server sends only what the runner produces: pcm16 at its output rate. Output conversion (G.711,
  // pcm_f32le, other rates) is to come; until then any other output format is refused and the config is kept.
  const output = patch.outputAudio;
  if (output !== undefined && (output.format !== "pcm16" || output.rate !== capabilities.outputSampleRateHz)) {
    return reject(
      "unsupported_audio_format",
      `output audio format ${output.format} at ${output.rate} Hz is not supported; the server sends pcm16 at ${capabilities.outputSampleRateHz} Hz only`,
      "session.output_audio_format",
    );
  }
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
    autoResponse: patch.autoResponse ?? config.autoResponse,
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
  };
};
