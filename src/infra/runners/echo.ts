import {
  type Capabilities,
  inModelNativeLane,
  type RunnerUnit,
  type SessionConfig,
  type StageOutput,
} from "../../domain/index.ts";
import type { ModelRunner, RunnerSession } from "../../engine/ports/index.ts";
import { ECHO_INPUT_RATE as INPUT_RATE } from "./echo-heard-audio.ts";
import { createEchoTurns } from "./echo-turns.ts";
import { createEchoVoice, ECHO_OUTPUT_RATE as OUTPUT_RATE } from "./echo-voice.ts";

/** Options of the echo runner. Rates in Hz, times in ms. */
export interface EchoRunnerOptions {
  /** Length of each spoken chunk (one model unit), ms. Default 200. */
  readonly chunkPeriodMs?: number;
  /**
   * How much faster than real time the chunks are produced (a real model generates ahead of playback).
   * Default 4; `Infinity` emits a whole response at once.
   */
  readonly speedFactor?: number;
  /** The longest utterance echoed, ms; longer speech keeps its last part. Default 15000. */
  readonly maxUtteranceMs?: number;
}

/**
 * The `echo` runner (DESIGN.md, "Ports": ModelRunner): a real duplex behaviour on real audio. It keeps the audio it
 * is given; when the session's server VAD (Silero, run by the engine) reports that the user's speech stopped, it
 * speaks that utterance back, resampled to 24 kHz, in `chunkPeriodMs` units, with a transcript that says what it
 * is doing. In the turn lane it speaks when asked (`respond`). An abort (barge-in, cancel) stops it at once.
 */
export const createEchoRunner = (options: EchoRunnerOptions = {}): ModelRunner => {
  const settings: EchoSettings = {
    chunkPeriodMs: options.chunkPeriodMs ?? 200,
    speedFactor: options.speedFactor ?? 4,
    maxUtteranceMs: options.maxUtteranceMs ?? 15000,
  };
  const capabilities: Capabilities = {
    implementationLevel: "model_native_duplex",
    chunkPeriodMs: settings.chunkPeriodMs,
    supportsBargeIn: true,
    supportsSessionResume: true,
    supportsAudioTruncate: true,
    supportsToolCalls: false,
    supportsVideo: false,
    inputSampleRateHz: INPUT_RATE,
    outputSampleRateHz: OUTPUT_RATE,
  };
  const open = new Set<RunnerSession>();
  return {
    name: "echo",
    capabilities,
    open(session, emit) {
      const opened = openEchoSession(session.config, emit, settings, () => open.delete(opened));
      open.add(opened);
      return opened;
    },
    async close() {
      await Promise.all([...open].map((s) => s.close()));
    },
  };
};

/** The echo runner's options with their defaults. ms. */
interface EchoSettings {
  readonly chunkPeriodMs: number;
  readonly speedFactor: number;
  readonly maxUtteranceMs: number;
}

/**
 * One echo session: its utterances and turns (echo-turns.ts), the text it was last given, and its voice
 * (echo-voice.ts). `closed` is told once it is closed.
 */
const openEchoSession = (
  initial: SessionConfig,
  emit: (output: StageOutput) => void,
  settings: EchoSettings,
  closed: () => void,
): RunnerSession => {
  let config = initial;
  const turns = createEchoTurns(settings.maxUtteranceMs);
  let epoch = 0;
  let isClosed = false;
  const voice = createEchoVoice({ ...settings, emit, epoch: () => epoch, closed: () => isClosed });
  /** A text-modality answer's subject: the text the session last wrote (the runner has no speech recognition). */
  let lastText: string | null = null;

  /** A text-modality answer: what the runner last heard or was given, said in words. */
  const respondInText = (unitEpoch: number, written: string | null): void => {
    const said =
      written !== null
        ? `You wrote: ${written}`
        : `I heard ${((turns.last()?.length ?? 0) / INPUT_RATE).toFixed(1)} seconds of speech.`;
    for (const word of said.split(/(?<= )/)) emit({ kind: "text", epoch: unitEpoch, text: word });
    emit({ kind: "end_of_turn", epoch: unitEpoch });
  };

  /**
   * Speaks the turn it answers (its own commit's, else the last one heard, else half a second of silence: a response
   * to instructions alone, as the session refuses one with nothing at all to respond to).
   */
  const respond = (unit: Extract<RunnerUnit, { kind: "respond" }>): void => {
    if (!unit.modalities.includes("audio")) {
      // An answer to given input (`response.input`) echoes its last text, else what the session said.
      const given = (unit.input ?? []).findLast((item) => item.text !== "")?.text;
      respondInText(unit.epoch, given ?? lastText);
      return;
    }
    voice.speak(turns.answering(unit.inReplyTo ?? null) ?? new Int16Array(Math.round(INPUT_RATE / 2)), unit.epoch);
  };

  const submit = (unit: RunnerUnit): void => {
    switch (unit.kind) {
      case "append": {
        const heard = turns.append(unit, inModelNativeLane(config));
        if (heard !== null) voice.speak(heard, unit.epoch);
        return;
      }
      case "commit":
        turns.commit(unit, inModelNativeLane(config));
        return;
      case "respond":
        respond(unit);
        return;
      case "text":
        lastText = unit.text;
        return;
      case "playback":
        // Neither keeps a history of its own to correct.
        return;
      case "function_call_output":
        // The echo model calls no tools: an output answers nothing it asked.
        return;
      case "item":
        // It keeps no conversation.
        return;
      case "clear":
        turns.clear();
        return;
      default: {
        const unhandled: never = unit;
        throw new Error(`echo runner: unhandled unit ${JSON.stringify(unhandled)}`);
      }
    }
  };

  const session: RunnerSession = {
    submit(unit: RunnerUnit) {
      if (isClosed || unit.epoch < epoch) return;
      // A unit of a newer epoch means the old epoch was cancelled: stop what it was saying.
      if (unit.epoch > epoch) session.abort(unit.epoch);
      epoch = unit.epoch;
      submit(unit);
    },
    abort(newEpoch) {
      epoch = Math.max(epoch, newEpoch);
      voice.stop();
    },
    configure(next) {
      config = next;
    },
    async close() {
      isClosed = true;
      voice.stop();
      closed();
    },
  };
  return session;
};
