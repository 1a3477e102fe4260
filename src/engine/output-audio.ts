import type { DeliveredAudio, SessionState, StageOutput } from "../domain/index.ts";
import { encodeAudio } from "../protocol/index.ts";
import type { Resampler, ResamplerFactory } from "./ports/index.ts";

/**
 * A session's output audio conversion (BEHAVIOUR.md, "Audio formats"): the runner speaks PCM16 at its output rate;
 * a session that asked for another format (PCM16 at another rate, G.711 μ-law or A-law at 8 kHz, float32) gets the
 * model's audio resampled and encoded before the output is recorded, one resampler stream per response (no filter
 * history bleeds from one answer into the next). The playback ledger counts ms of what the client receives.
 */
export interface OutputAudio {
  /**
   * The audio an `audio` output is sent as when decided on `state`, or null when it goes out as the runner made it
   * (the session's format is the runner's), or will be dropped (another epoch), or is no audio.
   */
  convert(state: SessionState, output: StageOutput): DeliveredAudio | null;
  /** Frees the resampler of the response being converted. */
  close(): void;
}

/** `createResampler`: a filtered streaming resampler; its `close`, when it has one, is called at a stream's end. */
export const createOutputAudio = (createResampler: ResamplerFactory): OutputAudio => {
  let stream: { readonly key: string; readonly resampler: Resampler } | null = null;
  const close = (): void => {
    stream?.resampler.close?.();
    stream = null;
  };
  return {
    convert(state, output) {
      if (output.kind !== "audio" || output.epoch !== state.epoch) return null;
      const target = state.config.outputAudio;
      const runnerRate = state.capabilities.outputSampleRateHz;
      if (target.format === "pcm16" && target.rate === runnerRate) {
        close();
        return null;
      }
      // The response this audio belongs to: the active one, or the one it opens.
      const response = state.response === null ? state.responseCount + 1 : state.responseCount;
      const key = `${response}:${target.format}:${target.rate}`;
      if (stream?.key !== key) {
        close();
        stream = { key, resampler: createResampler(runnerRate, target.rate) };
      }
      const bytes = output.audio;
      // PCM16 needs 2-byte alignment for an Int16Array view; a view at an odd offset is copied.
      const samples =
        bytes.byteOffset % 2 === 0
          ? new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2)
          : new Int16Array(bytes.slice().buffer);
      const resampled = stream.resampler.push(samples);
      return {
        audio: encodeAudio({ encoding: target.format, rate: target.rate }, resampled),
        format: target.format,
        rate: target.rate,
      };
    },
    close,
  };
};
