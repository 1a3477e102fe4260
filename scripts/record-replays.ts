// Records the sessions under replays/ again (`npm run replays:record`): needed when a change to the decider
// changes what recorded sessions decide, which the replay tests report. Each fixture is a real session against an
// in-process server on real audio from ../shared/audio.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { runDemo } from "../src/cli/demo.ts";
import { RealtimeClient } from "../src/client/index.ts";
import { streamOf } from "../src/engine/index.ts";
import { readWavFile } from "../src/infra/audio/index.ts";
import { parseConfig } from "../src/infra/config.ts";
import { writeSessionFile } from "../src/infra/event-store/index.ts";
import { startServer } from "../src/server/index.ts";

const audio = (name: string): string => resolve("../shared/audio", name);

const stream = async (client: RealtimeClient, file: string, tailMs: number): Promise<void> => {
  const wav = await readWavFile(audio(file));
  client.appendSamples(wav.samples, { sampleRateHz: 16000, tailMs });
};

const dir = await mkdtemp(join(tmpdir(), "duplex-record-"));
const server = await startServer(
  parseConfig({
    log_level: "silent",
    listen: { host: "127.0.0.1", port: 0 },
    event_store: { kind: "sqlite", path: join(dir, "duplex.sqlite") },
    runner: { kind: "echo", chunk_period_ms: 200, speed_factor: 1 },
  }),
);
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
} finally {
  await server.close();
  await rm(dir, { recursive: true, force: true });
}
