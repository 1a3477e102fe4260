/**
 * The echo runner's voice: speaks an utterance back, resampled from 16 kHz to 24 kHz, as `speak`, audio chunks of
 * `chunkPeriodMs` with their share of a transcript that says what it is doing, and `end_of_turn`, paced at
 * `chunkPeriodMs / speedFactor` ms a chunk. One utterance waits behind the one being spoken (the latest heard).
 */
import type { StageOutput } from "../../domain/index.ts";
import { pcm16ToBytes } from "../audio/pcm.ts";
import { resamplePcm16 } from "../audio/resample.ts";
import { ECHO_INPUT_RATE } from "./echo-heard-audio.ts";

/** The echo runner's output rate (Hz). */
export const ECHO_OUTPUT_RATE = 24000;

/** One session's voice. */
export interface EchoVoice {
  /** Speaks `utterance` (16 kHz samples) in `epoch`, or, while it speaks, keeps it as the next one. */
  speak(utterance: Int16Array, epoch: number): void;
  /** Stops at once and forgets the utterance waiting (an abort). */
  stop(): void;
}

/** What a voice needs from its session. ms. */
export interface EchoVoiceOptions {
  readonly chunkPeriodMs: number;
  /** `Infinity`: a whole response at once. */
  readonly speedFactor: number;
  readonly emit: (output: StageOutput) => void;
  /** The session's epoch now: a chunk of an older one is not spoken. */
  readonly epoch: () => number;
  readonly closed: () => boolean;
}

/** The voice of one echo session. */
export const createEchoVoice = (options: EchoVoiceOptions): EchoVoice => {
  const { chunkPeriodMs, speedFactor, emit } = options;
  let timer: NodeJS.Timeout | null = null;
  /**
   * The utterance waiting for the current response to finish: the latest one heard. Utterances heard while it
   * speaks are coalesced, not queued without bound (issue 8: a queue of every utterance grew the process without
   * end and answered ever older speech).
   */
  let queued: { utterance: Int16Array; epoch: number }[] = [];
  let speaking = false;

  const speak = (utterance: Int16Array, unitEpoch: number): void => {
    if (speaking) {
      queued = [{ utterance, epoch: unitEpoch }];
      return;
    }
    speaking = true;
    const out = resamplePcm16(utterance, ECHO_INPUT_RATE, ECHO_OUTPUT_RATE);
    const seconds = utterance.length / ECHO_INPUT_RATE;
    const text = `I heard ${seconds.toFixed(1)} seconds of speech, and this is how it sounded.`;
    const chunkSamples = Math.round((chunkPeriodMs * ECHO_OUTPUT_RATE) / 1000);
    const chunks = Math.max(1, Math.ceil(out.length / chunkSamples));
    let index = 0;
    let textSent = 0;
    emit({ kind: "speak", epoch: unitEpoch });
    const step = (): void => {
      timer = null;
      if (options.closed() || unitEpoch !== options.epoch()) {
        speaking = false;
        return;
      }
      const audio = out.subarray(index * chunkSamples, (index + 1) * chunkSamples);
      const textEnd = Math.round((text.length * (index + 1)) / chunks);
      emit({ kind: "audio", epoch: unitEpoch, audio: pcm16ToBytes(audio), transcript: text.slice(textSent, textEnd) });
      textSent = textEnd;
      index += 1;
      if (index >= chunks) {
        emit({ kind: "end_of_turn", epoch: unitEpoch });
        speaking = false;
        const next = queued.shift();
        if (next !== undefined && next.epoch === options.epoch()) speak(next.utterance, next.epoch);
        return;
      }
      timer = setTimeout(step, Number.isFinite(speedFactor) ? chunkPeriodMs / speedFactor : 0);
    };
    step();
  };

  return {
    speak,
    stop() {
      if (timer !== null) clearTimeout(timer);
      timer = null;
      speaking = false;
      queued = [];
    },
  };
};
