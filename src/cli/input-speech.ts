import { initialEndpointer, SERVER_VAD_DEFAULTS, stepEndpointer } from "../domain/index.ts";
import { type EncodedWav, resamplePcm16 } from "../infra/audio/index.ts";
import { createSileroVad } from "../infra/vad/index.ts";
import { decodeAudio } from "../protocol/index.ts";

/** One stretch of speech in an input, ms from its start. */
export interface SpeechSegment {
  readonly startMs: number;
  /** Where the speech ends: the start of the silence that ended it. */
  readonly endMs: number;
  /** Where server VAD's endpointer stops it (`speech_stopped.audio_end_ms`): `endMs` plus the silence window. */
  readonly stoppedAtMs: number;
}

/** The rate Silero VAD v5 runs at (Hz) and its frame (ms). */
const VAD_RATE = 16000;
const FRAME_MS = 32;

/**
 * Where the user speaks in a client's input, found on the client: the server sends no speech events without turn
 * detection (BEHAVIOUR.md, "Turn-taking"), so `duplex demo` and the model-native lane of `duplex bench load` find
 * the speech they send themselves. Silero VAD v5 (the server's own model, on this thread) runs over the samples at
 * 16 kHz, and the endpointing rule of the server's turn detection with its defaults (BEHAVIOUR.md, "Turn-taking")
 * turns its frame probabilities into segments, as the server's VAD would hear them. Speech still going at the end
 * ends there (`stoppedAtMs` = `endMs`).
 * @param samples PCM16 mono at `rateHz` Hz.
 * @throws Error when the model cannot be loaded.
 */
export const speechOf = async (samples: Int16Array, rateHz: number): Promise<SpeechSegment[]> => {
  const at16k = rateHz === VAD_RATE ? samples : resamplePcm16(samples, rateHz, VAD_RATE);
  const vad = await createSileroVad({ thread: "main" });
  let probabilities: number[];
  try {
    const stream = vad.createStream();
    probabilities = await stream.process(at16k);
    stream.close();
  } finally {
    await vad.close();
  }
  const { state, events } = stepEndpointer(initialEndpointer, SERVER_VAD_DEFAULTS, probabilities, 0, FRAME_MS);
  const segments: SpeechSegment[] = [];
  let start: number | null = null;
  for (const event of events) {
    if (event.type === "speech_started") start = event.speechStartMs;
    else if (start !== null) {
      const endMs = event.audioEndMs - SERVER_VAD_DEFAULTS.silenceDurationMs;
      segments.push({ startMs: start, endMs, stoppedAtMs: event.audioEndMs });
      start = null;
    }
  }
  if (start !== null && state.phase === "speech") {
    const endMs = (at16k.length / VAD_RATE) * 1000;
    segments.push({ startMs: start, endMs, stoppedAtMs: endMs });
  }
  return segments;
};

/**
 * {@link speechOf} a WAV file of any encoding the demo sends (PCM16, float32, G.711).
 * @throws Error when the file's bytes are not whole samples of its encoding, or the model cannot be loaded.
 */
export const speechInInput = async (wav: EncodedWav): Promise<SpeechSegment[]> => {
  const decoded = decodeAudio({ encoding: wav.encoding, rate: wav.sampleRate }, wav.data);
  if (!(decoded instanceof Int16Array)) throw new Error(decoded.message);
  return speechOf(decoded, wav.sampleRate);
};
