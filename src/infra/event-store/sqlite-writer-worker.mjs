// The thread that writes a sqlite store file for src/infra/event-store/sqlite.ts (issue 11: blob packing, inserts,
// commits and WAL checkpoints off the event loop). Plain JavaScript: a worker thread does not get the TypeScript
// loader of its parent, so it registers tsx itself before loading sqlite-writer.ts.
//
// workerData: { path } (the file, already opened and set up once by the parent).
// Messages in: { id, append: AppendRequest[] } joins the next group commit; { id, deleteStream: name };
// { id, rebuildSummaries: true }; { id, sync }; "close" closes the file and ends the thread.
// Messages out: { ready: true } once open, or { openError: message }; { id, outcomes: AppendOutcome[] };
// { id, deleted: boolean }, { id, rebuilt: streams } or { id, failure: { name, message, code? } }; { id, synced: true }
// answers { id, sync: true } once every earlier message is answered.
import { parentPort, workerData } from "node:worker_threads";
import { register } from "tsx/esm/api";

register();
const { createStoreWriter, openStoreFile } = await import("./sqlite-writer.ts");

const port = parentPort;
let db;
let writer;
try {
  db = openStoreFile(workerData.path);
  writer = createStoreWriter(db);
  port.postMessage({ ready: true });
} catch (error) {
  port.postMessage({ openError: error instanceof Error ? error.message : String(error) });
}

/** Requests that arrived while a group was being written: they form the next group. */
let queue = [];
let scheduled = false;

const flush = () => {
  scheduled = false;
  const messages = queue;
  queue = [];
  const requests = messages.flatMap((m) => m.append);
  const outcomes = writer.writeGroup(requests);
  let at = 0;
  for (const m of messages) {
    port.postMessage({ id: m.id, outcomes: outcomes.slice(at, at + m.append.length) });
    at += m.append.length;
  }
};

port.on("message", (message) => {
  if (message === "close") {
    if (queue.length > 0) flush();
    db?.close();
    port.close();
    return;
  }
  if (writer === undefined) {
    port.postMessage({ id: message.id, failure: { name: "Error", message: "the store file is not open" } });
    return;
  }
  if (message.append !== undefined) {
    // Every message already waiting joins the same transaction: group commit across sessions.
    queue.push(message);
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
    return;
  }
  if (queue.length > 0) flush();
  if (message.sync === true) {
    port.postMessage({ id: message.id, synced: true });
    return;
  }
  try {
    if (message.rebuildSummaries === true) port.postMessage({ id: message.id, rebuilt: writer.rebuildSummaries() });
    else port.postMessage({ id: message.id, deleted: writer.deleteStream(message.deleteStream) });
  } catch (error) {
    const e = error instanceof Error ? error : new Error(String(error));
    port.postMessage({ id: message.id, failure: { name: e.name, message: e.message, code: e.code } });
  }
});
