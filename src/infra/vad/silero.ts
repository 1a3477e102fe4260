/**
 * Silero VAD v5 adapter of the Vad port (DESIGN.md, "Ports": Vad), on `onnxruntime-node`. One InferenceSession,
 * single-threaded, is shared by every stream; each stream holds its own recurrent state, its 64-sample context and
 * the samples of its unfinished frame, and passes them in on every run, so streams never see each other's state.
 *
 * Frames of all streams that wait at the same time are run as one batch (issue 11): the model takes a batch
 * dimension, each row with its own state, and a row's output is the same float as a run of its own (checked in
 * test/infra/silero.unit.test.ts). A run costs about 430 us for one frame and about 60 us a frame in batches of 32
 * or more, on this machine.
 *
 * Model I/O (checked at load): `input` float32 [B, 576] = the previous 64 samples + 512 new ones, as int16 / 32768;
 * `state` float32 [2, B, 128]; `sr` int64 scalar 16000 -> `output` float32 [B, 1] speech probability, `stateN`
 * float32 [2, B, 128]. The 64-sample context is what the reference `OnnxWrapper` of snakers4/silero-vad prepends.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Worker } from "node:worker_threads";
import ort from "onnxruntime-node";
import type { VadModel, VadStream } from "../../engine/ports/vad.ts";

/** SHA-256 (hex) of `silero_vad_v5.onnx` as shipped by `@ricky0123/vad-web@0.0.31`. */
export const SILERO_VAD_V5_SHA256 = "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f";

/** Options of {@link createSileroVad}. */
export interface SileroVadOptions {
  /** Path of the ONNX file; default: `dist/silero_vad_v5.onnx` of the installed `@ricky0123/vad-web`. */
  readonly modelPath?: string;
  /**
   * Where inference runs: `worker` (default), a worker thread of its own (silero-worker.mjs), so the event loop
   * goes on while a batch runs; `main`, on the event loop (onnxruntime-node runs a session synchronously).
   */
  readonly thread?: "worker" | "main";
}

/** Runs batches of the model, on the event loop or on a worker thread. */
interface BatchRunner {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  /** `input` [rows, 576], `state` [2, rows, 128] -> `output` [rows], `stateN` [2, rows, 128]. */
  run(rows: number, input: Float32Array, state: Float32Array): Promise<{ output: unknown; stateN: unknown }>;
  release(): Promise<void>;
}

const SESSION_OPTIONS = { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: "sequential" } as const;

const mainThreadRunner = async (bytes: Uint8Array): Promise<BatchRunner> => {
  const session = await ort.InferenceSession.create(bytes, SESSION_OPTIONS);
  const sampleRate = new ort.Tensor("int64", BigInt64Array.of(BigInt(SAMPLE_RATE)), []);
  return {
    inputNames: session.inputNames,
    outputNames: session.outputNames,
    async run(rows, input, state) {
      const outputs = await session.run({
        input: new ort.Tensor("float32", input, [rows, INPUT_SIZE]),
        state: new ort.Tensor("float32", state, [2, rows, STATE_UNITS]),
        sr: sampleRate,
      });
      return { output: outputs.output?.data, stateN: outputs.stateN?.data };
    },
    release: () => session.release(),
  };
};

const workerRunner = (bytes: Uint8Array): Promise<BatchRunner> =>
  new Promise((resolve, reject) => {
    const worker = new Worker(new URL("./silero-worker.mjs", import.meta.url), { workerData: { model: bytes } });
    const pending = new Map<
      number,
      { resolve: (r: { output: unknown; stateN: unknown }) => void; reject: (e: Error) => void }
    >();
    let next = 0;
    let failed: Error | null = null;
    const fail = (error: Error): void => {
      failed = error;
      for (const p of pending.values()) p.reject(error);
      pending.clear();
      reject(error);
    };
    // The thread does not hold the process open: a server exits as it did with inference on the event loop.
    worker.unref();
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`the Silero VAD worker thread exited (code ${code})`)));
    worker.on("message", (message: Record<string, unknown>) => {
      if (message.loadError !== undefined) {
        fail(new Error(String(message.loadError)));
        return;
      }
      const ready = message.ready as { inputNames: string[]; outputNames: string[] } | undefined;
      if (ready !== undefined) {
        resolve({
          inputNames: ready.inputNames,
          outputNames: ready.outputNames,
          run(rows, input, state) {
            if (failed !== null) return Promise.reject(failed);
            const id = next++;
            return new Promise((done, refuse) => {
              pending.set(id, { resolve: done, reject: refuse });
              worker.postMessage({ id, rows, input, state }, [
                input.buffer as ArrayBuffer,
                state.buffer as ArrayBuffer,
              ]);
            });
          },
          async release() {
            worker.removeAllListeners("exit");
            const exited = new Promise<void>((done) => worker.once("exit", () => done()));
            worker.postMessage("close");
            await exited;
          },
        });
        return;
      }
      const waiting = pending.get(message.id as number);
      if (waiting === undefined) return;
      pending.delete(message.id as number);
      if (message.error !== undefined) waiting.reject(new Error(String(message.error)));
      else waiting.resolve({ output: message.output, stateN: message.stateN });
    });
  });

