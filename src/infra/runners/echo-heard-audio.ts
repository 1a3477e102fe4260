/**
 * What the echo runner has heard: the input samples kept since the last reset, on the input clock, from which it
 * cuts the utterances it speaks back. Samples are PCM16 mono at 16 kHz; positions are ms of the input clock.
 */

/** The echo runner's input rate (Hz). */
export const ECHO_INPUT_RATE = 16000;

/** The input samples an echo session keeps. */
export interface HeardAudio {
  /** Keeps `samples`, heard from `startMs` (the start of the kept audio when nothing is kept). */
  push(samples: Int16Array, startMs: number): void;
  /** The samples from `fromMs` to `toMs`, at most the last `maxUtteranceMs` of them (a copy). */
  cut(fromMs: number, toMs: number): Int16Array;
  /** Drops the samples before `untilMs`. */
  forget(untilMs: number): void;
  /** The end of the kept audio on the input clock (ms). */
  endMs(): number;
  /** Drops everything (`input_audio_buffer.clear`). */
  clear(): void;
}

/** An empty buffer whose cuts are at most `maxUtteranceMs` long. */
export const createHeardAudio = (maxUtteranceMs: number): HeardAudio => {
  /** Input samples kept since the last reset, starting at `keptFromMs` on the input clock. */
  let kept: Int16Array[] = [];
  let keptFromMs = 0;
  let keptSamples = 0;

  const flat = (): Int16Array => {
    const all = new Int16Array(keptSamples);
    let offset = 0;
    for (const chunk of kept) {
      all.set(chunk, offset);
      offset += chunk.length;
    }
    kept = [all];
    return all;
  };

  return {
    push(samples, startMs) {
      if (keptSamples === 0) keptFromMs = startMs;
      kept.push(samples);
      keptSamples += samples.length;
    },
    cut(fromMs, toMs) {
      const all = flat();
      const start = Math.max(0, Math.round(((fromMs - keptFromMs) * ECHO_INPUT_RATE) / 1000));
      const end = Math.min(all.length, Math.round(((toMs - keptFromMs) * ECHO_INPUT_RATE) / 1000));
      const maxSamples = Math.round((maxUtteranceMs * ECHO_INPUT_RATE) / 1000);
      return all.slice(Math.max(start, end - maxSamples), end);
    },
    /**
     * Whole chunks, then the head of the first one kept as a view (no copy). It runs on every append outside
     * speech, so it must not copy what is kept (a copy of a second of audio per append per session was most of the
     * server's garbage under load).
     */
    forget(untilMs) {
      let drop = Math.max(0, Math.min(keptSamples, Math.round(((untilMs - keptFromMs) * ECHO_INPUT_RATE) / 1000)));
      if (drop === 0) return;
      keptSamples -= drop;
      keptFromMs += (drop * 1000) / ECHO_INPUT_RATE;
      let first = 0;
      while (first < kept.length && (kept[first]?.length ?? 0) <= drop) {
        drop -= kept[first]?.length ?? 0;
        first += 1;
      }
      kept = kept.slice(first);
      const head = kept[0];
      if (head !== undefined && drop > 0) kept[0] = head.subarray(drop);
    },
    endMs: () => keptFromMs + (keptSamples * 1000) / ECHO_INPUT_RATE,
    clear() {
      kept = [];
      keptSamples = 0;
    },
  };
};
