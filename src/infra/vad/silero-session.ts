import ort from "onnxruntime-node";
import { INPUT_SIZE, type RunBatch, STATE_UNITS } from "./silero-streams.ts";

/**
 * Loads Silero VAD v5 into an onnxruntime InferenceSession, single-threaded and sequential (one session is shared by
 * every stream; batching, not threads, is how it scales), and returns it with the {@link RunBatch} that feeds it:
 * `input` float32 [rows, 576], `state` float32 [2, rows, 128], `sr` int64 16000 -> `output`, `stateN`. Used on the
 * event loop (silero.ts) and on the VAD thread (silero-worker.mjs).
 *
 * @param bytes the model file's bytes (checked against their SHA-256 by the caller).
 * @throws Error from onnxruntime when the bytes are not a model it can load.
 */
export async function loadSileroSession(bytes: Uint8Array): Promise<{ session: ort.InferenceSession; run: RunBatch }> {
  const session = await ort.InferenceSession.create(bytes, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: "sequential",
  });
  const sampleRate = new ort.Tensor("int64", BigInt64Array.of(16000n), []);
  const run: RunBatch = async (rows, input, state) => {
    const outputs = await session.run({
      input: new ort.Tensor("float32", input, [rows, INPUT_SIZE]),
      state: new ort.Tensor("float32", state, [2, rows, STATE_UNITS]),
      sr: sampleRate,
    });
    return { output: outputs.output?.data, stateN: outputs.stateN?.data };
  };
  return { session, run };
}
