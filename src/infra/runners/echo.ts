import {
  type Capabilities,
  inModelNativeLane,
  type RunnerUnit,
  type SessionConfig,
  type StageOutput,
} from "../../domain/index.ts";
import type { ModelRunner, RunnerSession } from "../../engine/ports/index.ts";
import { pcm16FromBytes, pcm16ToBytes } from "../audio/pcm.ts";
import { resamplePcm16 } from "../audio/resample.ts";

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

const INPUT_RATE = 16000;
const OUTPUT_RATE = 24000;
/** Utterances of recent commits the echo runner keeps for the responses that answer them. */
const COMMITS_KEPT = 16;

/**
 * The `echo` runner (DESIGN.md, "Ports": ModelRunner): a real duplex behaviour on real audio. It keeps the audio it
 * is given; when the session's server VAD (Silero, run by the engine) reports that the user's speech stopped, it
 * speaks that utterance back, resampled to 24 kHz, in `chunkPeriodMs` units, with a transcript that says what it
 * is doing. In the turn lane it speaks when asked (`respond`). An abort (barge-in, cancel) stops it at once.
 */
export const createEchoRunner = (options: EchoRunnerOptions = {}): ModelRunner => {
  const chunkPeriodMs = options.chunkPeriodMs ?? 200;
  const speedFactor = options.speedFactor ?? 4;
  const maxUtteranceMs = options.maxUtteranceMs ?? 15000;
  const capabilities: Capabilities = {
    implementationLevel: "model_native_duplex",
    chunkPeriodMs,
    supportsBargeIn: true,
    supportsSessionResume: true,
    supportsAudioTruncate: true,
    supportsToolCalls: false,
    supportsVideo: false,
    inputSampleRateHz: INPUT_RATE,
    outputSampleRateHz: OUTPUT_RATE,
  };
  const open = new Set<RunnerSession>();

  const openSession = (_session: { config: SessionConfig }, emit: (output: StageOutput) => void): RunnerSession => {
    let config = _session.config;
    /** Input samples kept since the last reset, starting at `keptFromMs` on the input clock. */
    let kept: Int16Array[] = [];
    let keptFromMs = 0;
    let keptSamples = 0;
    let speechFromMs: number | null = null;
    /** The turn lane: where the first utterance since the last commit began, and where its last one stopped (ms). */
    let turnFromMs: number | null = null;
    let turnToMs: number | null = null;
    let lastUtterance: Int16Array | null = null;
    /** The utterance of each recent commit, by user item: a deferred response answers its own turn. */
    const committed = new Map<string, Int16Array>();
    let epoch = 0;
    let timer: NodeJS.Timeout | null = null;
    let closed = false;

    const flat = (): Int16Array => {
      const all = new Int16Array(keptSamples);
      let offset = 0;
      for (const chunk of kept) {
        all.set(chunk, offset);
        offset += chunk.length;
      }
      kept = [all];
      return all;
    };
    const cut = (fromMs: number, toMs: number): Int16Array => {
      const all = flat();
      const start = Math.max(0, Math.round(((fromMs - keptFromMs) * INPUT_RATE) / 1000));
      const end = Math.min(all.length, Math.round(((toMs - keptFromMs) * INPUT_RATE) / 1000));
      const maxSamples = Math.round((maxUtteranceMs * INPUT_RATE) / 1000);
      return all.slice(Math.max(start, end - maxSamples), end);
    };
    /**
     * Drops the samples before `untilMs`: whole chunks, then the head of the first one kept as a view (no copy). It
     * runs on every append outside speech, so it must not copy what is kept (a copy of a second of audio per append
     * per session was most of the server's garbage under load).
     */
    const forget = (untilMs: number): void => {
      let drop = Math.max(0, Math.min(keptSamples, Math.round(((untilMs - keptFromMs) * INPUT_RATE) / 1000)));
      if (drop === 0) return;
      keptSamples -= drop;
      keptFromMs += (drop * 1000) / INPUT_RATE;
      let first = 0;
      while (first < kept.length && (kept[first]?.length ?? 0) <= drop) {
        drop -= kept[first]?.length ?? 0;
        first += 1;
      }
      kept = kept.slice(first);
      const head = kept[0];
      if (head !== undefined && drop > 0) kept[0] = head.subarray(drop);
    };

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
      const out = resamplePcm16(utterance, INPUT_RATE, OUTPUT_RATE);
      const seconds = utterance.length / INPUT_RATE;
      const text = `I heard ${seconds.toFixed(1)} seconds of speech, and this is how it sounded.`;
      const chunkSamples = Math.round((chunkPeriodMs * OUTPUT_RATE) / 1000);
      const chunks = Math.max(1, Math.ceil(out.length / chunkSamples));
      let index = 0;
      let textSent = 0;
      emit({ kind: "speak", epoch: unitEpoch });
      const step = (): void => {
        timer = null;
        if (closed || unitEpoch !== epoch) {
          speaking = false;
          return;
        }
        const audio = out.subarray(index * chunkSamples, (index + 1) * chunkSamples);
        const textEnd = Math.round((text.length * (index + 1)) / chunks);
        emit({
          kind: "audio",
          epoch: unitEpoch,
          audio: pcm16ToBytes(audio),
          transcript: text.slice(textSent, textEnd),
        });
        textSent = textEnd;
        index += 1;
        if (index >= chunks) {
          emit({ kind: "end_of_turn", epoch: unitEpoch });
          speaking = false;
          const next = queued.shift();
          if (next !== undefined && next.epoch === epoch) speak(next.utterance, next.epoch);
          return;
        }
        timer = setTimeout(step, Number.isFinite(speedFactor) ? chunkPeriodMs / speedFactor : 0);
      };
      step();
    };

    /** A text-modality answer: what the runner last heard, said in words (it has no speech recognition). */
    let lastText: string | null = null;
    const respondInText = (unitEpoch: number, written: string | null): void => {
      const said =
        written !== null
          ? `You wrote: ${written}`
          : `I heard ${((lastUtterance?.length ?? 0) / INPUT_RATE).toFixed(1)} seconds of speech.`;
      for (const word of said.split(/(?<= )/)) emit({ kind: "text", epoch: unitEpoch, text: word });
      emit({ kind: "end_of_turn", epoch: unitEpoch });
    };

    const session: RunnerSession = {
      submit(unit: RunnerUnit) {
        if (closed || unit.epoch < epoch) return;
        // A unit of a newer epoch means the old epoch was cancelled: stop what it was saying.
        if (unit.epoch > epoch) session.abort(unit.epoch);
        epoch = unit.epoch;
        switch (unit.kind) {
          case "append": {
            const samples = pcm16FromBytes(unit.audio);
            if (keptSamples === 0) keptFromMs = unit.startMs;
            kept.push(samples);
            keptSamples += samples.length;
            const native = inModelNativeLane(config);
            const startedAt = unit.vad.speechStartedAtMs;
            const stoppedAt = unit.vad.speechStoppedAtMs;
            // One append may end an utterance and begin the next (a stop, then a start at or after it): the stop
            // ends the utterance that began before, the start opens the next one.
            const stopFirst = startedAt !== null && stoppedAt !== null && stoppedAt <= startedAt;
            if (startedAt !== null && !stopFirst) {
              speechFromMs = startedAt;
              if (!native) turnFromMs ??= startedAt;
            }
            if (stoppedAt !== null && speechFromMs !== null) {
              if (native) {
                lastUtterance = cut(speechFromMs, stoppedAt);
                forget(stoppedAt);
                if (lastUtterance.length > 0) speak(lastUtterance, unit.epoch);
              } else {
                // The turn lane answers a commit: its turn is every utterance since the last one, kept until then.
                lastUtterance = cut(turnFromMs ?? speechFromMs, stoppedAt);
                turnToMs = stoppedAt;
              }
              speechFromMs = null;
            }
            if (stopFirst && startedAt !== null) {
              speechFromMs = startedAt;
              if (!native) turnFromMs ??= startedAt;
            }
            const endMs = unit.startMs + samples.length / (INPUT_RATE / 1000);
            // Keep one second of lead-in for the prefix padding of the next utterance, and of a turn not committed
            // yet at most what an answer echoes.
            if (speechFromMs === null && turnFromMs === null) forget(endMs - 1000);
            else forget(endMs - maxUtteranceMs - 1000);
            return;
          }
          case "commit":
            if (speechFromMs !== null || turnFromMs !== null) {
              const end = keptFromMs + (keptSamples * 1000) / INPUT_RATE;
              const from = turnFromMs ?? speechFromMs ?? end;
              lastUtterance = cut(from, speechFromMs !== null ? end : (turnToMs ?? end));
              speechFromMs = null;
              turnFromMs = null;
              turnToMs = null;
              forget(end);
            } else if (!inModelNativeLane(config)) {
              // A turn-lane commit with no speech since the last one holds none: it is not the last turn again.
              lastUtterance = new Int16Array(0);
            }
            if (lastUtterance !== null && unit.itemId !== undefined) committed.set(unit.itemId, lastUtterance);
            // Enough for every deferred turn (max_pending_turns_per_session) and the active one.
            for (const id of committed.keys()) if (committed.size > COMMITS_KEPT) committed.delete(id);
            return;
          case "respond":
            if (!unit.modalities.includes("audio")) {
              // An answer to given input (`response.input`) echoes its last text, else what the session said.
              const given = (unit.input ?? []).findLast((item) => item.text !== "")?.text;
              respondInText(unit.epoch, given ?? lastText);
              return;
            }
            speak(
              (unit.inReplyTo ? committed.get(unit.inReplyTo) : undefined) ??
                lastUtterance ??
                new Int16Array(Math.round(INPUT_RATE / 2)),
              unit.epoch,
            );
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
            kept = [];
            keptSamples = 0;
            speechFromMs = null;
            turnFromMs = null;
            turnToMs = null;
            return;
          default: {
            const unhandled: never = unit;
            throw new Error(`echo runner: unhandled unit ${JSON.stringify(unhandled)}`);
          }
        }
      },
      abort(newEpoch) {
        epoch = Math.max(epoch, newEpoch);
        if (timer !== null) clearTimeout(timer);
        timer = null;
        speaking = false;
        queued = [];
      },
      configure(next) {
        config = next;
      },
      async close() {
        closed = true;
        if (timer !== null) clearTimeout(timer);
        open.delete(session);
      },
    };
    open.add(session);
    return session;
  };

  return {
    name: "echo",
    capabilities,
    open: openSession,
    async close() {
      await Promise.all([...open].map((s) => s.close()));
    },
  };
};
