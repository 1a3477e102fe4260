import {
  type Capabilities,
  inModelNativeLane,
  type RunnerUnit,
  type SessionConfig,
  type StageOutput,
} from "../../domain/index.ts";
import type { ModelRunner, RunnerSession } from "../../engine/ports/index.ts";
import type { Script, ScriptTrigger } from "./script.ts";
import { type BeatsOf, createBeats } from "./script-beats.ts";
import { createScriptPlayback } from "./script-playback.ts";
import { type Answered, createTurnPickers, type TurnPicker } from "./script-turns.ts";

export { synthesizeSpeech } from "./synthetic-speech.ts";

/** Options of the scripted runner. Times in ms. */
export interface ScriptedRunnerOptions {
  /** Overrides the script's `speed_factor`: `Infinity` = audio chunks back to back (one macrotask apart). */
  readonly speedFactor?: number;
  /** Length of synthetic speech per character of `speak` text, ms. Default 60. */
  readonly msPerCharacter?: number;
}

const INPUT_RATE = 16000;
const OUTPUT_RATE = 24000;

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
  const beatsOf = createBeats({
    outputRateHz: OUTPUT_RATE,
    chunkSamples: Math.max(1, Math.round((capabilities.chunkPeriodMs * OUTPUT_RATE) / 1000)),
    chunkDelayMs: Number.isFinite(speedFactor) ? capabilities.chunkPeriodMs / speedFactor : 0,
    msPerCharacter: options.msPerCharacter ?? 60,
  });
  const pickers = createTurnPickers(script);
  const open = new Set<RunnerSession>();
  const openSession = (session: { config: SessionConfig }, emit: (output: StageOutput) => void): RunnerSession => {
    const runnerSession = openScriptedSession(session.config, emit, beatsOf, pickers(), () =>
      open.delete(runnerSession),
    );
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

/**
 * One session of the scripted runner: the triggers its units fire, the tool outputs its turns' text may quote, and
 * its playback. `closed` is told once the session is closed.
 */
const openScriptedSession = (
  initial: SessionConfig,
  emit: (output: StageOutput) => void,
  beatsOf: BeatsOf,
  pickTurn: TurnPicker,
  closed: () => void,
): RunnerSession => {
  let config = initial;
  let configured = false;
  let epoch = 0;
  let isClosed = false;
  const playback = createScriptPlayback(emit);
  /** The outputs of function calls the client sent back, by call id, and the latest one. */
  const toolOutputs = new Map<string, string>();
  let latestToolOutput = "";
  /** `{{function_call_output}}` (the latest) and `{{function_call_output:CALL_ID}}` in a turn's text. */
  const fill = (text: string): string =>
    text.replace(/\{\{function_call_output(?::([A-Za-z0-9_.-]+))?\}\}/g, (_m, callId: string | undefined) =>
      callId === undefined ? latestToolOutput : (toolOutputs.get(callId) ?? ""),
    );
  /** What the next `respond` answers: the last text, and whether a tool's output came back, since the last one. */
  let toAnswer: Answered = { text: null, toolOutput: false };

  const trigger = (on: ScriptTrigger, unitEpoch: number, unit: RunnerUnit | null = null): void => {
    const turn = pickTurn(on, unit, toAnswer);
    if (turn === null) return;
    const itemId = unit?.kind === "commit" ? unit.itemId : undefined;
    playback.play(
      unitEpoch,
      turn.actions.flatMap((action) => beatsOf(action, unitEpoch, fill, itemId)),
    );
  };

  const submit = (unit: RunnerUnit): void => {
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
  };

  return {
    submit(unit: RunnerUnit) {
      if (isClosed || unit.epoch < epoch) return;
      if (unit.epoch > epoch) epoch = playback.dropOlderThan(unit.epoch);
      submit(unit);
    },
    abort(newEpoch) {
      if (isClosed) return;
      epoch = playback.dropOlderThan(newEpoch);
    },
    configure(next) {
      config = next;
      if (configured || isClosed) return;
      configured = true;
      trigger("open", epoch);
    },
    async close() {
      isClosed = true;
      playback.close();
      closed();
    },
  };
};
