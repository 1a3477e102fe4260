/**
 * A script turn's actions as beats (the scripted runner's timeline): each `ScriptAction` becomes the stage outputs
 * it emits, each with the delay after the previous one. `speak` is synthetic speech cut into `chunk_period_ms` audio
 * chunks, each with its share of the transcript; `text` is word deltas; `wait_ms` is a silent beat.
 */
import type { StageOutput } from "../../domain/index.ts";
import { pcm16ToBytes } from "../audio/pcm.ts";
import type { ScriptAction } from "./script.ts";
import { synthesizeSpeech } from "./synthetic-speech.ts";

/** One timed output of a turn: emitted `delayMs` after the previous beat (`null`: in the same tick). */
export interface Beat {
  readonly delayMs: number | null;
  readonly output: StageOutput | null;
}

/** How a runner's beats are cut and paced. */
export interface BeatTiming {
  /** Output rate of the synthetic speech (Hz). */
  readonly outputRateHz: number;
  /** Samples of one audio chunk (one `chunk_period_ms`). */
  readonly chunkSamples: number;
  /** ms between audio chunks (`chunk_period_ms / speed_factor`; 0: back to back). */
  readonly chunkDelayMs: number;
  /** ms of synthetic speech per character when a `speak` gives no `duration_ms`. */
  readonly msPerCharacter: number;
}

/**
 * Turns one action into beats, stamped with `epoch`.
 * @param fill fills the `{{function_call_output}}` placeholders of `speak` and `text`.
 * @param itemId the user item a commit's transcript names (absent: the last committed one).
 */
export type BeatsOf = (
  action: ScriptAction,
  epoch: number,
  fill: (text: string) => string,
  itemId: string | undefined,
) => Beat[];

/** Splits text into word deltas that concatenate back to it ("Hello ", "world."). */
const words = (text: string): string[] => text.split(/(?<=\s)(?=\S)/);

const at = (output: StageOutput): Beat[] => [{ delayMs: 0, output }];

/** The beats of a runner with `timing`; synthetic speech is made once per text and pace, then kept. */
export const createBeats = (timing: BeatTiming): BeatsOf => {
  const speech = new Map<string, Int16Array>();
  const speechFor = (text: string, msPerChar: number): Int16Array => {
    const key = `${msPerChar}:${text}`;
    let samples = speech.get(key);
    if (samples === undefined) {
      samples = synthesizeSpeech(text, timing.outputRateHz, msPerChar);
      speech.set(key, samples);
    }
    return samples;
  };

  /** `speak`, then the audio chunks, the first in the same tick, each later one `chunkDelayMs` after the last. */
  const speakBeats = (text: string, durationMs: number | undefined, epoch: number): Beat[] => {
    const { chunkSamples, chunkDelayMs } = timing;
    const samples = speechFor(text, durationMs === undefined ? timing.msPerCharacter : durationMs / text.length);
    const chunks = Math.max(1, Math.ceil(samples.length / chunkSamples));
    const beats: Beat[] = [{ delayMs: 0, output: { kind: "speak", epoch } }];
    let textSent = 0;
    for (let i = 0; i < chunks; i++) {
      const end = Math.min(samples.length, (i + 1) * chunkSamples);
      const textEnd = samples.length === 0 ? text.length : Math.round((text.length * end) / samples.length);
      const audio = pcm16ToBytes(samples.slice(i * chunkSamples, end));
      const transcript = text.slice(textSent, textEnd);
      textSent = textEnd;
      beats.push({ delayMs: i === 0 ? null : chunkDelayMs, output: { kind: "audio", epoch, audio, transcript } });
    }
    return beats;
  };

  return (scripted, epoch, fill, itemId) => {
    const action =
      scripted.kind === "speak" || scripted.kind === "text" ? { ...scripted, text: fill(scripted.text) } : scripted;
    const item = itemId === undefined ? {} : { itemId };
    switch (action.kind) {
      case "speak":
        return speakBeats(action.text, action.durationMs, epoch);
      case "text":
        return words(action.text).map((text) => ({ delayMs: 0, output: { kind: "text", epoch, text } }));
      case "tool_call":
        return at({ kind: "tool_call", epoch, callId: action.callId, name: action.name, arguments: action.arguments });
      case "input_transcript":
        return at({ kind: "input_transcript", epoch, transcript: action.transcript, ...item });
      case "input_transcript_failed":
        return at({
          kind: "input_transcript_failed",
          epoch,
          code: "transcription_failed",
          message: action.message,
          ...item,
        });
      case "incomplete":
        return at({ kind: "incomplete", epoch, reason: action.reason });
      case "listen":
        return at({ kind: "listen", epoch, reason: action.reason });
      case "fail":
        return at({ kind: "failure", epoch, message: action.message });
      case "wait":
        return [{ delayMs: action.ms, output: null }];
      case "end_turn":
        return at({ kind: "end_of_turn", epoch });
      default: {
        const unhandled: never = action;
        throw new Error(`scripted runner: unhandled action ${JSON.stringify(unhandled)}`);
      }
    }
  };
};
