/**
 * Silero VAD v5 adapter of the Vad port (DESIGN.md, "Ports": Vad), on `onnxruntime-node`. One InferenceSession,
 * single-threaded, is shared by every stream; each stream holds its own recurrent state, its 64-sample context and
 * the samples of its unfinished frame, and passes them in on every run, so streams never see each other's state.
 *
 * Model I/O (checked at load): `input` float32 [1, 576] = the previous 64 samples + 512 new ones, as int16 / 32768;
 * `state` float32 [2, 1, 128]; `sr` int64 scalar 16000 -> `output` float32 [1, 1] speech probability, `stateN`
 * float32 [2, 1, 128]. The 64-sample context is what the reference `OnnxWrapper` of snakers4/silero-vad prepends.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import ort from "onnxruntime-node";
import type { VadModel, VadStream } from "../../engine/ports/vad.ts";

/** SHA-256 (hex) of `silero_vad_v5.onnx` as shipped by `@ricky0123/vad-web@0.0.31`. */
export const SILERO_VAD_V5_SHA256 = "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f";

/** Options of {@link createSileroVad}. */
export interface SileroVadOptions {
  /** Path of the ONNX file; default: `dist/silero_vad_v5.onnx` of the installed `@ricky0123/vad-web`. */
  readonly modelPath?: string;
}

const SAMPLE_RATE = 16000;
const FRAME_SAMPLES = 512;
const CONTEXT_SAMPLES = 64;
const STATE_SHAPE = [2, 1, 128] as const;
const STATE_SIZE = STATE_SHAPE[0] * STATE_SHAPE[1] * STATE_SHAPE[2];
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
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(bytes, {
      intraOpNumThreads: 1,
      interOpNumThreads: 1,
      executionMode: "sequential",
    });
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

  const sampleRateTensor = new ort.Tensor("int64", BigInt64Array.of(BigInt(SAMPLE_RATE)), []);
  const inFlight = new Set<Promise<unknown>>();
  let closed = false;
  let released: Promise<void> | undefined;

  /** Runs one frame: `input` is context + frame (576 floats), `state` the stream's state; returns the new ones. */
  async function infer(
    input: Float32Array,
    state: Float32Array,
  ): Promise<{ probability: number; state: Float32Array }> {
    if (closed) {
      throw new Error("Silero VAD: the model is closed");
    }
    const run = session.run({
      input: new ort.Tensor("float32", input, [1, input.length]),
      state: new ort.Tensor("float32", state, [...STATE_SHAPE]),
      sr: sampleRateTensor,
    });
    inFlight.add(run);
    try {
      const outputs = await run.catch((error: unknown) => {
        throw new Error("Silero VAD: onnxruntime failed to run a frame", { cause: error });
      });
      const probability = outputs.output?.data[0];
      const nextState = outputs.stateN?.data;
      if (typeof probability !== "number" || !(nextState instanceof Float32Array) || nextState.length !== STATE_SIZE) {
        throw new Error(
          `Silero VAD: expected a float32 "output" and a float32 "stateN" of ${STATE_SIZE} values, found ${typeof probability} and ${nextState?.length ?? "none"}`,
        );
      }
      return { probability, state: nextState.slice() };
    } finally {
      inFlight.delete(run);
    }
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
        const input = new Float32Array(CONTEXT_SAMPLES + FRAME_SAMPLES);
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

function defaultModelPath(): string {
  const packageJson = createRequire(import.meta.url).resolve("@ricky0123/vad-web/package.json");
  return join(dirname(packageJson), "dist", "silero_vad_v5.onnx");
}

function sameNames(found: readonly string[], expected: readonly string[]): boolean {
  return found.length === expected.length && expected.every((name) => found.includes(name));
}
