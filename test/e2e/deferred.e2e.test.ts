import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient, type ServerEvent } from "../../src/client/index.ts";
import { foldLog, streamOf } from "../../src/engine/index.ts";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { sharedAudio, startScriptedServer } from "../support/server.ts";

/**
 * A commit while a response is active is deferred, not dropped (BEHAVIOUR.md, "Turn-taking"; issue 8, case 1), over
 * a real socket on real speech through Silero VAD. Issue 8's case at four times real time: a scripted answer of
 * 12 s (3 s here), and under `turn_detection: {server_vad, interrupt_response: false}` the user says
 * interrupt_16k.wav from 1.0 s (0.25 s here), then silence.
 */
const SPEED = 4;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("deferred responses", () => {
  let server: Awaited<ReturnType<typeof startScriptedServer>>;
  let interrupt: Int16Array;
  beforeAll(async () => {
    server = await startScriptedServer([
      "name: long-answer",
      `speed_factor: ${SPEED}`,
      "when_exhausted: repeat_last",
      "turns:",
      "  - on: respond",
      '    actions: [{ speak: { text: "A long story that takes twelve seconds to tell.", duration_ms: 12000 } }, end_turn]',
      "  - on: respond",
      '    actions: [{ speak: { text: "And now to what you said.", duration_ms: 1200 } }, end_turn]',
    ]);
    interrupt = (await readWavFile(sharedAudio("interrupt_16k.wav"))).samples;
  });
  afterAll(async () => {
    await server.stop();
  });

  const open = async (): Promise<RealtimeClient> => {
    const client = await RealtimeClient.connect(server.url);
    client.send({
      type: "session.update",
      session: { input_sample_rate_hz: 16000, turn_detection: { type: "server_vad", interrupt_response: false } },
    });
    await client.waitFor("session.updated", { since: 0 });
    return client;
  };

  /** Sends `samples` as 100 ms appends, paced at SPEED times real time. */
  const stream = async (client: RealtimeClient, samples: Int16Array): Promise<void> => {
    for (let offset = 0; offset < samples.length; offset += 1600) {
      client.appendSamples(samples.subarray(offset, offset + 1600), { sampleRateHz: 16000 });
      await sleep(100 / SPEED);
    }
  };

  const events = (client: RealtimeClient): ServerEvent[] => client.received.map((r) => r.event);
  const idOf = (e: ServerEvent): string => String((e.response as { id?: string } | undefined)?.id ?? e.response_id);

  it("answers an utterance committed during a long answer once that answer ends, without interrupting it", async () => {
    const client = await open();
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    const first = idOf(await client.waitFor("response.created", { since: 0 }));
    await stream(client, new Int16Array(16000));
    await stream(client, interrupt);
    await stream(client, new Int16Array(16000));
    const committed = await client.waitFor("input_audio_buffer.committed", { since: 0, timeoutMs: 10_000 });
    const done = await client.waitFor((e) => e.type === "response.done" && idOf(e) === first, { timeoutMs: 20_000 });
    const second = await client.waitFor((e) => e.type === "response.done" && idOf(e) !== first, {
      since: 0,
      timeoutMs: 20_000,
    });

    // The commit came while the first answer was speaking, and said that its response waits.
    const all = events(client);
    const at = (e: ServerEvent) => all.indexOf(e);
    expect(at(committed)).toBeLessThan(at(done));
    expect(committed.event).toMatchObject({ type: "input.committed", response_create_deferred: true });
    // The first answer was not interrupted, and no response started while it spoke.
    expect(done.response).toMatchObject({ status: "completed" });
    const created = all.filter((e) => e.type === "response.created");
    expect(created.map(idOf)).toEqual([first, idOf(second)]);
    expect(at(created[1] as ServerEvent)).toBeGreaterThan(at(done));
    // The deferred response answers the user item: its assistant item follows it in the conversation.
    const added = all.find(
      (e) => e.type === "conversation.item.added" && (e.item as { id?: string }).id === `item_${idOf(second)}`,
    );
    expect(added?.previous_item_id).toBe(committed.item_id);
    expect(second.response).toMatchObject({ status: "completed" });
    expect(
      all.some((e) => e.type === "response.output_audio.delta" && e.response_id === idOf(second)),
      "the deferred answer was spoken",
    ).toBe(true);
    // Nothing the user said is lost: the item is in history, and the session replays byte for byte.
    const session = all.find((e) => e.type === "session.created")?.session as { id: string } | undefined;
    await client.close();
    const entries = await server.store.read(streamOf(String(session?.id)));
    expect(foldLog(entries).state.history.map((h) => h.id)).toContain(committed.item_id);
    expect(replayEntries(entries).divergence).toBeNull();
  }, 30_000);

  it("holds at most max_pending_turns_per_session (4) deferred responses; a fifth commit gets input_backpressure", async () => {
    const client = await open();
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    await client.waitFor("response.created", { since: 0 });
    // Each commit is processed before the next is sent: the bound at work is the session's, not the mailbox's.
    for (let n = 1; n <= 5; n += 1) {
      const since = client.received.length;
      client.appendSamples(new Int16Array(1600), { sampleRateHz: 16000 });
      client.send({ type: "input_audio_buffer.commit", event_id: `evt_commit_${n}` });
      await client.waitFor((e) => e.type === "input_audio_buffer.committed" || e.type === "error", { since });
    }
    const refused = await client.waitFor("error", { since: 0 });
    expect(refused.error).toMatchObject({ code: "input_backpressure", event_id: "evt_commit_5" });
    const committed = events(client).filter((e) => e.type === "input_audio_buffer.committed");
    expect(committed.map((e) => (e.event as { response_create_deferred?: boolean }).response_create_deferred)).toEqual([
      true,
      true,
      true,
      true,
    ]);
    // The refused commit kept its 100 ms of audio: once the first deferred response has started, it is accepted.
    const since = client.received.length;
    await client.waitFor("response.created", { since, timeoutMs: 10_000 });
    client.send({ type: "input_audio_buffer.commit", event_id: "evt_commit_again" });
    const again = await client.waitFor("input_audio_buffer.committed", { since });
    expect(again.event).toMatchObject({ response_create_deferred: true, audio_ms: 100 });
    await client.close();
  }, 30_000);
});
