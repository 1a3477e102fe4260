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
 * Issue 10, part 7: the server process is killed with SIGKILL mid-response and started again on the same store
 * (BEHAVIOUR.md scenario 14, "Resume": a restart is a disconnect), and the DuplexClient resumes by itself: nothing
 * of the test resumes by hand (test/e2e/restart.e2e.test.ts does that over the wire).
 */

describe("DuplexClient across a killed server", () => {
  const children: ChildProcess[] = [];
  let dataDir = "";
  afterAll(async () => {
    for (const child of children) await kill(child);
    if (dataDir !== "") await rm(dataDir, { recursive: true, force: true });
  });

  it("SIGKILL mid-response, restart on the same data: the client resumes by itself, loses and repeats nothing, and the next response completes", async () => {
    dataDir = await mkdtemp(join(tmpdir(), "duplex-client-restart-"));
    const port = await freePort();
    const first = (await startServerProcess(port, dataDir, 30_000)).child;
    children.push(first);
    const client = await DuplexClient.connect(`ws://127.0.0.1:${port}/v1/realtime`, {
      session: { input_sample_rate_hz: 16000 },
      // The restart takes a few seconds on a busy machine: attempts enough to cover it.
      reconnect: { attempts: 60, baseDelayMs: 100, maxDelayMs: 500 },
      ackIntervalMs: 200,
    });
    const speech = pcm16ToBytes((await readWavFile(sharedAudio("question_16k.wav"))).samples);
    await client.streamAudio(speech, { bytesPerSecond: 32_000, realtime: false });
    client.appendAudio(new Uint8Array(32_000));
    const interrupted = await client.nextResponse(20_000);
    await client.events.waitFor("response.output_audio.delta", { since: 0, timeoutMs: 20_000 });

    await kill(first);
    const second = (await startServerProcess(port, dataDir, 30_000)).child;
    children.push(second);
    const resumed = await client.events.waitFor("connection.resumed", { since: 0, timeoutMs: 60_000 });
    expect(resumed).toMatchObject({ close_code: 1006, attachment_generation: 2, session_id: client.sessionId });

    // The response the crash cut off ends, as the restarted server says; the next one completes.
    const cut = await interrupted.done;
    expect(cut).toMatchObject({ status: "cancelled", statusDetails: { reason: "server_restart" } });
    const next = await client.createResponse().done;
    expect(next.status).toBe("completed");
    expect(next.audio.length).toBeGreaterThan(0);
    await client.close();
    expect(await client.closed).toBeNull();
    expect(client.resumes).toBe(1);

    await kill(second);
    const store = createSqliteEventStore({ path: join(dataDir, "duplex.sqlite") });
    const entries = await store.read(streamOf(client.sessionId));
    await store.close();
    const delivered = client.events.events();
    expect(expectDeliveredAsLogged(delivered, entries)).toBe(client.lastReceivedSeq);
    expect(delivered.at(-1)?.type).toBe("session.closed");
    const replay = replayEntries(entries);
    expect(replay.divergence).toBeNull();
    expect(replay.ok).toBe(true);
  });
});
