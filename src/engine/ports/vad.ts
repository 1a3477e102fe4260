/**
 * Voice activity detection port (DESIGN.md, "Ports": Vad). The model is shared across sessions; each session has
 * its own stream holding the recurrent state and the leftover samples between calls.
 */
export interface VadModel {
  /** Sample rate the model runs at, in Hz (16000 for Silero VAD v5). */
  readonly sampleRate: number;
  /** Samples per frame (512 at 16 kHz = 32 ms). */
  readonly frameSamples: number;
  /** A new per-session stream with zeroed state. */
  createStream(): VadStream;
  close(): Promise<void>;
}

export interface VadStream {
  /**
   * Pushes PCM16 mono samples at `sampleRate` and returns the speech probability (0..1) of every complete frame
   * that these samples finished, in order. Leftover samples wait for the next call.
   */
  process(samples: Int16Array): Promise<number[]>;
  /** Zeroes the recurrent state, the 64-sample context and the leftover samples. */
  reset(): void;
  /** Releases the stream (its session has ended); calls waiting on it resolve with what already ran. */
  close(): void;
}
