/**
 * The streams of Silero VAD v5 and their batching, wherever the model runs (on the event loop, or on the worker
 * thread of silero-worker.mjs, which holds these streams itself so that a call costs one message each way).
 *
 * Each stream holds its recurrent state, its 64-sample context, the samples of its unfinished frame and the calls
 * waiting on it. A batch takes the next frame of every stream that has one (a row each, with its own state), so the
 * frames of one call, which depend on each other's state, run in consecutive batches, and the frames of all streams
 * share them. One batch runs at a time; calls that arrive meanwhile join the next one, and a batch that is not full
 * waits a few ms for more frames (issue 11: a run costs about 240 us plus 70 us a frame on this machine, so a frame
 * alone costs 3-4 times its share of a full batch).
 *
 * Model I/O: `input` float32 [B, 576] = the previous 64 samples + 512 new ones, as int16 / 32768; `state` float32
 * [2, B, 128] -> `output` float32 [B] speech probability, `stateN` float32 [2, B, 128]. The 64-sample context is
 * what the reference `OnnxWrapper` of snakers4/silero-vad prepends.
 */

import { fillFrame, freshStream, type RunBatch, runBatch, type Stream } from "./silero-frames.ts";

export {
  CONTEXT_SAMPLES,
  FRAME_SAMPLES,
  INPUT_SIZE,
  type RunBatch,
  STATE_SIZE,
  STATE_UNITS,
} from "./silero-frames.ts";

/** Frames run together at most (more wait for the next batch). */
const MAX_BATCH = 256;
/** A batch of this many frames runs at once; a smaller one waits for company (see {@link GATHER_MS}). */
const FULL_BATCH = 32;
/**
 * How long a frame may wait for others to join its batch, ms. A run costs about 240 us plus 70 us a frame here
 * (issue 11), so frames alone cost 3-4 times what they cost in a full batch; a call's frames depend on each other
 * and run in consecutive batches, so a 100 ms call waits up to about 3 times this.
 */
const GATHER_MS = 6;

/** Streams by number, as the caller names them. */
export interface SileroStreams {
  /** Opens stream `id` with zeroed state (an open id is reset). */
  open(id: number): void;
  /**
   * Pushes PCM16 samples at 16 kHz to stream `id`; resolves with the speech probability (0..1) of every frame these
   * samples finished, in order, once they have run. Calls on one stream resolve in call order.
   * @throws (as a rejection) Error when the stream is not open, the streams are closed, or a run fails.
   */
  process(id: number, samples: Int16Array): Promise<number[]>;
  /** Zeroes the stream's state, context and leftover samples; calls waiting on it resolve with what already ran. */
  reset(id: number): void;
  /** Resets the stream and forgets it. */
  close(id: number): void;
  /** Refuses all work from now on (waiting calls reject); resolves once the batch running, if any, has ended. */
  shutdown(): Promise<void>;
}

/** Creates the streams of one model; `run` runs its batches (see {@link RunBatch}). */
export function createSileroStreams(run: RunBatch): SileroStreams {
  const streams = new Map<number, Stream>();
  let running: Promise<void> | null = null;
  let scheduled = false;
  let gathering: NodeJS.Timeout | null = null;
  let closed = false;

  /**
   * Runs a batch when one is full, or when a frame has waited {@link GATHER_MS}; then again while frames wait, and
   * stops until the next call.
   */
  const pump = (): void => {
    scheduled = false;
    if (running !== null || closed) return;
    if (gathering !== null) {
      clearTimeout(gathering);
      gathering = null;
    }
    const now = performance.now();
    const batch: Stream[] = [];
    let oldest = now;
    for (const stream of streams.values()) {
      if (!fillFrame(stream)) continue;
      stream.readySince ??= now;
      oldest = Math.min(oldest, stream.readySince);
      batch.push(stream);
      if (batch.length === MAX_BATCH) break;
    }
    if (batch.length === 0) return;
    const waited = now - oldest;
    if (batch.length < FULL_BATCH && waited < GATHER_MS) {
      gathering = setTimeout(pump, GATHER_MS - waited);
      return;
    }
    running = runBatch(run, batch)
      .catch((error: Error) => {
        // The frames of this batch are lost: their streams' calls fail, and the streams start afresh.
        for (const stream of batch) drop(stream, error);
      })
      .finally(() => {
        running = null;
        pump();
      });
  };

  const drop = (stream: Stream, error: Error | null): void => {
    const calls = stream.calls.splice(0);
    Object.assign(stream, freshStream());
    stream.generation += 1;
    for (const call of calls) {
      if (error === null) call.resolve(call.probabilities);
      else call.reject(error);
    }
  };

  return {
    open(id) {
      const known = streams.get(id);
      if (known !== undefined) drop(known, null);
      else streams.set(id, { ...freshStream(), calls: [], generation: 0 });
    },
    process(id, samples) {
      if (closed) return Promise.reject(new Error("Silero VAD: the model is closed"));
      const stream = streams.get(id);
      if (stream === undefined) return Promise.reject(new Error(`Silero VAD: no stream ${id}`));
      return new Promise((resolve, reject) => {
        stream.calls.push({ samples, used: 0, probabilities: [], resolve, reject });
        if (!scheduled && running === null) {
          scheduled = true;
          // Every call of this turn of the event loop joins the batch.
          setImmediate(pump);
        }
      });
    },
    reset(id) {
      const stream = streams.get(id);
      if (stream !== undefined) drop(stream, null);
    },
    close(id) {
      const stream = streams.get(id);
      if (stream === undefined) return;
      drop(stream, null);
      streams.delete(id);
    },
    async shutdown() {
      closed = true;
      if (gathering !== null) clearTimeout(gathering);
      const error = new Error("Silero VAD: the model is closed");
      for (const stream of streams.values()) drop(stream, error);
      streams.clear();
      await running;
    },
  };
}
