import {
  type Capabilities,
  inModelNativeLane,
  type RunnerUnit,
  type SessionConfig,
  type StageOutput,
} from "../../domain/index.ts";
import type { ModelRunner, RunnerSession } from "../../engine/ports/index.ts";
import { pcm16FromBytes } from "../audio/pcm.ts";
import { createHeardAudio, ECHO_INPUT_RATE as INPUT_RATE } from "./echo-heard-audio.ts";
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

/** Utterances of recent commits the echo runner keeps for the responses that answer them. */
const COMMITS_KEPT = 16;

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
 * One echo session: what it heard (echo-heard-audio.ts), where the utterances and turns in it begin and end, the
 * utterance of each recent commit, and its voice (echo-voice.ts). `closed` is told once it is closed.
 */
const openEchoSession = (
  initial: SessionConfig,
  emit: (output: StageOutput) => void,
  settings: EchoSettings,
  closed: () => void,
): RunnerSession => {
  const { maxUtteranceMs } = settings;
  let config = initial;
  const heard = createHeardAudio(maxUtteranceMs);
  let speechFromMs: number | null = null;
  /** The turn lane: where the first utterance since the last commit began, and where its last one stopped (ms). */
  let turnFromMs: number | null = null;
  let turnToMs: number | null = null;
  let lastUtterance: Int16Array | null = null;
  /** The utterance of each recent commit, by user item: a deferred response answers its own turn. */
  const committed = new Map<string, Int16Array>();
  let epoch = 0;
  let isClosed = false;
  const voice = createEchoVoice({ ...settings, emit, epoch: () => epoch, closed: () => isClosed });
  /** A text-modality answer's subject: the text the session last wrote (the runner has no speech recognition). */
  let lastText: string | null = null;

  /** Where speech starts: an utterance, and in the turn lane the turn's first one. */
  const speechStarted = (atMs: number, native: boolean): void => {
    speechFromMs = atMs;
    if (!native) turnFromMs ??= atMs;
  };

  /**
   * Keeps the audio and follows the server VAD's annotations: in the model-native lane a stop speaks the utterance
   * back at once; in the turn lane it ends the turn's latest utterance, answered when a commit and respond come.
   */
  const append = (unit: Extract<RunnerUnit, { kind: "append" }>): void => {
    const samples = pcm16FromBytes(unit.audio);
    heard.push(samples, unit.startMs);
    const native = inModelNativeLane(config);
    const startedAt = unit.vad.speechStartedAtMs;
    const stoppedAt = unit.vad.speechStoppedAtMs;
    // One append may end an utterance and begin the next (a stop, then a start at or after it): the stop
    // ends the utterance that began before, the start opens the next one.
    const stopFirst = startedAt !== null && stoppedAt !== null && stoppedAt <= startedAt;
    if (startedAt !== null && !stopFirst) speechStarted(startedAt, native);
    if (stoppedAt !== null && speechFromMs !== null) {
      if (native) {
        lastUtterance = heard.cut(speechFromMs, stoppedAt);
        heard.forget(stoppedAt);
        if (lastUtterance.length > 0) voice.speak(lastUtterance, unit.epoch);
      } else {
        // The turn lane answers a commit: its turn is every utterance since the last one, kept until then.
        lastUtterance = heard.cut(turnFromMs ?? speechFromMs, stoppedAt);
        turnToMs = stoppedAt;
      }
      speechFromMs = null;
    }
    if (stopFirst && startedAt !== null) speechStarted(startedAt, native);
    const endMs = unit.startMs + samples.length / (INPUT_RATE / 1000);
    // Keep one second of lead-in for the prefix padding of the next utterance, and of a turn not committed
    // yet at most what an answer echoes.
    if (speechFromMs === null && turnFromMs === null) heard.forget(endMs - 1000);
    else heard.forget(endMs - maxUtteranceMs - 1000);
  };

  /** Ends the turn: its utterance is kept for the response that answers the committed item. */
  const commit = (unit: Extract<RunnerUnit, { kind: "commit" }>): void => {
    if (speechFromMs !== null || turnFromMs !== null) {
      const end = heard.endMs();
      const from = turnFromMs ?? speechFromMs ?? end;
      lastUtterance = heard.cut(from, speechFromMs !== null ? end : (turnToMs ?? end));
      speechFromMs = null;
      turnFromMs = null;
      turnToMs = null;
      heard.forget(end);
    } else if (!inModelNativeLane(config)) {
      // A turn-lane commit with no speech since the last one holds none: it is not the last turn again.
      lastUtterance = new Int16Array(0);
    }
    if (lastUtterance !== null && unit.itemId !== undefined) committed.set(unit.itemId, lastUtterance);
    // Enough for every deferred turn (max_pending_turns_per_session) and the active one.
    for (const id of committed.keys()) if (committed.size > COMMITS_KEPT) committed.delete(id);
  };

  /** A text-modality answer: what the runner last heard or was given, said in words. */
  const respondInText = (unitEpoch: number, written: string | null): void => {
    const said =
      written !== null
        ? `You wrote: ${written}`
        : `I heard ${((lastUtterance?.length ?? 0) / INPUT_RATE).toFixed(1)} seconds of speech.`;
    for (const word of said.split(/(?<= )/)) emit({ kind: "text", epoch: unitEpoch, text: word });
    emit({ kind: "end_of_turn", epoch: unitEpoch });
  };

  /** Speaks the turn it answers (its own commit's, else the last one heard, else half a second of silence). */
  const respond = (unit: Extract<RunnerUnit, { kind: "respond" }>): void => {
    if (!unit.modalities.includes("audio")) {
      // An answer to given input (`response.input`) echoes its last text, else what the session said.
      const given = (unit.input ?? []).findLast((item) => item.text !== "")?.text;
      respondInText(unit.epoch, given ?? lastText);
      return;
    }
    voice.speak(
      (unit.inReplyTo ? committed.get(unit.inReplyTo) : undefined) ??
        lastUtterance ??
        new Int16Array(Math.round(INPUT_RATE / 2)),
      unit.epoch,
    );
  };

  const submit = (unit: RunnerUnit): void => {
    switch (unit.kind) {
      case "append":
        append(unit);
        return;
      case "commit":
        commit(unit);
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
        heard.clear();
        speechFromMs = null;
        turnFromMs = null;
        turnToMs = null;
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
