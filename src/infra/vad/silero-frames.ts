/**
 * Silero VAD v5's frames and batches (see silero-streams.ts): the tensor shapes, one stream's frame filled from its
 * calls, and one batch run, packing each stream's context, frame and state as a row and unpacking the model's
 * probability and next state.
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
/**
 * Runs one batch of `rows` frames: `input` [rows, 576], `state` [2, rows, 128] -> `output` [rows], `stateN`
 * [2, rows, 128]. May take ownership of (transfer) `input` and `state`.
 */
export type RunBatch = (
  rows: number,
  input: Float32Array,
  state: Float32Array,
) => Promise<{ output: unknown; stateN: unknown }>;

/** One `process` call: its PCM16 samples at 16 kHz, how far they are cut into frames, and its probabilities so far. */
export interface Call {
  readonly samples: Int16Array;
  /** Samples of `samples` already copied into frames. */
  used: number;
  readonly probabilities: number[];
  readonly resolve: (probabilities: number[]) => void;
  readonly reject: (error: Error) => void;
}

/** One stream: its recurrent state, its 64-sample context, its unfinished frame (`filled` samples) and its calls. */
export interface Stream {
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

/** A stream's zeroed state, context and frame. */
export const freshStream = (): Omit<Stream, "calls" | "generation"> => ({
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
export const fillFrame = (stream: Stream): boolean => {
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

/**
 * Runs the next frame of each stream of `batch` as one row of a batch on `run`, and takes back each row's state,
 * context and probability (for the call that gave the frame's last sample). A stream reset since the batch started
 * is left alone.
 * @throws Error when the run fails (its cause) or its outputs are not the float32 tensors of their shapes.
 */
export const runBatch = async (run: RunBatch, batch: readonly Stream[]): Promise<void> => {
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

/** The length of a tensor, for an error message. */
const lengthOf = (value: unknown): string =>
  value instanceof Float32Array ? String(value.length) : value === undefined ? "none" : typeof value;
