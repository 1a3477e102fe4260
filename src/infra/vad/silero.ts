/**
 * Silero VAD v5 adapter of the Vad port (DESIGN.md, "Ports": Vad), on `onnxruntime-node`. One InferenceSession,
 * single-threaded, is shared by every stream. The streams (state, context, leftover samples) and their batching
 * are silero-streams.ts: frames of all streams that wait at the same time run as one batch, one batch at a time
 * (issue 11), and a row's output is the same float as a run of its own (checked in test/infra/silero.unit.test.ts).
 * By default the streams and the session live on a worker thread, so a call costs one message each way and the
 * event loop goes on while a batch runs.
 *
 * Model I/O (checked at load): `input` float32 [B, 576] = the previous 64 samples + 512 new ones, as int16 / 32768;
 * `state` float32 [2, B, 128]; `sr` int64 scalar 16000 -> `output` float32 [B, 1] speech probability, `stateN`
 * float32 [2, B, 128].
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Worker } from "node:worker_threads";
import type { VadModel, VadStream } from "../../engine/ports/vad.ts";
import { createFlushTimer } from "../flush-timer.ts";
import { closeWorker, createPendingCalls } from "../worker-calls.ts";
import { loadSileroSession } from "./silero-session.ts";
import { createSileroStreams, FRAME_SAMPLES, type SileroStreams } from "./silero-streams.ts";

/** SHA-256 (hex) of `silero_vad_v5.onnx` as shipped by `@ricky0123/vad-web@0.0.31`. */
export const SILERO_VAD_V5_SHA256 = "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f";

/** Options of {@link createSileroVad}. */
export interface SileroVadOptions {
  /** Path of the ONNX file; default: `dist/silero_vad_v5.onnx` of the installed `@ricky0123/vad-web`. */
  readonly modelPath?: string;
  /**
   * Where the streams and inference live: `worker` (default), a worker thread of its own (silero-worker.mjs), so
   * the event loop goes on while a batch runs; `main`, on the event loop (onnxruntime-node runs a session
   * synchronously).
   */
  readonly thread?: "worker" | "main";
}

/** The streams of the model, on the event loop or on a worker thread. */
interface Backend {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly streams: SileroStreams;
  /** Ends the streams, waits for the batch running, releases the session. */
  release(): Promise<void>;
}

const mainThreadBackend = async (bytes: Uint8Array): Promise<Backend> => {
  const { session, run } = await loadSileroSession(bytes);
  const streams = createSileroStreams(run);
  return {
    inputNames: session.inputNames,
    outputNames: session.outputNames,
    streams,
    release: async () => {
      await streams.shutdown();
      await session.release();
    },
  };
};

/** The least time between two messages to the VAD thread under load, ms (flush-timer.ts). */
const VAD_FLUSH_MS = 2;

/**
 * The streams live on a worker thread (silero-worker.mjs); this side forwards the calls waiting as one message, at
 * most one per {@link VAD_FLUSH_MS} under load, and the worker answers each batch's finished calls as one message.
 */
const workerBackend = (bytes: Uint8Array): Promise<Backend> =>
  new Promise((resolve, reject) => {
    const worker = new Worker(new URL("./silero-worker.mjs", import.meta.url), { workerData: { model: bytes } });
    const calls = createPendingCalls<number[]>(worker);
    let failed: Error | null = null;
    let ops: WorkerOp[] = [];
    let transfer: ArrayBuffer[] = [];
    const fail = (error: Error): void => {
      failed ??= error;
      calls.rejectAll(error);
      reject(error);
    };
    const timer = createFlushTimer(() => {
      if (ops.length === 0 || failed !== null) return;
      worker.postMessage({ ops }, transfer);
      ops = [];
      transfer = [];
    }, VAD_FLUSH_MS);
    const send = (op: WorkerOp, buffer?: ArrayBuffer): void => {
      ops.push(op);
      if (buffer !== undefined) transfer.push(buffer);
      timer.schedule();
    };
    const streams: SileroStreams = {
      open: (id) => send({ open: id }),
      process(id, samples) {
        if (failed !== null) return Promise.reject(failed);
        const { id: call, answer } = calls.add();
        send({ process: id, call, samples }, samples.buffer as ArrayBuffer);
        return answer;
      },
      reset: (id) => send({ reset: id }),
      close: (id) => send({ close: id }),
      async shutdown() {
        timer.now();
        worker.removeAllListeners("exit");
        await closeWorker(worker);
        fail(new Error("Silero VAD: the model is closed"));
      },
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`the Silero VAD worker thread exited (code ${code})`)));
    worker.on("message", (message: WorkerMessage) => {
      if ("loadError" in message) {
        fail(new Error(message.loadError));
        return;
      }
      if ("ready" in message) {
        resolve({ ...message.ready, streams, release: () => streams.shutdown() });
        return;
      }
      for (const result of message.results) {
        if ("error" in result) calls.reject(result.call, new Error(result.error));
        else calls.resolve(result.call, result.probabilities);
      }
    });
  });

/** What this side sends silero-worker.mjs, in order, per turn of the event loop. */
type WorkerOp =
  | { readonly open: number }
  | { readonly process: number; readonly call: number; readonly samples: Int16Array }
  | { readonly reset: number }
  | { readonly close: number };

type WorkerMessage =
  | { readonly loadError: string }
  | { readonly ready: { readonly inputNames: string[]; readonly outputNames: string[] } }
  | {
      readonly results: readonly (
        | { readonly call: number; readonly probabilities: number[] }
        | { readonly call: number; readonly error: string }
      )[];
    };

const SAMPLE_RATE = 16000;
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
  let backend: Backend;
  try {
    backend = await (options.thread === "main" ? mainThreadBackend(bytes) : workerBackend(bytes));
  } catch (error) {
    throw new Error(`Silero VAD: onnxruntime could not load ${modelPath}`, { cause: error });
  }
  if (!sameNames(backend.inputNames, INPUT_NAMES) || !sameNames(backend.outputNames, OUTPUT_NAMES)) {
    const found = `inputs [${backend.inputNames.join(", ")}], outputs [${backend.outputNames.join(", ")}]`;
    await backend.release();
    throw new Error(
      `Silero VAD: expected inputs [${INPUT_NAMES.join(", ")}] and outputs [${OUTPUT_NAMES.join(", ")}], found ${found}`,
    );
  }
  const { streams } = backend;
  let nextStream = 0;
  let closed = false;
  let released: Promise<void> | undefined;

  function createStream(): VadStream {
    if (closed) throw new Error("Silero VAD: the model is closed");
    const id = nextStream++;
    streams.open(id);
    return {
      process(samples: Int16Array): Promise<number[]> {
        if (closed) return Promise.reject(new Error("Silero VAD: the model is closed"));
        // A copy: a caller's reused buffer must not change under a call that has not run yet.
        return streams.process(id, samples.slice());
      },
      reset: () => streams.reset(id),
      close: () => streams.close(id),
    };
  }

  return {
    sampleRate: SAMPLE_RATE,
    frameSamples: FRAME_SAMPLES,
    createStream,
    close(): Promise<void> {
      closed = true;
      released ??= backend.release();
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
