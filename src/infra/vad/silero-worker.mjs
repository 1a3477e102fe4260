// The thread that holds the Silero VAD v5 streams and runs the model for src/infra/vad/silero.ts (issue 11:
// inference off the event loop, and one message each way per turn instead of one per frame). Plain JavaScript: a
// worker thread does not get the TypeScript loader of its parent, so it registers tsx before loading
// silero-streams.ts and silero-session.ts.
//
// workerData: { model: Uint8Array } (the bytes, already checked against their SHA-256 by the parent).
// Messages in: { ops: [{ open: id } | { process: id, call, samples: Int16Array } | { reset: id } | { close: id }] },
// applied in order; "close" ends the streams, releases the session and ends the thread.
// Messages out: { ready: { inputNames, outputNames } } once loaded, or { loadError: message };
// { results: [{ call, probabilities: number[] } | { call, error: message }] }, the calls finished in one turn.
import { parentPort, workerData } from "node:worker_threads";
import { register } from "tsx/esm/api";

register();
const { createSileroStreams } = await import("./silero-streams.ts");
const { loadSileroSession } = await import("./silero-session.ts");

const port = parentPort;
let session;
let run;
try {
  ({ session, run } = await loadSileroSession(workerData.model));
  port.postMessage({ ready: { inputNames: session.inputNames, outputNames: session.outputNames } });
} catch (error) {
  port.postMessage({ loadError: error instanceof Error ? error.message : String(error) });
}

const streams = createSileroStreams((rows, input, state) => run(rows, input, state));

let results = [];
const answer = (result) => {
  if (results.length === 0)
    setImmediate(() => {
      const sent = results;
      results = [];
      port.postMessage({ results: sent });
    });
  results.push(result);
};

port.on("message", async (message) => {
  if (message === "close") {
    await streams.shutdown();
    await session?.release();
    port.close();
    return;
  }
  for (const op of message.ops) {
    if (op.open !== undefined) streams.open(op.open);
    else if (op.reset !== undefined) streams.reset(op.reset);
    else if (op.close !== undefined) streams.close(op.close);
    else {
      const { call } = op;
      streams.process(op.process, op.samples).then(
        (probabilities) => answer({ call, probabilities }),
        (error) => answer({ call, error: error instanceof Error ? error.message : String(error) }),
      );
    }
  }
});
