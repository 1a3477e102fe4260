/**
 * Audio conversion the engine needs before VAD and the runner (DESIGN.md: "audio codecs and resampling" live in
 * src/infra). A resampler is stateful per stream so chunk edges do not click.
 */
export interface Resampler {
  /** PCM16 mono samples at the source rate in, samples at the target rate out. */
  push(samples: Int16Array): Int16Array;
  /** Frees what the stream holds outside the JavaScript heap, where it holds something; called at its end. */
  close?(): void;
}

/** Makes a streaming resampler from `fromHz` to `toHz` (identity when equal). */
export type ResamplerFactory = (fromHz: number, toHz: number) => Resampler;
