// Records the sessions under replays/ again (`npm run replays:record`): needed when a change to the decider
// changes what recorded sessions decide, which the replay tests report. Each fixture is a real session against an
// in-process server on real audio from ../shared/audio.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { runDemo } from "../src/cli/demo.ts";
import { RealtimeClient } from "../src/client/index.ts";
import { REFERENCE_PEER_SCRIPT } from "../src/conformance/files.ts";
import { streamOf } from "../src/engine/index.ts";
import { readWavFile, resamplePcm16 } from "../src/infra/audio/index.ts";
import { parseConfig } from "../src/infra/config.ts";
import { writeSessionFile } from "../src/infra/event-store/index.ts";
import { encodeAudio } from "../src/protocol/index.ts";
import { startServer } from "../src/server/index.ts";

const audio = (name: string): string => resolve("../shared/audio", name);

const stream = async (client: RealtimeClient, file: string, tailMs: number): Promise<void> => {
  const wav = await readWavFile(audio(file));
  client.appendSamples(wav.samples, { sampleRateHz: 16000, tailMs });
};

const dir = await mkdtemp(join(tmpdir(), "duplex-record-"));
const config = parseConfig({
  log_level: "silent",
  listen: { host: "127.0.0.1", port: 0 },
  event_store: { kind: "sqlite", path: join(dir, "duplex.sqlite") },
  runner: { kind: "echo", chunk_period_ms: 200, speed_factor: 1 },
});
const server = await startServer(config);
const idOf = async (client: RealtimeClient): Promise<string> =>
  String(((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id);
const closeAndSave = async (client: RealtimeClient, id: string, file: string): Promise<void> => {
  client.send({ type: "session.close" });
  await client.closed;
  await save(id, file);
};
const save = async (sessionId: string, file: string): Promise<void> => {
  await writeSessionFile(join("replays", file), streamOf(sessionId), await server.store.read(streamOf(sessionId)));
  process.stdout.write(`recorded ${file}\n`);
};
try {
  // 1. The demo flow: the model-native lane, playback acknowledged as played.
  const demo = await runDemo({ url: server.url, input: audio("question_16k.wav"), out: join(dir, "out") });
  await save(demo.session_id, "question-echo.jsonl");

  // 2. Server VAD, a barge-in over the answer, a dropped socket, a resume, a cancel, then close.
  const first = await RealtimeClient.connect(server.url);
  first.send({
    type: "session.update",
    session: {
      audio: { input: { format: { type: "audio/pcm", rate: 16000 }, turn_detection: { type: "server_vad" } } },
    },
  });
  const created = await first.waitFor("session.created", { since: 0 });
  const sessionId = String((created.session as { id: string }).id);
  await stream(first, "question_16k.wav", 700);
  await first.waitFor("response.output_audio.delta", { since: 0, timeoutMs: 20_000 });
  await stream(first, "interrupt_16k.wav", 1500);
  await first.waitFor((e) => e.type === "response.done" && (e.response as { status: string }).status === "cancelled", {
    since: 0,
    timeoutMs: 20_000,
  });
  const last = first.lastSeq();
  await first.terminate();
  const second = await RealtimeClient.connect(server.url);
  second.send({
    type: "session.resume",
    session_id: sessionId,
    resume_token: created.resume_token,
    last_received_server_event_seq: last,
  });
  await second.waitFor("session.resumed");
  await second.waitFor((e) => e.type === "response.output_audio.delta", { since: 0, timeoutMs: 20_000 });
  second.send({ type: "response.cancel" });
  await second.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
  second.send({ type: "session.close" });
  await second.waitFor("session.closed", { since: 0 });
  await second.closed;
  await save(sessionId, "barge-in-resume.jsonl");

  // 3. The turn lane: a text item, then response.create, as a text-only response.
  const turn = await RealtimeClient.connect(`${server.url}?native_duplex=0`);
  const turnId = await idOf(turn);
  turn.send({
    type: "conversation.item.create",
    item: { type: "message", role: "user", content: [{ type: "input_text", text: "What time is it?" }] },
  });
  turn.send({ type: "response.create", response: { output_modalities: ["text"] } });
  await turn.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
  await closeAndSave(turn, turnId, "turn-lane-text.jsonl");

  // 4. Refused frames (not JSON, an unknown type, an unknown item, a bad audio payload): each a coded error, and
  // the session goes on and answers.
  const errors = await RealtimeClient.connect(server.url);
  const errorsId = await idOf(errors);
  errors.sendRaw("{not json");
  errors.send({ type: "no.such.event" });
  errors.send({ type: "conversation.item.retrieve", item_id: "item_nope" });
  errors.send({ type: "input_audio_buffer.append", audio: "***" });
  await errors.waitFor(() => errors.types().filter((t) => t === "error").length >= 4, { since: 0, timeoutMs: 10_000 });
  errors.send({ type: "response.create" });
  await errors.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
  await closeAndSave(errors, errorsId, "errors.jsonl");

  // 5. Server VAD in the turn lane on a minute of real speech with pauses: one commit per utterance, no answers.
  const vad = await RealtimeClient.connect(`${server.url}?native_duplex=0`);
  const vadId = await idOf(vad);
  vad.send({
    type: "session.update",
    session: {
      audio: {
        input: {
          format: { type: "audio/pcm", rate: 16000 },
          turn_detection: { type: "server_vad", create_response: false },
        },
      },
    },
  });
  await vad.waitFor("session.updated", { since: 0 });
  await stream(vad, "speech_60s_16k.wav", 1000);
  vad.send({ type: "session.heartbeat" });
  await vad.waitFor("session.heartbeat_ack", { since: 0, timeoutMs: 60_000 });
  await closeAndSave(vad, vadId, "server-vad-speech-60s.jsonl");

  // 6. G.711 mu-law input at 8 kHz, answered in the model-native lane.
  const g711 = await RealtimeClient.connect(server.url);
  const g711Id = await idOf(g711);
  g711.send({ type: "session.update", session: { input_audio_format: "g711_ulaw" } });
  await g711.waitFor("session.updated", { since: 0 });
  const question = await readWavFile(audio("question_16k.wav"));
  const mulaw = encodeAudio(
    { encoding: "g711_ulaw", rate: 8000 },
    resamplePcm16(new Int16Array([...question.samples, ...new Int16Array(16000)]), 16000, 8000),
  );
  for (let offset = 0; offset < mulaw.length; offset += 800)
    g711.send({
      type: "input_audio_buffer.append",
      audio: Buffer.from(mulaw.subarray(offset, offset + 800)).toString("base64"),
    });
  await g711.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
  await closeAndSave(g711, g711Id, "g711-input.jsonl");

  // 7. Deferred responses in the turn lane: a second commit while the first answer streams waits for it.
  const deferred = await RealtimeClient.connect(`${server.url}?native_duplex=0`);
  const deferredId = await idOf(deferred);
  deferred.send({ type: "session.update", session: { input_audio_format: "pcm16", input_sample_rate_hz: 16000 } });
  await deferred.waitFor("session.updated", { since: 0 });
  for (let i = 0; i < 2; i += 1) {
    await stream(deferred, "question_16k.wav", 200);
    deferred.send({ type: "input_audio_buffer.commit", response_create: true });
  }
  await deferred.waitFor(() => deferred.types().filter((t) => t === "response.done").length >= 2, {
    since: 0,
    timeoutMs: 30_000,
  });
  await closeAndSave(deferred, deferredId, "turn-lane-two-responses.jsonl");
} finally {
  await server.close();
}

// 8. A restart of the server mid-session: the session is rebuilt from its log and resumed, and answers again.
const restarted = await startServer(config);
try {
  const before = await RealtimeClient.connect(restarted.url);
  const created = await before.waitFor("session.created", { since: 0 });
  const id = String((created.session as { id: string }).id);
  before.send({ type: "response.create" });
  await before.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
  const seen = before.lastSeq();
  await restarted.close();
  const again = await startServer(config);
  try {
    const after = await RealtimeClient.connect(`${again.url}?autostart=0`);
    after.send({
      type: "session.resume",
      session_id: id,
      resume_token: created.resume_token,
      last_received_server_event_seq: seen,
    });
    const resumed = await after.waitFor("session.resumed", { since: 0 });
    after.send({ type: "response.create" });
    await after.waitFor((e) => e.type === "response.done", {
      since: after.received.findIndex((r) => r.event === resumed) + 1,
      timeoutMs: 20_000,
    });
    after.send({ type: "session.close" });
    await after.closed;
    await writeSessionFile(join("replays", "restart-resume.jsonl"), streamOf(id), await again.store.read(streamOf(id)));
    process.stdout.write("recorded restart-resume.jsonl\n");
  } finally {
    await again.close();
  }
} catch (error) {
  await restarted.close().catch(() => undefined);
  throw error;
}

// 9. A tool call: the scripted reference peer calls get_weather, the client answers it, the model says the answer.
// 10. The same conversation through an upstream chain: this server in front, the reference peer behind.
const peerDir = await mkdtemp(join(tmpdir(), "duplex-record-peer-"));
const peer = await startServer(
  parseConfig({
    log_level: "silent",
    listen: { host: "127.0.0.1", port: 0 },
    event_store: { kind: "sqlite", path: join(peerDir, "duplex.sqlite") },
    runner: { kind: "scripted", script: REFERENCE_PEER_SCRIPT },
  }),
);
const frontDir = await mkdtemp(join(tmpdir(), "duplex-record-front-"));
const front = await startServer(
  parseConfig({
    log_level: "silent",
    listen: { host: "127.0.0.1", port: 0 },
    event_store: { kind: "sqlite", path: join(frontDir, "duplex.sqlite") },
    runner: { kind: "upstream", url: peer.url, dialect: "duplex" },
  }),
);
const toolConversation = async (url: string, store: typeof peer.store, file: string): Promise<void> => {
  const client = await RealtimeClient.connect(`${url}?native_duplex=0`);
  const id = await idOf(client);
  client.send({
    type: "session.update",
    session: { tools: [{ type: "function", name: "get_weather", parameters: { type: "object" } }] },
  });
  await client.waitFor("session.updated", { since: 0 });
  client.send({
    type: "conversation.item.create",
    item: { type: "message", role: "user", content: [{ type: "input_text", text: "What's the weather in Lisbon?" }] },
  });
  client.send({ type: "response.create" });
  const call = await client.waitFor("response.function_call_arguments.done", { since: 0, timeoutMs: 20_000 });
  await client.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
  client.send({
    type: "conversation.item.create",
    item: { type: "function_call_output", call_id: call.call_id, output: "Sunny, 24 C" },
  });
  const before = client.received.length;
  client.send({ type: "response.create" });
  await client.waitFor("response.done", { since: before, timeoutMs: 20_000 });
  client.send({ type: "session.close" });
  await client.closed;
  await writeSessionFile(join("replays", file), streamOf(id), await store.read(streamOf(id)));
  process.stdout.write(`recorded ${file}\n`);
};
try {
  await toolConversation(peer.url, peer.store, "tool-call.jsonl");
  await toolConversation(front.url, front.store, "upstream-chain-tool-call.jsonl");
} finally {
  await front.close();
  await peer.close();
  await rm(peerDir, { recursive: true, force: true });
  await rm(frontDir, { recursive: true, force: true });
  await rm(dir, { recursive: true, force: true });
}
