import {
  type Capabilities,
  implementationLevelOf,
  type SessionConfig,
  type SessionSnapshot,
  type ToolChoice,
  type ToolDefinition,
  type TracingConfig,
  withConfigDefaults,
} from "../domain/index.ts";
import { formatSpellings, toWireAudioFormat } from "./audio-formats.ts";

/** The `realtime.session` object with both the beta and the GA spellings (reference, "Tier 2": session.created). */
export interface SessionObjectContext {
  readonly sessionId: string;
  readonly config: SessionConfig;
  readonly capabilities: Capabilities;
  readonly epoch: number;
  readonly turnId: number;
  /** The session's state at the time; a new session's when absent. */
  readonly view?: SessionSnapshot;
}

const turnDetectionJson = (config: SessionConfig): Record<string, unknown> | null =>
  config.turnDetection === null
    ? null
    : {
        type: "server_vad",
        threshold: config.turnDetection.threshold,
        prefix_padding_ms: config.turnDetection.prefixPaddingMs,
        silence_duration_ms: config.turnDetection.silenceDurationMs,
        create_response: config.turnDetection.createResponse,
        interrupt_response: config.turnDetection.interruptResponse,
      };

/**
 * Renders the capabilities object of `session.created`, `GET /v1/models` and `duplex conform` (reference,
 * "Capability negotiation by model"), spelled as on the wire. With a session's `config`, `implementation_level` is
 * the level the session runs at (an `opt_in` model is in the chat-fallback lane, `turn_based`, until it opts in).
 */
export const capabilitiesJson = (
  c: Capabilities,
  config?: Pick<SessionConfig, "nativeDuplex">,
): Record<string, unknown> => ({
  implementation_level: config === undefined ? c.implementationLevel : implementationLevelOf(c, config),
  native_duplex: c.nativeDuplex ?? "always",
  profile: c.profile ?? null,
  supports_input_append: true,
  supports_barge_in: c.supportsBargeIn,
  supports_session_resume: c.supportsSessionResume,
  supports_session_lease: true,
  supports_multi_session: true,
  supports_audio_truncate: c.supportsAudioTruncate,
  supports_tool_calls: c.supportsToolCalls,
  supports_video_input: c.supportsVideo,
  supports_speed: c.supportsSpeed ?? false,
  ref_audio: c.refAudio ?? "optional",
  chunk_period_ms: c.chunkPeriodMs,
  input_modes: c.supportsVideo ? ["append_audio_chunk", "video_frames"] : ["append_audio_chunk"],
  signal_sources: ["model_native", "client_event", "server_policy"],
  input_sample_rate_hz: c.inputSampleRateHz,
  output_sample_rate_hz: c.outputSampleRateHz,
  target_barge_in_latency_ms: null,
});

/** A tool as `session.tools[]` spells it. */
export const toolJson = (t: ToolDefinition): Record<string, unknown> => ({
  type: t.type,
  name: t.name,
  description: t.description,
  parameters: t.parameters,
});

/** `tracing` as the wire spells it (OpenAI's `workflow_name`, `group_id`, `metadata`). */
export const tracingJson = (t: TracingConfig | null): unknown =>
  t === null || t === "auto"
    ? t
    : {
        ...(t.workflowName === undefined ? {} : { workflow_name: t.workflowName }),
        ...(t.groupId === undefined ? {} : { group_id: t.groupId }),
        ...(t.metadata === undefined ? {} : { metadata: t.metadata }),
      };

/** `tool_choice` as the wire spells it. */
export const toolChoiceJson = (c: ToolChoice): unknown => (typeof c === "string" ? c : { type: c.type, name: c.name });

/** Renders the session object. Pure; the same context always renders the same JSON. */
export const sessionObject = (ctx: SessionObjectContext): Record<string, unknown> => {
  const config = withConfigDefaults(ctx.config);
  const turnDetection = turnDetectionJson(config);
  const input = formatSpellings(toWireAudioFormat(config.inputAudio));
  const output = formatSpellings(toWireAudioFormat(config.outputAudio));
  return {
    object: "realtime.session",
    type: "realtime",
    id: ctx.sessionId,
    model: config.model,
    state: "open",
    turn_state: ctx.view?.turnState ?? "idle",
    epoch: ctx.epoch,
    turn_id: ctx.turnId,
    active_request_id: null,
    active_response_id: ctx.view?.activeResponseId ?? null,
    active_response_turn_id: ctx.view?.activeResponseTurnId ?? null,
    modalities: config.outputModalities,
    output_modalities: config.outputModalities,
    instructions: config.instructions,
    voice: config.voice,
    input_audio_format: input.beta,
    output_audio_format: output.beta,
    input_sample_rate_hz: config.inputAudio.rate,
    audio: {
      input: {
        format: input.ga,
        sample_rate_hz: config.inputAudio.rate,
        turn_detection: turnDetection,
        transcription: config.inputTranscription ?? null,
        noise_reduction: config.inputNoiseReduction ?? null,
      },
      output: { format: output.ga, voice: config.voice, speed: config.speed },
    },
    turn_detection: turnDetection,
    input_audio_transcription: config.inputTranscription ?? null,
    input_audio_noise_reduction: config.inputNoiseReduction ?? null,
    tools: config.tools.map(toolJson),
    tool_choice: toolChoiceJson(config.toolChoice),
    temperature: config.temperature,
    max_response_output_tokens: config.maxResponseOutputTokens,
    max_output_tokens: config.maxResponseOutputTokens,
    ref_audio:
      config.refAudio === null
        ? null
        : { mime_type: config.refAudio.mimeType, bytes: config.refAudio.bytes, sha256: config.refAudio.sha256 },
    tracing: tracingJson(config.tracing),
    idle_timeout_s: config.idleTimeoutS,
    overlap_policy: config.overlapPolicy,
    overlap_short_ack_ms: config.overlapShortAckMs,
    overlap_barge_in_ms: config.overlapBargeInMs,
    overlap_silence_rms: config.overlapSilenceRms,
    playback_commit_policy: config.playbackCommitPolicy,
    playback: {
      generated_ms: Math.floor(ctx.view?.playback.generatedMs ?? 0),
      sent_ms: Math.floor(ctx.view?.playback.sentMs ?? 0),
      played_ms: Math.floor(ctx.view?.playback.playedMs ?? 0),
      committed_ms: Math.floor(ctx.view?.playback.committedMs ?? 0),
    },
    extra_body: {
      auto_response: config.autoResponse,
      native_duplex: config.nativeDuplex,
      response_timeout_ms: config.responseTimeoutMs,
      // Shown once set: sessions recorded before it was read render as they did.
      ...(config.forceListenCount === undefined ? {} : { force_listen_count: config.forceListenCount }),
    },
    capabilities: capabilitiesJson(ctx.capabilities, config),
  };
};
