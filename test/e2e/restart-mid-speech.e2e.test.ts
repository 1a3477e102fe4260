import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, startServerProcess } from "../../src/cli/server-process.ts";
import { DuplexClient } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { pcm16ToBytes, readWavFile } from "../../src/infra/audio/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { expectDeliveredAsLogged } from "../support/delivery.ts";
import { kill } from "../support/kill.ts";
import { sharedAudio } from "../support/server.ts";

/**
 * BEHAVIOUR.md scenario 21 ("Moves lose nothing"; issue 33, part 2): SIGKILL while the user is speaking, restart on
 * the same data, resume -> the utterance in progress is answered once. The README's demo case: the default echo
 * runner in the model-native lane, Silero VAD, question_16k.wav (speech from 0 to 2.3 s) streamed at real-time
 * pace by a DuplexClient that resumes by itself; the server dies 1 s into the speech. The echo says how much speech
 * it heard: the whole utterance, not the part after the restart.
 */

describe("SIGKILL while the user is speaking", () => {
  const children: ChildProcess[] = [];
  let dataDir = "";
  afterAll(async () => {
    for (const child of children) await kill(child);
    if (dataDir !== "") await rm(dataDir, { recursive: true, force: true });
  });

  it("scenario 21: restart, resume -> the utterance in progress is answered once, whole, in order", async () => {
    dataDir = await mkdtemp(join(tmpdir(), "duplex-restart-mid-speech-"));
    const port = await freePort();
    const first = (await startServerProcess(port, dataDir, 30_000)).child;
    children.push(first);
    const client = await DuplexClient.connect(`ws://127.0.0.1:${port}/v1/realtime`, {
      session: { input_sample_rate_hz: 16000 },
      reconnect: { attempts: 60, baseDelayMs: 100, maxDelayMs: 500 },
      ackIntervalMs: 200,
    });
    const speech = pcm16ToBytes((await readWavFile(sharedAudio("question_16k.wav"))).samples);
    let killed: Promise<ChildProcess> | null = null;
    const streamed = client.streamAudio(speech, {
      bytesPerSecond: 32_000,
      // 1 s into the speech (it starts with the file): the server dies; the client goes on streaming into its
      // reconnect queue, and sends the rest once it resumed.
      onAppend: (index) => {
        if (index !== 10) return;
        killed = kill(first).then(async () => {
          const second = (await startServerProcess(port, dataDir, 30_000)).child;
          children.push(second);
          return second;
        });
      },
    });
    await streamed;
    const second = await (killed as unknown as Promise<ChildProcess>);
    await client.events.waitFor("connection.resumed", { since: 0, timeoutMs: 60_000 });
    // 1 s of silence: the speech stops after the restart.
    await client.streamAudio(new Uint8Array(32_000), { bytesPerSecond: 32_000 });
    const done = await client.events.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
    expect(done.response).toMatchObject({ status: "completed" });
    // Nothing more comes of it: one answer.
    await new Promise((r) => setTimeout(r, 1_000));
    const delivered = client.events.events();
    const created = delivered.filter((e) => e.type === "response.created");
    expect(created).toHaveLength(1);
    expect(delivered.filter((e) => e.type === "response.done")).toHaveLength(1);
    const responseId = String((done.response as { id: string }).id);
    const deltas = delivered.filter((e) => e.type === "response.output_audio.delta" && e.response_id === responseId);
    expect(deltas.length).toBeGreaterThan(0);
    const types = delivered.map((e) => e.type);
    expect(types.indexOf("connection.resumed")).toBeLessThan(types.indexOf("response.created"));
    expect(types.indexOf("response.created")).toBeLessThan(types.indexOf("response.output_audio.delta"));
    expect(types.lastIndexOf("response.output_audio.delta")).toBeLessThan(types.indexOf("response.done"));
    // The echo heard the utterance from its start: about 2.3 s of speech and the 0.5 s of silence that ended it
    // (less what the dead socket swallowed); the part after the restart alone is under 2 s.
    const transcript = await client.events.waitFor("response.output_audio_transcript.done", { since: 0 });
    const heard = Number(/I heard ([\d.]+) seconds/.exec(String(transcript.transcript))?.[1]);
    expect(heard).toBeGreaterThanOrEqual(2.2);
    await client.close();
    expect(await client.closed).toBeNull();
    expect(client.resumes).toBe(1);

    await kill(second);
    const store = createSqliteEventStore({ path: join(dataDir, "duplex.sqlite") });
    const entries = await store.read(streamOf(client.sessionId));
    await store.close();
    const logged = entries.map((e) => e.type);
    // One utterance across the restart: started before it, stopped after it, answered once.
    expect(logged.filter((t) => t === "SpeechStarted")).toHaveLength(1);
    expect(logged.filter((t) => t === "SpeechStopped")).toHaveLength(1);
    expect(logged.filter((t) => t === "ResponseStarted")).toHaveLength(1);
    expect(logged.indexOf("SpeechStarted")).toBeLessThan(logged.indexOf("SessionRecovered"));
    expect(logged.indexOf("SessionRecovered")).toBeLessThan(logged.indexOf("SpeechStopped"));
    expect(entries.find((e) => e.type === "UtteranceResubmitted")?.data).toMatchObject({ inProgress: true });
    // In order, nothing lost or repeated across the restart, to the session's close.
    const all = client.events.events();
    expect(all.at(-1)?.type).toBe("session.closed");
    expect(expectDeliveredAsLogged(all, entries)).toBe(client.lastReceivedSeq);
    const replay = replayEntries(entries);
    expect(replay.divergence).toBeNull();
    expect(replay.ok).toBe(true);
  }, 90_000);
});
