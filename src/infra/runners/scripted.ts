import {
  type Capabilities,
  inModelNativeLane,
  type RunnerUnit,
  type SessionConfig,
  type StageOutput,
} from "../../domain/index.ts";
import type { ModelRunner, RunnerSession } from "../../engine/ports/index.ts";
import { pcm16ToBytes } from "../audio/pcm.ts";
import type { Script, ScriptAction, ScriptMatch, ScriptTrigger, ScriptTurn } from "./script.ts";

/** Options of the scripted runner. Times in ms. */
export interface ScriptedRunnerOptions {
  /** Overrides the script's `speed_factor`: `Infinity` = audio chunks back to back (one macrotask apart). */
  readonly speedFactor?: number;
  /** Length of synthetic speech per character of `speak` text, ms. Default 60. */
  readonly msPerCharacter?: number;
}

const INPUT_RATE = 16000;
const OUTPUT_RATE = 24000;

/** Harmonics of the synthetic voice and their weights (1/k), normalised so the peak stays under `PEAK`. */
const HARMONICS = [1, 2, 3, 4, 5, 6];
const PEAK = 0.5 * 32767;
const HARMONIC_SUM = HARMONICS.reduce((sum, k) => sum + 1 / k, 0);
/** Syllables per second of the amplitude envelope. */
const SYLLABLE_HZ = 4.5;

/**
 * Deterministic speech-like PCM16 for `text`: a voiced tone (a fundamental of 95..175 Hz chosen per character,
 * gliding, with six harmonics) under a syllable-rate amplitude envelope; spaces and punctuation are quieter, as
 * pauses. `msPerCharacter` ms per character, so the duration is `text.length * msPerCharacter` ms. Pure: the same
 * text gives the same samples.
 *
 * @param sampleRate output rate (Hz).
 * @returns PCM16 samples at `sampleRate`, `round(text.length * msPerCharacter * sampleRate / 1000)` of them.
 */
export const synthesizeSpeech = (text: string, sampleRate: number, msPerCharacter = 60): Int16Array => {
  const samplesPerChar = (msPerCharacter * sampleRate) / 1000;
  const total = Math.round(text.length * samplesPerChar);
  const out = new Int16Array(total);
  const smoothing = 1 - Math.exp(-1 / (0.008 * sampleRate));
  const fade = Math.max(1, Math.round(0.01 * sampleRate));
  let phase = 0;
  let f0 = 130;
  let gain = 0;
  for (let i = 0; i < total; i++) {
    const index = Math.min(text.length - 1, Math.floor(i / samplesPerChar));
    const char = text[index] ?? " ";
    const code = text.charCodeAt(index);
    const voiced = /\p{L}|\p{N}/u.test(char);
    const targetF0 = 95 + ((code * 37) % 80);
    const targetGain = voiced ? 1 : /\s/.test(char) ? 0.3 : 0.2;
    f0 += (targetF0 - f0) * smoothing;
    gain += (targetGain - gain) * smoothing;
    phase += (2 * Math.PI * f0) / sampleRate;
    if (phase > 2 * Math.PI * 1000) phase -= 2 * Math.PI * 1000;
    const t = i / sampleRate;
    const syllable = Math.sin(Math.PI * SYLLABLE_HZ * t);
    const envelope = 0.3 + 0.7 * syllable * syllable;
    let wave = 0;
    for (const k of HARMONICS) wave += Math.sin(k * phase) / k;
    const edge = Math.min(1, i / fade, (total - 1 - i) / fade);
    out[i] = Math.round((PEAK * gain * envelope * edge * wave) / HARMONIC_SUM);
  }
  return out;
};

/** One timed output of a turn: emitted `delayMs` after the previous beat (`null`: in the same tick). */
interface Beat {
  readonly delayMs: number | null;
  readonly output: StageOutput | null;
}

/** A turn being played or waiting: its beats and how far it got. */
interface Playback {
  readonly epoch: number;
  readonly beats: readonly Beat[];
  next: number;
}

/**
 * Whether `unit` fits a turn's `match` (see script.ts): the exact set of requested modalities of a `respond`
 * unit, or a case-insensitive substring of a `text` unit, or of `answered.text`, the text a `respond` unit answers
 * (the last text since the previous response); `toolOutput`, a `respond` unit asked after a function call's output
 * came back (`answered.toolOutput`). A unit of another kind fits nothing.
 */
