import { createHash } from "node:crypto";
import type { AudioAppend, Command, SessionState } from "../domain/index.ts";
import type { DecodedFrame } from "../protocol/index.ts";
import { errorMessage } from "./error-message.ts";
import type { Resampler, ResamplerFactory, VadStream } from "./ports/index.ts";

/**
 * Turns a session's decoded client frames into the commands its log records (DESIGN.md, "The session host"): an
 * append's audio resampled to the runner's rate (one resampler stream per input rate) and its Silero VAD
 * probabilities, computed when the frame arrives or when it is decided. `reset` after a rebuild from the log:
 * the resampler and the VAD start afresh, as after a restart.
 */
export class CommandPreparation {
  private resampler: { rate: number; resampler: Resampler } | null = null;

  constructor(
    private readonly createResampler: ResamplerFactory,
    private readonly vad: VadStream | null,
  ) {}

  reset(): void {
    this.resampler = null;
    this.vad?.reset();
  }

  /**
   * The command a decoded client frame records, under the session's `state`: a second `session.resume` refused, an
   * event ack stamped with the head seq it was checked against (`headSeq`), an append resampled to the runner's
   * rate and run through VAD, a `ref_audio` clip stamped with its SHA-256; any other frame as it is.
   */
  async commandOf(frame: DecodedFrame, state: SessionState, headSeq: number): Promise<Command> {
    switch (frame.type) {
      case "session.resume":
        // A resume on a socket that already holds a session: refused, the session goes on.
        return {
          type: "invalid",
          eventId: frame.eventId,
          code: "invalid_session_resume",
          message: "session.resume must be the first message on a new socket",
          param: null,
          eventType: "session.resume",
        };
      case "session.event_ack":
        // The head is stamped in mailbox order, so the log records what the ack was checked against.
        return { ...frame, headSeq };
      case "input_audio_buffer.append":
        if (frame.videoFramesError !== null && state.capabilities.supportsVideo) {
          return {
            type: "invalid",
            eventId: frame.eventId,
            code: "invalid_video_frames",
            message: frame.videoFramesError.message,
            param: frame.videoFramesError.param,
            eventType: "input_audio_buffer.append",
          };
        }
        return audioEndRefusal(frame, state) ?? this.prepareAppend(frame, state);
      case "session.update": {
        const clip = frame.patch.refAudio;
        // The clip's digest is stamped before the command is recorded: the decider compares clips by it.
        if (clip === undefined || clip === null) return frame;
        const sha256 = createHash("sha256").update(clip.audio).digest("hex");
        return { ...frame, patch: { ...frame.patch, refAudio: { ...clip, sha256 } } };
      }
      default:
        return frame;
    }
  }

  private async prepareAppend(
    frame: Extract<DecodedFrame, { type: "input_audio_buffer.append" }>,
    state: SessionState,
  ): Promise<AudioAppend | Extract<Command, { type: "invalid" }>> {
    const target = state.capabilities.inputSampleRateHz;
    if (this.resampler === null || this.resampler.rate !== frame.sampleRateHz) {
      this.resampler = { rate: frame.sampleRateHz, resampler: this.createResampler(frame.sampleRateHz, target) };
    }
    const { pcm16 } = frame;
    // The decoder's bytes are an array of their own; a view is copied to the 2-byte alignment Int16Array needs.
    const source =
      pcm16.byteOffset % 2 === 0 && pcm16.byteLength % 2 === 0
        ? new Int16Array(pcm16.buffer, pcm16.byteOffset, pcm16.byteLength / 2)
        : new Int16Array(pcm16.slice(0, pcm16.byteLength & ~1).buffer);
    const samples = this.resampler.resampler.push(source);
    let vad: number[] = [];
    try {
      if (this.vad !== null) vad = await this.vad.process(samples);
    } catch (error) {
      // Refused like any command that cannot be carried out: nothing of it is buffered, and the session goes on.
      return {
        type: "invalid",
        eventId: frame.eventId,
        code: "server_vad_unavailable",
        message: `server VAD could not process this audio: ${errorMessage(error)}`,
        param: null,
        eventType: "input_audio_buffer.append",
      };
    }
    let sum = 0;
    for (let i = 0; i < samples.length; i++) sum += ((samples[i] as number) / 32768) ** 2;
    const rms = samples.length === 0 ? 0 : Math.sqrt(sum / samples.length);
    // Camera frames are kept (and logged) only where the model consumes video; elsewhere they are ignored.
    const frames = state.capabilities.supportsVideo ? frame.videoFrames : [];
    return {
      type: "input_audio_buffer.append",
      eventId: frame.eventId,
      audio: new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength),
      isSpeech: frame.isSpeech,
      vad,
      rms: Math.round(rms * 1e6) / 1e6,
      ...(frames.length === 0 ? {} : { videoFrames: frames }),
      ...(frame.clientVad === null ? {} : { clientVad: frame.clientVad }),
      ...(frame.forceListen ? { forceListen: true as const } : {}),
    };
  }
}

/**
 * How far (ms) an append's `audio_end_ms` may be from where it ends on the session's input clock: the clock counts
 * the audio after resampling to the runner's rate, whose filter may hold back a few ms until later chunks.
 */
export const AUDIO_END_TOLERANCE_MS = 10;

/**
 * The refusal of an append whose `audio_end_ms` (reference, "input_audio_buffer.append") is not where its audio ends
 * on the session's input clock (`state.input.clockMs` plus the chunk's duration), as `bad_event` naming both; null
 * when it agrees or says nothing. Checked before the audio is resampled or run through VAD, so a refused append
 * changes nothing, there either.
 */
const audioEndRefusal = (
  frame: Extract<DecodedFrame, { type: "input_audio_buffer.append" }>,
  state: SessionState,
): Extract<Command, { type: "invalid" }> | null => {
  if (frame.audioEndMs === null) return null;
  const endsAt = state.input.clockMs + (frame.pcm16.byteLength / 2 / frame.sampleRateHz) * 1000;
  if (Math.abs(frame.audioEndMs - endsAt) <= AUDIO_END_TOLERANCE_MS) return null;
  return {
    type: "invalid",
    eventId: frame.eventId,
    code: "bad_event",
    message: `audio_end_ms ${frame.audioEndMs} is not where this audio ends on the session's input clock (${Math.round(endsAt)} ms: ${Math.round(state.input.clockMs)} ms appended before it)`,
    param: "audio_end_ms",
    eventType: "input_audio_buffer.append",
  };
};