const SAMPLE_RATE = 16000;
const FRAME_SAMPLES = 512;
const CONTEXT_SAMPLES = 64;
const STATE_SHAPE = [2, 1, 128] as const;
const STATE_SIZE = STATE_SHAPE[0] * STATE_SHAPE[1] * STATE_SHAPE[2];
const STATE_UNITS = STATE_SHAPE[2];
const INPUT_SIZE = CONTEXT_SAMPLES + FRAME_SAMPLES;
/** Frames run together at most (more wait for the next batch). */
const MAX_BATCH = 256;
const INPUT_NAMES = ["input", "state", "sr"] as const;
const OUTPUT_NAMES = ["output", "stateN"] as const;

/**
 * Loads Silero VAD v5 and returns the shared model. The file's bytes are hashed and the same bytes are given to
 * onnxruntime, so what runs is what was checked.
 *
 * @param options `modelPath` to load another copy of the file (it must still match {@link SILERO_VAD_V5_SHA256}).
 * @returns a {@link VadModel} at 16000 Hz with 512-sample (32 ms) frames; `close()` waits for runs in progress,
 *   then releases the session (idempotent).
 * @throws Error when the file cannot be read, when its SHA-256 is not {@link SILERO_VAD_V5_SHA256} (the message
 *   gives both digests), when onnxruntime cannot load it, or when its input/output names are not the v5 ones.
 */
