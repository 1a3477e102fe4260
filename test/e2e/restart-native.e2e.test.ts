import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, startServerProcess } from "../../src/cli/server-process.ts";
import { RealtimeClient } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { kill } from "../support/kill.ts";
import { sharedAudio } from "../support/server.ts";

/**
 * Issue 18, part 2: no turn lost on a crash in the model-native lane. The model (a scripted one) answers the user
 * 3 s after it hears their speech end; the server process is killed with SIGKILL in that gap, started again on the
 * same data, and the client resumes. The new runner never heard the utterance: the engine gives it the utterance's
 * logged audio again (UtteranceResubmitted), and the user is answered as after a dropped socket.
 */
const SCRIPT = `name: slow-answer
turns:
  - on: speech_stopped
    actions:
      - wait_ms: 3000
      - speak: "I heard you out."
      - end_turn
`;

describe("a model-native utterance not yet answered when the server dies", () => {
  const children: ChildProcess[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const child of children.splice(0)) await kill(child);
    for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
  });

  const setUp = async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "duplex-native-restart-"));
    dirs.push(dataDir);
    await writeFile(join(dataDir, "slow.yaml"), SCRIPT);
    const config = join(dataDir, "deploy.yaml");
    await writeFile(config, `runner:\n  kind: scripted\n  script: ${join(dataDir, "slow.yaml")}\n`);
    const port = await freePort();
    const serve = async (): Promise<ChildProcess> => {
      const { child } = await startServerProcess(port, dataDir, 30_000, ["--config", config]);
      children.push(child);
      return child;
    };
    return { dataDir, serve, url: `ws://127.0.0.1:${port}/v1/realtime` };
  };

  /** Speaks question_16k.wav and 1 s of silence; resolves once the server has decided all of it. */
  const speak = async (client: RealtimeClient) => {
    client.send({ type: "session.update", session: { input_audio_format: "pcm16", input_sample_rate_hz: 16000 } });
    const created = await client.waitFor("session.created", { since: 0 });
    await client.waitFor("session.updated", { since: 0 });
    const wav = await readWavFile(sharedAudio("question_16k.wav"));
    client.appendSamples(wav.samples, { sampleRateHz: 16000, tailMs: 1000 });
    const since = client.received.length;
    client.send({ type: "session.heartbeat" });
    await client.waitFor("session.heartbeat_ack", { since });
    // The model waits 3 s before it answers: no response yet.
    expect(client.types()).not.toContain("response.created");
    return { sessionId: String((created.session as { id: string }).id), token: String(created.resume_token) };
  };

  const resume = async (url: string, session: { sessionId: string; token: string }, last: number) => {
    const resumed = await RealtimeClient.connect(`${url}?autostart=0`);
    resumed.send({
      type: "session.resume",
      session_id: session.sessionId,
      resume_token: session.token,
      last_received_server_event_seq: last,
    });
    await resumed.waitFor("session.resumed", { timeoutMs: 10_000 });
    return resumed;
  };

  it("SIGKILL between the end of speech and the answer: after the restart and the resume, the user is answered", async () => {
    const { dataDir, serve, url } = await setUp();
    const first = await serve();
    const client = await RealtimeClient.connect(url);
    const session = await speak(client);
    await kill(first);
    await client.closed;
    await serve();
    const resumed = await resume(url, session, client.lastSeq());
    const done = await resumed.waitFor("response.done", { since: 0, timeoutMs: 15_000 });
    expect(done.response).toMatchObject({ status: "completed" });
    const transcript = await resumed.waitFor("response.output_audio_transcript.done", { since: 0 });
    expect(transcript.transcript).toBe("I heard you out.");
    resumed.send({ type: "session.close" });
    await resumed.waitFor("session.closed", { since: 0 });

    for (const child of children.splice(0)) await kill(child);
    const store = createSqliteEventStore({ path: join(dataDir, "duplex.sqlite") });
    const entries = await store.read(streamOf(session.sessionId));
    await store.close();
    const types = entries.map((e) => e.type);
    // The recovery gave the utterance to the new runner again: from its speech start to its stop.
    const resubmitted = entries.find((e) => e.type === "UtteranceResubmitted");
    expect(resubmitted?.data).toMatchObject({ audioStartMs: expect.any(Number), audioEndMs: expect.any(Number) });
    expect(types.indexOf("UtteranceResubmitted")).toBeGreaterThan(types.indexOf("SessionRecovered"));
    expect(types.indexOf("ResponseStarted")).toBeGreaterThan(types.indexOf("UtteranceResubmitted"));
    // And the session, kill and all, replays byte for byte.
    const replay = replayEntries(entries);
    expect(replay.divergence).toBeNull();
    expect(replay.ok).toBe(true);
  }, 60_000);

  it("a plain socket drop in the same place: the session's runner goes on, and the user is answered", async () => {
    const { serve, url } = await setUp();
    await serve();
    const client = await RealtimeClient.connect(url);
    const session = await speak(client);
    await client.terminate();
    const resumed = await resume(url, session, client.lastSeq());
    const done = await resumed.waitFor("response.done", { since: 0, timeoutMs: 15_000 });
    expect(done.response).toMatchObject({ status: "completed" });
    await resumed.close();
  }, 60_000);
});
