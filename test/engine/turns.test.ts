import { afterEach, describe, expect, it } from "vitest";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { type EngineSession, openEngineSession } from "../support/engine-session.ts";
import { sharedAudio } from "../support/server.ts";

/**
 * BEHAVIOUR.md scenarios 5 and 18 on real speech through Silero VAD, in process (the session harness: the events the
 * client would be sent, in order; no socket).
 */
const stream = async (client: EngineSession, file: string, tailMs = 1500): Promise<void> => {
  const wav = await readWavFile(sharedAudio(file));
  client.appendSamples(wav.samples, { sampleRateHz: 16000, tailMs });
  void client.send({ type: "session.heartbeat" });
  await client.waitFor("session.heartbeat_ack", { since: 0, ms: 30_000 });
};

describe("turns on real speech", () => {
  let session: EngineSession | null = null;
  afterEach(async () => {
    await session?.close();
    session = null;
  });

  const open = async (turnDetection: Record<string, unknown>): Promise<EngineSession> => {
    const client = await openEngineSession({ vad: "silero" });
    session = client;
    void client.send({
      type: "session.update",
      session: { input_audio_format: "pcm16", input_sample_rate_hz: 16000, turn_detection: turnDetection },
    });
    await client.waitFor("session.updated", { since: 0 });
    return client;
  };

  it("scenario 18: server VAD on jfk_16k.wav: speech_started within the first second, speech_stopped after the last word, once per utterance", async () => {
    const client = await open({ type: "server_vad", create_response: false });
    await stream(client, "jfk_16k.wav");
    const vad = client.sent.filter(
      (e) => e.type === "input_audio_buffer.speech_started" || e.type === "input_audio_buffer.speech_stopped",
    );
    expect(vad.length).toBeGreaterThanOrEqual(2);
    vad.forEach((e, i) => {
      expect(e.type).toBe(i % 2 === 0 ? "input_audio_buffer.speech_started" : "input_audio_buffer.speech_stopped");
    });
    expect(Number(vad[0]?.audio_start_ms)).toBeLessThan(1000);
    // The last word ends at about 10.6 s of the 11.0 s file; the stop includes 500 ms of silence after it.
    const lastStop = Number(vad.at(-1)?.audio_end_ms);
    expect(lastStop).toBeGreaterThan(10_500);
    expect(lastStop).toBeLessThanOrEqual(11_000 + 1500);
    const items = vad.filter((e) => e.type === "input_audio_buffer.speech_started").map((e) => e.item_id);
    expect(new Set(items).size).toBe(items.length);
    // Each utterance was committed as its own item (create_response false: no response).
    const committed = client.sent.filter((e) => e.type === "input_audio_buffer.committed");
    expect(committed.map((e) => e.item_id)).toEqual(items);
    expect(client.types()).not.toContain("response.created");
  });

  it("scenario 5: in turn mode a stop commits: speech_stopped, item added/created, committed, item done, then the response", async () => {
    const client = await open({ type: "server_vad" });
    await stream(client, "question_16k.wav");
    await client.waitFor("response.done", { since: 0, ms: 20_000 });
    const types = client.types();
    const stop = types.indexOf("input_audio_buffer.speech_stopped");
    expect(types.slice(stop, stop + 6)).toEqual([
      "input_audio_buffer.speech_stopped",
      "conversation.item.added",
      "conversation.item.created",
      "input_audio_buffer.committed",
      "conversation.item.done",
      "response.created",
    ]);
    const committed = await client.waitFor("input_audio_buffer.committed", { since: 0 });
    const created = await client.waitFor("response.created", { since: 0 });
    const added = client.sent.filter((e) => e.type === "conversation.item.added");
    expect(added[1]?.previous_item_id).toBe(committed.item_id);
    expect(created.response).toMatchObject({ status: "in_progress" });
  });
});
