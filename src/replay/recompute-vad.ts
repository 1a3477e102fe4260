import { stepsOf } from "../engine/log.ts";
import type { RecordedEntry, VadModel } from "../engine/ports/index.ts";

/** How far Silero's probabilities, computed again on a recording's audio, are from the recorded ones. */
export interface VadRecomputation {
  readonly appends: number;
  readonly frames: number;
  /** Largest and mean absolute difference of a frame's probability (0..1). */
  readonly max_abs_diff: number;
  readonly mean_abs_diff: number;
  /** Frames whose probabilities differ by more than `tolerance`. */
  readonly frames_over_tolerance: number;
  readonly tolerance: number;
  /** The first append whose probabilities differ by more than `tolerance`, or null. */
  readonly first_over: {
    readonly revision: number;
    readonly frame: number;
    readonly recorded: number;
    readonly recomputed: number;
  } | null;
}

/**
 * Runs the VAD `model` again on every append of a recording, as the session host ran it (one stream per session,
 * started afresh after a restart or a rebuild), and compares each frame's probability with the recorded one
 * (issue 20, part 4: `duplex replay --recompute-vad`). Audio is the recorded PCM16 at the model's input rate.
 */
export const recomputeVad = async (
  entries: readonly RecordedEntry[],
  model: VadModel,
  tolerance = 1e-3,
): Promise<VadRecomputation> => {
  const stream = model.createStream();
  let appends = 0;
  let frames = 0;
  let max = 0;
  let sum = 0;
  let over = 0;
  let first: VadRecomputation["first_over"] = null;
  for (const step of stepsOf(entries)) {
    if (step.input.type === "SessionRecovered" || step.input.type === "SessionOwned") stream.reset();
    if (step.input.type !== "CommandReceived") continue;
    const command = step.input.data.command;
    if (command.type !== "input_audio_buffer.append") continue;
    appends += 1;
    const audio = command.audio;
    const samples = new Int16Array(audio.buffer.slice(audio.byteOffset, audio.byteOffset + (audio.byteLength & ~1)));
    const recomputed = await stream.process(samples);
    for (const [i, recorded] of command.vad.entries()) {
      const diff = Math.abs((recomputed[i] ?? Number.NaN) - recorded);
      const d = Number.isNaN(diff) ? 1 : diff;
      frames += 1;
      sum += d;
      max = Math.max(max, d);
      if (d > tolerance) {
        over += 1;
        first ??= { revision: step.revision, frame: i, recorded, recomputed: recomputed[i] ?? Number.NaN };
      }
    }
  }
  return {
    appends,
    frames,
    max_abs_diff: max,
    mean_abs_diff: frames === 0 ? 0 : sum / frames,
    frames_over_tolerance: over,
    tolerance,
    first_over: first,
  };
};
