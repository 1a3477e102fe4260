// The thread that runs Silero VAD v5 for src/infra/vad/silero.ts (issue 11: inference off the event loop, so both
// cores work). Plain JavaScript: a worker thread does not get the TypeScript loader of its parent.
//
// workerData: { model: Uint8Array } (the bytes, already checked against their SHA-256 by the parent).
// Messages in: { id, rows, input: Float32Array [rows * 576], state: Float32Array [2 * rows * 128] } runs one batch;
// "close" releases the session and ends the thread.
// Messages out: { ready: { inputNames, outputNames } } once loaded, or { loadError: message };
// { id, output: Float32Array [rows], stateN: Float32Array [2 * rows * 128] } or { id, error: message } per batch.
import { parentPort, workerData } from "node:worker_threads";
import ort from "onnxruntime-node";

const port = parentPort;
let session;
try {
  session = await ort.InferenceSession.create(workerData.model, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: "sequential",
  });
  port.postMessage({ ready: { inputNames: session.inputNames, outputNames: session.outputNames } });
} catch (error) {
  port.postMessage({ loadError: error instanceof Error ? error.message : String(error) });
}

const sampleRate = new ort.Tensor("int64", BigInt64Array.of(16000n), []);

port.on("message", async (message) => {
  if (message === "close") {
    await session?.release();
    port.close();
    return;
  }
  const { id, rows, input, state } = message;
  try {
    const outputs = await session.run({
      input: new ort.Tensor("float32", input, [rows, 576]),
      state: new ort.Tensor("float32", state, [2, rows, 128]),
      sr: sampleRate,
    });
    const output = Float32Array.from(outputs.output.data);
    const stateN = Float32Array.from(outputs.stateN.data);
    port.postMessage({ id, output, stateN }, [output.buffer, stateN.buffer]);
  } catch (error) {
    port.postMessage({ id, error: error instanceof Error ? error.message : String(error) });
  }
});
