import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, startServerProcess } from "../../src/cli/server-process.ts";
import { RealtimeClient, type ServerEvent } from "../../src/client/index.ts";
import { foldLog, streamOf } from "../../src/engine/index.ts";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { kill } from "../support/kill.ts";
import { sharedAudio } from "../support/server.ts";

/**
 * BEHAVIOUR.md scenario 14: the server process is killed (SIGKILL) mid-response and started again on the same
 * store; the client resumes with its token and last seq, receives no duplicate and loses no event.
 */
/** Starts `duplex serve` as a real process and resolves once it listens. */
const serve = async (port: number, dataDir: string): Promise<ChildProcess> =>
  (await startServerProcess(port, dataDir, 30_000)).child;

describe("restart", () => {
  let dataDir: string;
  let port: number;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "duplex-restart-"));
    port = await freePort();
  });
  afterAll(async () => {
    for (const child of children) await kill(child);
    await rm(dataDir, { recursive: true, force: true });
  });

  it("scenario 14: SIGKILL mid-response, restart on the same store, resume: no duplicate, no loss, and the response ends", async () => {
    const url = `ws://127.0.0.1:${port}/v1/realtime`;
    const first = await serve(port, dataDir);
    children.push(first);
    const client = await RealtimeClient.connect(url);
    client.send({ type: "session.update", session: { input_audio_format: "pcm16", input_sample_rate_hz: 16000 } });
    const created = await client.waitFor("session.created", { since: 0 });
    const sessionId = String((created.session as { id: string }).id);
    const token = String(created.resume_token);
    const wav = await readWavFile(sharedAudio("question_16k.wav"));
    client.appendSamples(wav.samples, { sampleRateHz: 16000, tailMs: 1000 });
    await client.waitFor("response.output_audio.delta", { timeoutMs: 20_000 });

    await kill(first);
    await client.closed;
    const before: ServerEvent[] = client.received.map((r) => r.event).filter((e) => e.server_event_seq !== undefined);
    const last = client.lastSeq();
    expect(before.some((e) => e.type === "response.done")).toBe(false);

    const second = await serve(port, dataDir);
    children.push(second);
    const resumed = await RealtimeClient.connect(`${url}?autostart=0`);
    resumed.send({
      type: "session.resume",
      session_id: sessionId,
      resume_token: token,
      last_received_server_event_seq: last,
    });
    const ack = await resumed.waitFor("session.resumed", { timeoutMs: 10_000 });
    expect(ack).toMatchObject({ session_id: sessionId, attachment_generation: 2 });
    const done = await resumed.waitFor("response.done", { since: 0, timeoutMs: 10_000 });
    expect(done.response).toMatchObject({ status: "cancelled", status_details: { reason: "server_restart" } });
    resumed.send({ type: "session.close" });
    await resumed.waitFor("session.closed", { since: 0 });
    await resumed.closed;

    // session.resumed carries no seq; every other event, as received on both sockets, is 1, 2, 3, ... once each.
    expect(ack.server_event_seq).toBeUndefined();
    const after = resumed.received.map((r) => r.event).filter((e) => e.type !== "session.resumed");
    const seqs = [...before, ...after].map((e) => Number(e.server_event_seq));
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));

    // What the client holds, before and after the crash, is exactly what the log renders.
    await kill(second);
    const store = createSqliteEventStore({ path: join(dataDir, "duplex.sqlite") });
    const log = foldLog(await store.read(streamOf(sessionId)));
    await store.close();
    const rendered = new Map(
      log.replay.filter((e) => e.seq !== null).map((e) => [e.seq, JSON.parse(e.json) as ServerEvent]),
    );
    for (const event of [...before, ...after]) {
      const expected = rendered.get(Number(event.server_event_seq));
      expect(event.type).toBe(expected?.type);
      expect(event.event_id).toBe(expected?.event_id);
    }
    expect(log.state.phase).toBe("closed");
  });
});
