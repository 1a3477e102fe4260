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

/** Samples per frame (32 ms at 16 kHz). */
export const FRAME_SAMPLES = 512;
/** Samples of the previous frame given with each frame. */
export const CONTEXT_SAMPLES = 64;
/** Floats per row of `input`. */
export const INPUT_SIZE = CONTEXT_SAMPLES + FRAME_SAMPLES;
/** Units of each of the two state planes. */
export const STATE_UNITS = 128;
/** Floats of one stream's state ([2, 1, 128]). */
export const STATE_SIZE = 2 * STATE_UNITS;
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

/**
 * Runs one batch of `rows` frames: `input` [rows, 576], `state` [2, rows, 128] -> `output` [rows], `stateN`
 * [2, rows, 128]. May take ownership of (transfer) `input` and `state`.
 */
export type RunBatch = (
  rows: number,
  input: Float32Array,
  state: Float32Array,
) => Promise<{ output: unknown; stateN: unknown }>;

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

interface Call {
  readonly samples: Int16Array;
  /** Samples of `samples` already copied into frames. */
  used: number;
  readonly probabilities: number[];
  readonly resolve: (probabilities: number[]) => void;
  readonly reject: (error: Error) => void;
}

interface Stream {
  state: Float32Array;
  context: Float32Array;
  frame: Float32Array;
  filled: number;
  /** Calls in order; the first is the one being cut into frames. */
  readonly calls: Call[];
  /** Bumped by reset: a batch that started before it leaves the stream alone. */
  generation: number;
  /** When its full frame started waiting (`performance.now()`, ms); null while it has none. */
  readySince: number | null;
}

/** Creates the streams of one model; `run` runs its batches (see {@link RunBatch}). */
export function createSileroStreams(run: RunBatch): SileroStreams {
  const streams = new Map<number, Stream>();
  let running: Promise<void> | null = null;
  let scheduled = false;
  let gathering: NodeJS.Timeout | null = null;
  let closed = false;

  const fresh = (): Omit<Stream, "calls" | "generation"> => ({
    state: new Float32Array(STATE_SIZE),
    context: new Float32Array(CONTEXT_SAMPLES),
    frame: new Float32Array(FRAME_SAMPLES),
    filled: 0,
    readySince: null,
  });

  /**
   * Fills the stream's frame from its calls. A call whose samples are all used without finishing a frame is done
   * (its earlier frames have run). Returns whether a full frame waits to run.
   */
  const fill = (stream: Stream): boolean => {
    while (stream.filled < FRAME_SAMPLES) {
      const call = stream.calls[0];
      if (call === undefined) return false;
      const take = Math.min(FRAME_SAMPLES - stream.filled, call.samples.length - call.used);
      const { frame, filled } = stream;
      const { samples, used } = call;
      for (let i = 0; i < take; i++) frame[filled + i] = (samples[used + i] as number) / 32768;
      stream.filled += take;
      call.used += take;
      if (call.used === call.samples.length && stream.filled < FRAME_SAMPLES) {
        stream.calls.shift();
        call.resolve(call.probabilities);
      }
    }
    return true;
  };

  const runBatch = async (batch: readonly Stream[]): Promise<void> => {
    const rows = batch.length;
    const input = new Float32Array(rows * INPUT_SIZE);
    // [2, B, 128]: the two halves of each row's [2, 1, 128] state go to planes 0 and 1.
    const state = new Float32Array(2 * rows * STATE_UNITS);
    const generations = batch.map((stream) => stream.generation);
    for (const [b, stream] of batch.entries()) {
      input.set(stream.context, b * INPUT_SIZE);
      input.set(stream.frame, b * INPUT_SIZE + CONTEXT_SAMPLES);
      state.set(stream.state.subarray(0, STATE_UNITS), b * STATE_UNITS);
      state.set(stream.state.subarray(STATE_UNITS), (rows + b) * STATE_UNITS);
    }
    const contexts = batch.map((stream) => stream.frame.slice(FRAME_SAMPLES - CONTEXT_SAMPLES));
    let outputs: { output: unknown; stateN: unknown };
    try {
      outputs = await run(rows, input, state);
    } catch (error) {
      throw new Error("Silero VAD: onnxruntime failed to run a frame", { cause: error });
    }
    const probabilities = outputs.output;
    const nextState = outputs.stateN;
    if (
      !(probabilities instanceof Float32Array) ||
      probabilities.length !== rows ||
      !(nextState instanceof Float32Array) ||
      nextState.length !== rows * STATE_SIZE
    ) {
      throw new Error(
        `Silero VAD: expected a float32 "output" of ${rows} and a float32 "stateN" of ${rows * STATE_SIZE} values, found ${lengthOf(probabilities)} and ${lengthOf(nextState)}`,
      );
    }
    for (const [b, stream] of batch.entries()) {
      if (stream.generation !== generations[b]) continue;
      const next = new Float32Array(STATE_SIZE);
      next.set(nextState.subarray(b * STATE_UNITS, (b + 1) * STATE_UNITS), 0);
      next.set(nextState.subarray((rows + b) * STATE_UNITS, (rows + b + 1) * STATE_UNITS), STATE_UNITS);
      stream.state = next;
      stream.context = contexts[b] as Float32Array;
      stream.filled = 0;
      stream.readySince = null;
      // The call that gave the frame's last sample owns its probability.
      const call = stream.calls[0] as Call;
      call.probabilities.push(probabilities[b] as number);
      if (call.used === call.samples.length) {
        stream.calls.shift();
        call.resolve(call.probabilities);
      }
    }
  };

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
      if (!fill(stream)) continue;
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
    running = runBatch(batch)
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
    Object.assign(stream, fresh());
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
      else streams.set(id, { ...fresh(), calls: [], generation: 0 });
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

const lengthOf = (value: unknown): string =>
  value instanceof Float32Array ? String(value.length) : value === undefined ? "none" : typeof value;