const fits = (
  match: ScriptMatch | undefined,
  unit: RunnerUnit | null,
  answered: { readonly text: string | null; readonly toolOutput: boolean },
): boolean => {
  if (match === undefined || unit === null) return false;
  if (match.toolOutput === true && (unit.kind !== "respond" || !answered.toolOutput)) return false;
  if (match.modalities !== undefined) {
    if (unit.kind !== "respond") return false;
    const wanted = new Set(match.modalities);
    const asked = new Set(unit.modalities);
    if (wanted.size !== asked.size || [...wanted].some((m) => !asked.has(m))) return false;
  }
  if (match.text !== undefined) {
    const text =
      unit.kind === "text" ? unit.text : unit.kind === "respond" || unit.kind === "commit" ? answered.text : null;
    if (text === null || !text.toLowerCase().includes(match.text.toLowerCase())) return false;
  }
  return true;
};

/** Splits text into word deltas that concatenate back to it ("Hello ", "world."). */
const words = (text: string): string[] => text.split(/(?<=\s)(?=\S)/);

/**
 * The `scripted` runner (DESIGN.md, "Ports": ModelRunner): deterministic model behaviour from a `Script`
 * (see script.ts for the file format). Triggers, per session:
 * - `speech_stopped`: an `append` whose `vad.speechStoppedAtMs` is set, in the model-native lane
 *   (`inModelNativeLane(config)`: auto_response, native duplex, no turn detection);
 * - `commit`, `respond`, `text`: a unit of that kind;
 * - `open`: the first `configure` of the session.
 *
 * The text of `speak` and `text` actions may hold `{{function_call_output}}` (the latest output the client sent back
 * with a `function_call_output` item) or `{{function_call_output:CALL_ID}}` (that call's), filled in when the turn
 * is triggered: an answer after a tool call is generated from the tool's output.
 * Each trigger plays the first turn with a `match` that its unit fits, else the next turn written for it without
 * one (then `when_exhausted` decides). A turn's outputs carry the epoch of the unit that triggered it and start one
 * macrotask after the trigger; a trigger that arrives while a turn plays queues its turn after it. `speak` emits
 * `speak`, then audio chunks of `chunk_period_ms` with their share of the transcript (the speech lasts `duration_ms`,
 * else 60 ms a character), paced at `chunk_period_ms / speed_factor` (back to back when `Infinity`).
 * `abort(epoch)`, or a unit of a newer epoch, drops every turn of older epochs at once, the one playing included,
 * and clears its timer.
 */
