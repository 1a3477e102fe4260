import { stepsOf } from "../engine/log.ts";
import type { RecordedEntry } from "../engine/ports/index.ts";

/** Silero's frame, ms (512 samples at 16 kHz). */
const VAD_FRAME_MS = 32;

/**
 * The input clock on the session's (issue 21): each append's VAD frames on the input clock (ms of input), and the
 * anchors [ms of input, ms of the session] where each append's audio began (its duration before it was buffered,
 * never before the previous end) and ended (when it was buffered). `sessionMsOfInput` interpolates between them.
 */
export const inputClockOf = (
  entries: readonly RecordedEntry[],
): { clock: [number, number][]; vad: [number, number][] } => {
  const t0 = entries[0]?.metadata.at ?? 0;
  const vad: [number, number][] = [];
  const clock: [number, number][] = [];
  for (const step of stepsOf(entries)) {
    if (step.input.type !== "CommandReceived") continue;
    const command = step.input.data.command;
    if (command.type !== "input_audio_buffer.append") continue;
    const buffered = step.decisions.find((d) => d.envelope.event.type === "AudioBuffered")?.envelope;
    if (buffered?.event.type !== "AudioBuffered") continue;
    const { clockMs, durationMs } = buffered.event.data;
    const start = clockMs - durationMs;
    for (const [i, p] of command.vad.entries()) vad.push([Math.round(start + i * VAD_FRAME_MS), p]);
    const at = Math.round(buffered.metadata.at - t0);
    const last = clock.at(-1);
    clock.push([Math.round(start), Math.max(last?.[1] ?? 0, at - Math.round(durationMs))], [Math.round(clockMs), at]);
  }
  return { clock, vad };
};

/** ms of the session of `inputMs` on the input clock: linear between the anchors of `inputClockOf`. */
export const sessionMsOfInput = (clock: readonly (readonly [number, number])[], inputMs: number): number => {
  const first = clock[0];
  if (first === undefined) return inputMs;
  if (inputMs <= first[0]) return first[1] - (first[0] - inputMs);
  for (let i = 1; i < clock.length; i += 1) {
    const [x1, y1] = clock[i] as readonly [number, number];
    if (inputMs <= x1) {
      const [x0, y0] = clock[i - 1] as readonly [number, number];
      return x1 === x0 ? y1 : y0 + ((inputMs - x0) * (y1 - y0)) / (x1 - x0);
    }
  }
  const last = clock.at(-1) as readonly [number, number];
  return last[1] + (inputMs - last[0]);
};
