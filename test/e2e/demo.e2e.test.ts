import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoSummary, runDemo } from "../../src/cli/demo.ts";
import { streamOf } from "../../src/engine/index.ts";
import { readWavFile, rms } from "../../src/infra/audio/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/** BEHAVIOUR.md scenario 6: the events of one spoken response, in order (deltas come in pairs). */
const OPENING = [
  "response.created",
  "conversation.item.added",
  "conversation.item.created",
  "response.output_item.added",
  "response.speak",
  "response.content_part.added",
];
const CLOSING = [
  "response.output_audio.done",
  "response.output_audio_transcript.done",
  "response.content_part.done",
  "response.output_item.done",
  "conversation.item.done",
  "response.done",
];

describe("demo flow on real speech", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let summary: DemoSummary;

  beforeAll(async () => {
    server = await startTestServer();
    const out = await mkdtemp(join(tmpdir(), "duplex-demo-"));
    summary = await runDemo({ url: server.url, input: sharedAudio("jfk_16k.wav"), out, fast: true });
  });
  afterAll(async () => server.stop());

  it("hears the end of speech on jfk_16k.wav and answers with at least a second of audio that is not silent", async () => {
    expect(summary.responses).toBeGreaterThanOrEqual(1);
    expect(summary.audio_ms[0]).toBeGreaterThanOrEqual(1000);
    const wav = await readWavFile(summary.files[0] as string);
    expect(wav.sampleRate).toBe(24000);
    expect(wav.samples.length / 24000).toBeGreaterThanOrEqual(1);
    expect(rms(wav.samples)).toBeGreaterThan(0.01);
    // The demo's session is in the model-native lane (no turn detection): the server sends no speech events, and
    // the demo finds the speech in its input itself (jfk_16k.wav: one utterance with pauses, 11 s).
    expect(summary.events["input_audio_buffer.speech_started"]).toBeUndefined();
    expect(summary.events["input_audio_buffer.speech_stopped"]).toBeUndefined();
    expect(summary.speech.length).toBeGreaterThanOrEqual(1);
    expect(summary.speech[0]?.startMs).toBeLessThan(1000);
    expect(summary.speech.at(-1)?.endMs).toBeGreaterThan(9000);
    expect(summary.first_audio_after_speech_end_ms).not.toBeNull();
    expect(summary.events["session.closed"]).toBe(1);
  });

  it("sends the events of a response in the order of scenario 6, one transcript delta per audio delta", () => {
    const first = summary.trace.find((e) => e.type === "response.created");
    const responseId = String(first?.response_id);
    const itemId = `item_${responseId}`;
    const mine = summary.trace.filter(
      (e) => e.response_id === responseId || (e.item as { id?: string } | undefined)?.id === itemId,
    );
    const types = mine.map((e) => e.type);
    expect(types.slice(0, OPENING.length)).toEqual(OPENING);
    expect(types.slice(-CLOSING.length)).toEqual(CLOSING);
    const middle = types.slice(OPENING.length, -CLOSING.length);
    expect(middle.length).toBeGreaterThanOrEqual(2);
    middle.forEach((type, i) => {
      expect(type).toBe(i % 2 === 0 ? "response.output_audio.delta" : "response.output_audio_transcript.delta");
    });
    const doneIndex = summary.trace.findIndex((e) => e.type === "response.done" && e.response_id === responseId);
    expect(summary.trace[doneIndex + 1]?.type).toBe("rate_limits.updated");
    expect(mine.find((e) => e.type === "response.done")?.response).toMatchObject({ status: "completed" });
  });

  it("stamps every event after session.created with consecutive server_event_seq and an event_id", () => {
    expect(summary.trace[0]?.type).toBe("session.created");
    expect(summary.trace[0]).not.toHaveProperty("server_event_seq");
    const seqs = summary.trace.slice(1).map((e) => e.server_event_seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    for (const event of summary.trace) expect(typeof event.event_id).toBe("string");
  });

  it("replays the recorded session offline, byte for byte", async () => {
    const entries = await server.store.read(streamOf(summary.session_id));
    const result = replayEntries(entries);
    expect(result.divergence).toBeNull();
    expect(result.ok).toBe(true);
    expect(result.wireEvents).toBe(summary.trace.length);
    expect(result.state.phase).toBe("closed");
  });

  it("reports the first divergence when the recording was altered", async () => {
    const entries = await server.store.read(streamOf(summary.session_id));
    const index = entries.findIndex((e) => e.type === "SpeechStopped");
    const altered = entries.map((e, i) =>
      i === index
        ? { ...e, data: { ...(e.data as object), audioEndMs: (e.data as { audioEndMs: number }).audioEndMs + 32 } }
        : e,
    );
    // The log's hash chain catches the change at the altered entry itself.
    const result = replayEntries(altered);
    expect(result.ok).toBe(false);
    expect(result.divergence).toMatchObject({
      kind: "chain",
      revision: entries[index]?.revision,
      inputType: "SpeechStopped",
    });
    // Without the chain (a log written before it: schema 1, no digests), the decider's replay finds it: the recorded
    // decision differs. (A log of schema 2 without its digests is refused as tampered: test/e2e/frozen-logs.test.ts.)
    const unchained = altered.map((e) => {
      const { chain: _chain, schema: _schema, ...metadata } = e.metadata;
      return { ...e, metadata: metadata as typeof e.metadata };
    });
    const replayed = replayEntries(unchained);
    expect(replayed.ok).toBe(false);
    expect(replayed.divergence).toMatchObject({ kind: "domain", inputType: "CommandReceived" });
    expect(replayed.divergence?.expected).toContain('"SpeechStopped"');
  });
});
