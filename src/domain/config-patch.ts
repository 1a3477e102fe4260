/**
 * A session patch applied to a configuration (`session.update`; BEHAVIOUR.md scenario 17): the new configuration,
 * or the rejection that leaves the session on its previous one. The capability gates of the reference
 * ("Capability negotiation by model") decide which fields a model may take: barge-in, server VAD, tools, speed,
 * `ref_audio`, audio formats and rates.
 */
import {
  type AudioEncoding,
  type AudioFormat,
  type Capabilities,
  G711_RATE_HZ,
  implementationLevelOf,
  MAX_TEMPERATURE,
  SERVER_VAD_DEFAULTS,
  type SessionConfig,
  type SessionPatch,
  SPEED_RANGE,
  SUPPORTED_INPUT_RATES,
  type ToolChoice,
  type ToolDefinition,
} from "./config.ts";
import { type Rejection, reject } from "./errors.ts";

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
 * The turn detection and overlap policy a patch leads to, or why they are refused: a type other than `server_vad` is
 * `unsupported_turn_detection`, as is server VAD on a model-native model without barge-in; `interrupt_response: true`
 * without barge-in is `barge_in_unsupported`. Server VAD with interruption implies `barge_in_on_speech` (or
 * `listen_only` without barge-in) unless the patch names a policy.
 */
const turnDetectionOf = (
  config: SessionConfig,
  patch: SessionPatch,
  capabilities: Capabilities,
): Pick<SessionConfig, "turnDetection" | "overlapPolicy"> | Rejection => {
  let turnDetection = config.turnDetection;
  let overlapPolicy = patch.overlapPolicy ?? config.overlapPolicy;
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
  return { turnDetection, overlapPolicy };
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
  if (patch.overlapPolicy === "barge_in_on_speech" && !capabilities.supportsBargeIn) {
    return reject(
      "barge_in_unsupported",
      "overlap_policy barge_in_on_speech needs a model that supports barge-in (capabilities.supports_barge_in is false)",
      "session.overlap_policy",
    );
  }
  const turn = turnDetectionOf(config, patch, capabilities);
  if ("code" in turn) return turn;
  const { turnDetection, overlapPolicy } = turn;
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
    ...(patch.forceListenCount === undefined && config.forceListenCount === undefined
      ? {}
      : { forceListenCount: patch.forceListenCount ?? config.forceListenCount }),
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