export const createScriptedRunner = (script: Script, options: ScriptedRunnerOptions = {}): ModelRunner => {
  const speedFactor = options.speedFactor ?? script.speedFactor;
  const msPerCharacter = options.msPerCharacter ?? 60;
  const overrides = script.capabilities;
  const capabilities: Capabilities = {
    implementationLevel: "model_native_duplex",
    chunkPeriodMs: overrides.chunkPeriodMs ?? 200,
    supportsBargeIn: overrides.supportsBargeIn ?? true,
    supportsSessionResume: overrides.supportsSessionResume ?? true,
    supportsAudioTruncate: overrides.supportsAudioTruncate ?? true,
    supportsToolCalls: overrides.supportsToolCalls ?? false,
    supportsVideo: false,
    inputSampleRateHz: INPUT_RATE,
    outputSampleRateHz: OUTPUT_RATE,
  };
  const chunkSamples = Math.max(1, Math.round((capabilities.chunkPeriodMs * OUTPUT_RATE) / 1000));
  const chunkDelayMs = Number.isFinite(speedFactor) ? capabilities.chunkPeriodMs / speedFactor : 0;
  /** Turns on each trigger's cursor (those without `match`), and the turns with `match`, in file order. */
  const turnsByTrigger = new Map<ScriptTrigger, ScriptTurn[]>();
  const matchedTurns: ScriptTurn[] = [];
  for (const turn of script.turns) {
    if (turn.match !== undefined) matchedTurns.push(turn);
    else turnsByTrigger.set(turn.on, [...(turnsByTrigger.get(turn.on) ?? []), turn]);
  }
  const speech = new Map<string, Int16Array>();
  const speechFor = (text: string, msPerChar: number): Int16Array => {
    const key = `${msPerChar}:${text}`;
    let samples = speech.get(key);
    if (samples === undefined) {
      samples = synthesizeSpeech(text, OUTPUT_RATE, msPerChar);
      speech.set(key, samples);
    }
    return samples;
  };

  const beatsOf = (
    scripted: ScriptAction,
    epoch: number,
    fill: (text: string) => string,
    itemId: string | undefined,
  ): Beat[] => {
    const action =
      scripted.kind === "speak" || scripted.kind === "text" ? { ...scripted, text: fill(scripted.text) } : scripted;
    switch (action.kind) {
      case "speak": {
        const samples = speechFor(
          action.text,
          action.durationMs === undefined ? msPerCharacter : action.durationMs / action.text.length,
        );
        const chunks = Math.max(1, Math.ceil(samples.length / chunkSamples));
        const beats: Beat[] = [{ delayMs: 0, output: { kind: "speak", epoch } }];
        let textSent = 0;
        for (let i = 0; i < chunks; i++) {
          const end = Math.min(samples.length, (i + 1) * chunkSamples);
          const textEnd =
            samples.length === 0 ? action.text.length : Math.round((action.text.length * end) / samples.length);
          const audio = pcm16ToBytes(samples.slice(i * chunkSamples, end));
          const transcript = action.text.slice(textSent, textEnd);
          textSent = textEnd;
          beats.push({ delayMs: i === 0 ? null : chunkDelayMs, output: { kind: "audio", epoch, audio, transcript } });
        }
        return beats;
      }
      case "text":
        return words(action.text).map((text) => ({ delayMs: 0, output: { kind: "text", epoch, text } }));
      case "tool_call":
        return [
          {
            delayMs: 0,
            output: { kind: "tool_call", epoch, callId: action.callId, name: action.name, arguments: action.arguments },
          },
        ];
      case "input_transcript":
        return [
          {
            delayMs: 0,
            output: {
              kind: "input_transcript",
              epoch,
              transcript: action.transcript,
              ...(itemId === undefined ? {} : { itemId }),
            },
          },
        ];
      case "input_transcript_failed":
        return [
          {
            delayMs: 0,
            output: {
              kind: "input_transcript_failed",
              epoch,
              code: "transcription_failed",
              message: action.message,
              ...(itemId === undefined ? {} : { itemId }),
            },
          },
        ];
      case "incomplete":
        return [{ delayMs: 0, output: { kind: "incomplete", epoch, reason: action.reason } }];
      case "listen":
        return [{ delayMs: 0, output: { kind: "listen", epoch, reason: action.reason } }];
      case "fail":
        return [{ delayMs: 0, output: { kind: "failure", epoch, message: action.message } }];
      case "wait":
        return [{ delayMs: action.ms, output: null }];
      case "end_turn":
        return [{ delayMs: 0, output: { kind: "end_of_turn", epoch } }];
      default: {
        const unhandled: never = action;
        throw new Error(`scripted runner: unhandled action ${JSON.stringify(unhandled)}`);
      }
    }
  };

  const open = new Set<RunnerSession>();

  const openSession = (session: { config: SessionConfig }, emit: (output: StageOutput) => void): RunnerSession => {
    let config = session.config;
    let configured = false;
    let epoch = 0;
    let closed = false;
    let timer: NodeJS.Timeout | null = null;
    let playing: Playback | null = null;
    let queued: Playback[] = [];
    /** How many times each trigger fired, to pick its next turn. */
    const fired = new Map<ScriptTrigger, number>();
    /** The outputs of function calls the client sent back, by call id, and the latest one. */
    const toolOutputs = new Map<string, string>();
    let latestToolOutput = "";
    /** `{{function_call_output}}` (the latest) and `{{function_call_output:CALL_ID}}` in a turn's text. */
    const fill = (text: string): string =>
      text.replace(/\{\{function_call_output(?::([A-Za-z0-9_.-]+))?\}\}/g, (_m, callId: string | undefined) =>
        callId === undefined ? latestToolOutput : (toolOutputs.get(callId) ?? ""),
      );

    /** What the next `respond` answers: the last text, and whether a tool's output came back, since the last one. */
    let toAnswer: { text: string | null; toolOutput: boolean } = { text: null, toolOutput: false };

    const pickTurn = (trigger: ScriptTrigger, unit: RunnerUnit | null): ScriptTurn | null => {
      const matched = matchedTurns.find((turn) => turn.on === trigger && fits(turn.match, unit, toAnswer));
      if (matched !== undefined) return matched;
      const turns = turnsByTrigger.get(trigger) ?? [];
      const count = fired.get(trigger) ?? 0;
      fired.set(trigger, count + 1);
      if (turns.length === 0) return null;
      if (count < turns.length) return turns[count] ?? null;
      switch (script.whenExhausted) {
        case "ignore":
          return null;
        case "repeat_last":
          return turns[turns.length - 1] ?? null;
        case "cycle":
          return turns[count % turns.length] ?? null;
        default: {
          const unhandled: never = script.whenExhausted;
          throw new Error(`scripted runner: unhandled when_exhausted ${String(unhandled)}`);
        }
      }
    };

    /** Emits the beats due now, then arms the timer for the next one or moves on to the next queued turn. */
    const play = (turn: Playback): void => {
      timer = null;
      do {
        if (playing !== turn || closed) return;
        const beat = turn.beats[turn.next];
        turn.next += 1;
        // `emit` may call back into `abort` or `close`: checked again before the next beat.
        if (beat?.output) emit(beat.output);
      } while (turn.beats[turn.next]?.delayMs === null);
      if (playing !== turn || closed) return;
      const next = turn.beats[turn.next];
      if (next === undefined) {
        playing = null;
        startNext();
        return;
      }
      timer = setTimeout(() => play(turn), next.delayMs ?? 0);
    };

    const startNext = (): void => {
      if (playing !== null || closed) return;
      const turn = queued.shift();
      if (turn === undefined) return;
      playing = turn;
      timer = setTimeout(() => play(turn), turn.beats[0]?.delayMs ?? 0);
    };

    const trigger = (on: ScriptTrigger, unitEpoch: number, unit: RunnerUnit | null = null): void => {
      const turn = pickTurn(on, unit);
      if (turn === null) return;
      const itemId = unit?.kind === "commit" ? unit.itemId : undefined;
      const beats = turn.actions.flatMap((action) => beatsOf(action, unitEpoch, fill, itemId));
      queued.push({ epoch: unitEpoch, beats, next: 0 });
      startNext();
    };

    const dropOlderThan = (newEpoch: number): void => {
      epoch = Math.max(epoch, newEpoch);
      const dropped: Playback[] = [];
      if (playing !== null && playing.epoch < epoch) {
        if (timer !== null) clearTimeout(timer);
        timer = null;
        dropped.push(playing);
        playing = null;
      }
      dropped.push(...queued.filter((turn) => turn.epoch < epoch));
      queued = queued.filter((turn) => turn.epoch >= epoch);
      // A transcript of the user's words is not part of what was cancelled: it still goes out.
      for (const turn of dropped) {
        for (const beat of turn.beats.slice(turn.next)) {
          if (beat.output?.kind === "input_transcript") emit(beat.output);
        }
      }
      startNext();
    };

    const runnerSession: RunnerSession = {
      submit(unit: RunnerUnit) {
        if (closed || unit.epoch < epoch) return;
        if (unit.epoch > epoch) dropOlderThan(unit.epoch);
        switch (unit.kind) {
          case "append": {
            const native = inModelNativeLane(config);
            if (native && unit.vad.speechStoppedAtMs !== null) trigger("speech_stopped", unit.epoch);
            return;
          }
          case "commit":
            trigger("commit", unit.epoch, unit);
            return;
          case "respond":
            trigger("respond", unit.epoch, unit);
            toAnswer = { text: null, toolOutput: false };
            return;
          case "text":
            toAnswer = { ...toAnswer, text: unit.text };
            // In the turn lane the model answers only when asked: the text waits for the next respond.
            if (inModelNativeLane(config)) trigger("text", unit.epoch, unit);
            return;
          case "clear":
          case "item":
            // A script keeps no conversation.
            return;
          case "playback":
            // Neither keeps a history of its own to correct.
            return;
          case "function_call_output":
            toolOutputs.set(unit.callId, unit.output);
            latestToolOutput = unit.output;
            toAnswer = { ...toAnswer, toolOutput: true };
            return;
          default: {
            const unhandled: never = unit;
            throw new Error(`scripted runner: unhandled unit ${JSON.stringify(unhandled)}`);
          }
        }
      },
      abort(newEpoch) {
        if (closed) return;
        dropOlderThan(newEpoch);
      },
      configure(next) {
        config = next;
        if (configured || closed) return;
        configured = true;
        trigger("open", epoch);
      },
      async close() {
        closed = true;
        if (timer !== null) clearTimeout(timer);
        timer = null;
        playing = null;
        queued = [];
        open.delete(runnerSession);
      },
    };
    open.add(runnerSession);
    return runnerSession;
  };

  return {
    name: `scripted:${script.name}`,
    capabilities,
    open: openSession,
    async close() {
      await Promise.all([...open].map((s) => s.close()));
    },
  };
};
