/**
 * The echo runner's utterances and turns: what it heard (echo-heard-audio.ts), where the server VAD says each
 * utterance began and stopped (ms of the input clock), and the utterance of each recent commit. In the model-native
 * lane an utterance is spoken back as soon as it stops; in the turn lane a turn is every utterance since the last
 * commit, kept until a response answers it.
 */
import type { RunnerUnit } from "../../domain/index.ts";
import { pcm16FromBytes } from "../audio/pcm.ts";
import { createHeardAudio, ECHO_INPUT_RATE as INPUT_RATE } from "./echo-heard-audio.ts";

/** Utterances of recent commits the echo runner keeps for the responses that answer them. */
const COMMITS_KEPT = 16;

/** One echo session's utterances. */
export interface EchoTurns {
  /**
   * Keeps an append and follows its VAD marks (`native`: the model-native lane).
   * @returns the utterance to speak back now (model-native lane, speech stopped), else null.
   */
  append(unit: Extract<RunnerUnit, { kind: "append" }>, native: boolean): Int16Array | null;
  /** Ends the turn: its utterance is kept for the response that answers the committed item. */
  commit(unit: Extract<RunnerUnit, { kind: "commit" }>, native: boolean): void;
  /** The utterance a response answers: its own commit's (`inReplyTo`), else the last one; null: none heard. */
  answering(inReplyTo: string | null): Int16Array | null;
  /** The last utterance heard (or committed), or null. */
  last(): Int16Array | null;
  /** Forgets what was heard and where speech began (`input_audio_buffer.clear`). */
  clear(): void;
}

/** The utterances of one echo session; none is longer than `maxUtteranceMs`. */
export const createEchoTurns = (maxUtteranceMs: number): EchoTurns => {
  const heard = createHeardAudio(maxUtteranceMs);
  let speechFromMs: number | null = null;
  /** The turn lane: where the first utterance since the last commit began, and where its last one stopped (ms). */
  let turnFromMs: number | null = null;
  let turnToMs: number | null = null;
  let lastUtterance: Int16Array | null = null;
  /** The utterance of each recent commit, by user item: a deferred response answers its own turn. */
  const committed = new Map<string, Int16Array>();

  /** Where speech starts: an utterance, and in the turn lane the turn's first one. */
  const speechStarted = (atMs: number, native: boolean): void => {
    speechFromMs = atMs;
    if (!native) turnFromMs ??= atMs;
  };

  /** A stop of the utterance that began at `fromMs`: spoken back now (native) or kept as the turn's latest. */
  const speechStopped = (fromMs: number, stoppedAt: number, native: boolean): Int16Array | null => {
    speechFromMs = null;
    if (native) {
      lastUtterance = heard.cut(fromMs, stoppedAt);
      heard.forget(stoppedAt);
      return lastUtterance.length > 0 ? lastUtterance : null;
    }
    // The turn lane answers a commit: its turn is every utterance since the last one, kept until then.
    lastUtterance = heard.cut(turnFromMs ?? fromMs, stoppedAt);
    turnToMs = stoppedAt;
    return null;
  };

  return {
    append(unit, native) {
      const samples = pcm16FromBytes(unit.audio);
      heard.push(samples, unit.startMs);
      const startedAt = unit.vad.speechStartedAtMs;
      const stoppedAt = unit.vad.speechStoppedAtMs;
      // One append may end an utterance and begin the next (a stop, then a start at or after it): the stop
      // ends the utterance that began before, the start opens the next one.
      const stopFirst = startedAt !== null && stoppedAt !== null && stoppedAt <= startedAt;
      if (startedAt !== null && !stopFirst) speechStarted(startedAt, native);
      const spoken =
        stoppedAt !== null && speechFromMs !== null ? speechStopped(speechFromMs, stoppedAt, native) : null;
      if (stopFirst && startedAt !== null) speechStarted(startedAt, native);
      const endMs = unit.startMs + samples.length / (INPUT_RATE / 1000);
      // Keep one second of lead-in for the prefix padding of the next utterance, and of a turn not committed
      // yet at most what an answer echoes.
      if (speechFromMs === null && turnFromMs === null) heard.forget(endMs - 1000);
      else heard.forget(endMs - maxUtteranceMs - 1000);
      // A force_listen chunk is heard, and the model listens on through it.
      return unit.forceListen === true ? null : spoken;
    },
    commit(unit, native) {
      if (speechFromMs !== null || turnFromMs !== null) {
        const end = heard.endMs();
        const from = turnFromMs ?? speechFromMs ?? end;
        lastUtterance = heard.cut(from, speechFromMs !== null ? end : (turnToMs ?? end));
        speechFromMs = null;
        turnFromMs = null;
        turnToMs = null;
        heard.forget(end);
      } else if (!native) {
        // A turn-lane commit with no speech since the last one holds none: it is not the last turn again.
        lastUtterance = new Int16Array(0);
      }
      if (lastUtterance !== null && unit.itemId !== undefined) committed.set(unit.itemId, lastUtterance);
      // Enough for every deferred turn (max_pending_turns_per_session) and the active one.
      for (const id of committed.keys()) if (committed.size > COMMITS_KEPT) committed.delete(id);
    },
    answering: (inReplyTo) => (inReplyTo ? committed.get(inReplyTo) : undefined) ?? lastUtterance,
    last: () => lastUtterance,
    clear() {
      heard.clear();
      speechFromMs = null;
      turnFromMs = null;
      turnToMs = null;
    },
  };
};
