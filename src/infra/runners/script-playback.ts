/**
 * The scripted runner's playback of one session: the turn playing and the turns queued behind it, each a list of
 * beats (script-beats.ts) played on a timer, and the epoch fence that drops every turn of an older epoch at once.
 */
import type { StageOutput } from "../../domain/index.ts";
import type { Beat } from "./script-beats.ts";

/** A turn being played or waiting: its beats and how far it got. */
interface Playback {
  readonly epoch: number;
  readonly beats: readonly Beat[];
  next: number;
}

/** One session's turns in play. */
export interface ScriptPlayback {
  /** Queues a turn of `epoch`; it starts one macrotask (its first beat's delay) after the turn before it ends. */
  play(epoch: number, beats: readonly Beat[]): void;
  /**
   * Drops every turn older than `epoch` (the one playing included, its timer cleared) and starts the next one left.
   * The input transcripts a dropped turn had not emitted yet still go out: the user's words are not cancelled.
   * @returns the session's epoch after it (never lower than before).
   */
  dropOlderThan(epoch: number): number;
  /** Stops at once: nothing is emitted afterwards. */
  close(): void;
}

/** The playback of one session, emitting to `emit` (which may call back into `dropOlderThan` or `close`). */
export const createScriptPlayback = (emit: (output: StageOutput) => void): ScriptPlayback => {
  let epoch = 0;
  let closed = false;
  let timer: NodeJS.Timeout | null = null;
  let playing: Playback | null = null;
  let queued: Playback[] = [];

  /** Emits the beats due now, then arms the timer for the next one or moves on to the next queued turn. */
  const step = (turn: Playback): void => {
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
    timer = setTimeout(() => step(turn), next.delayMs ?? 0);
  };

  const startNext = (): void => {
    if (playing !== null || closed) return;
    const turn = queued.shift();
    if (turn === undefined) return;
    playing = turn;
    timer = setTimeout(() => step(turn), turn.beats[0]?.delayMs ?? 0);
  };

  return {
    play(turnEpoch, beats) {
      queued.push({ epoch: turnEpoch, beats, next: 0 });
      startNext();
    },
    dropOlderThan(newEpoch) {
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
      return epoch;
    },
    close() {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      timer = null;
      playing = null;
      queued = [];
    },
  };
};