export async function createSileroVad(options: SileroVadOptions = {}): Promise<VadModel> {
  const modelPath = options.modelPath ?? defaultModelPath();
  let bytes: Uint8Array;
  try {
    bytes = await readFile(modelPath);
  } catch (error) {
    throw new Error(`Silero VAD: cannot read the model file ${modelPath}`, { cause: error });
  }
  const digest = createHash("sha256").update(bytes).digest("hex");
  if (digest !== SILERO_VAD_V5_SHA256) {
    throw new Error(
      `Silero VAD: expected ${modelPath} to have SHA-256 ${SILERO_VAD_V5_SHA256} (silero_vad_v5.onnx), found ${digest}`,
    );
  }
  let session: BatchRunner;
  try {
    session = await (options.thread === "main" ? mainThreadRunner(bytes) : workerRunner(bytes));
  } catch (error) {
    throw new Error(`Silero VAD: onnxruntime could not load ${modelPath}`, { cause: error });
  }
  if (!sameNames(session.inputNames, INPUT_NAMES) || !sameNames(session.outputNames, OUTPUT_NAMES)) {
    const found = `inputs [${session.inputNames.join(", ")}], outputs [${session.outputNames.join(", ")}]`;
    await session.release();
    throw new Error(
      `Silero VAD: expected inputs [${INPUT_NAMES.join(", ")}] and outputs [${OUTPUT_NAMES.join(", ")}], found ${found}`,
    );
  }

  const inFlight = new Set<Promise<unknown>>();
  let closed = false;
  let released: Promise<void> | undefined;

  interface Waiting {
    readonly input: Float32Array;
    readonly state: Float32Array;
    readonly resolve: (result: { probability: number; state: Float32Array }) => void;
    readonly reject: (error: Error) => void;
  }
  let waiting: Waiting[] = [];
  let scheduled = false;

  /** Runs the frames that wait, as batches of at most MAX_BATCH rows. */
  async function runBatch(batch: readonly Waiting[]): Promise<void> {
    const rows = batch.length;
    const input = new Float32Array(rows * INPUT_SIZE);
    // [2, B, 128]: the two halves of each row's [2, 1, 128] state go to planes 0 and 1.
    const state = new Float32Array(2 * rows * STATE_UNITS);
    for (const [b, frame] of batch.entries()) {
      input.set(frame.input, b * INPUT_SIZE);
      state.set(frame.state.subarray(0, STATE_UNITS), b * STATE_UNITS);
      state.set(frame.state.subarray(STATE_UNITS), (rows + b) * STATE_UNITS);
    }
    const run = session.run(rows, input, state);
    inFlight.add(run);
    try {
      const outputs = await run.catch((error: unknown) => {
        throw new Error("Silero VAD: onnxruntime failed to run a frame", { cause: error });
      });
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
      for (const [b, frame] of batch.entries()) {
        const next = new Float32Array(STATE_SIZE);
        next.set(nextState.subarray(b * STATE_UNITS, (b + 1) * STATE_UNITS), 0);
        next.set(nextState.subarray((rows + b) * STATE_UNITS, (rows + b + 1) * STATE_UNITS), STATE_UNITS);
        frame.resolve({ probability: probabilities[b] as number, state: next });
      }
    } catch (error) {
      for (const frame of batch) frame.reject(error as Error);
    } finally {
      inFlight.delete(run);
    }
  }

  /** Runs every frame that waits: one batch per MAX_BATCH frames. */
  function flush(): void {
    scheduled = false;
    const all = waiting;
    waiting = [];
    if (closed) {
      for (const frame of all) frame.reject(new Error("Silero VAD: the model is closed"));
      return;
    }
    for (let i = 0; i < all.length; i += MAX_BATCH) void runBatch(all.slice(i, i + MAX_BATCH));
  }

  /**
   * Runs one frame: `input` is context + frame (576 floats), `state` the stream's state; returns the new ones. The
   * frame waits for the end of the current turn of the event loop, so that every stream's frame of that turn goes
   * in the same batch.
   */
  function infer(input: Float32Array, state: Float32Array): Promise<{ probability: number; state: Float32Array }> {
    if (closed) {
      return Promise.reject(new Error("Silero VAD: the model is closed"));
    }
    return new Promise((resolve, reject) => {
      waiting.push({ input, state, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
  }

  function createStream(): VadStream {
    if (closed) {
      throw new Error("Silero VAD: the model is closed");
    }
    let state: Float32Array = new Float32Array(STATE_SIZE);
    let context: Float32Array = new Float32Array(CONTEXT_SAMPLES);
    let frame = new Float32Array(FRAME_SAMPLES);
    let filled = 0;
    /** Bumped by reset(): work queued or running from before a reset drops its samples and leaves state alone. */
    let epoch = 0;
    let queue: Promise<unknown> = Promise.resolve();

    async function runFrames(samples: Int16Array, callEpoch: number): Promise<number[]> {
      const probabilities: number[] = [];
      for (let i = 0; i < samples.length && callEpoch === epoch; i++) {
        frame[filled++] = (samples[i] ?? 0) / 32768;
        if (filled < FRAME_SAMPLES) {
          continue;
        }
        const input = new Float32Array(INPUT_SIZE);
        input.set(context, 0);
        input.set(frame, CONTEXT_SAMPLES);
        const result = await infer(input, state);
        if (callEpoch !== epoch) {
          break;
        }
        probabilities.push(result.probability);
        state = result.state;
        context = input.slice(input.length - CONTEXT_SAMPLES);
        frame = new Float32Array(FRAME_SAMPLES);
        filled = 0;
      }
      return probabilities;
    }

    return {
      process(samples: Int16Array): Promise<number[]> {
        // Calls run one after another in call order; the copy keeps a caller's reused buffer from changing under us.
        const callEpoch = epoch;
        const copy = samples.slice();
        const run = queue.then(() => runFrames(copy, callEpoch));
        queue = run.catch(() => undefined);
        return run;
      },
      reset(): void {
        epoch++;
        state = new Float32Array(STATE_SIZE);
        context = new Float32Array(CONTEXT_SAMPLES);
        frame = new Float32Array(FRAME_SAMPLES);
        filled = 0;
      },
    };
  }

  return {
    sampleRate: SAMPLE_RATE,
    frameSamples: FRAME_SAMPLES,
    createStream,
    close(): Promise<void> {
      closed = true;
      released ??= Promise.allSettled([...inFlight]).then(() => session.release());
      return released;
    },
  };
}

const lengthOf = (value: unknown): string =>
  value instanceof Float32Array ? String(value.length) : value === undefined ? "none" : typeof value;

function defaultModelPath(): string {
  const packageJson = createRequire(import.meta.url).resolve("@ricky0123/vad-web/package.json");
  return join(dirname(packageJson), "dist", "silero_vad_v5.onnx");
}

function sameNames(found: readonly string[], expected: readonly string[]): boolean {
  return found.length === expected.length && expected.every((name) => found.includes(name));
}
