import { afterEach, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { resamplePcm16, rms } from "../../src/infra/audio/index.ts";
import { synthesizeSpeech } from "../../src/infra/runners/scripted.ts";
import { decodeAudio } from "../../src/protocol/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { startScriptedServer } from "../support/server.ts";

/**
 * Output formats through the real server (BEHAVIOUR.md, "Audio formats"): a session asks for G.711 at 8 kHz (as a
 * Twilio bridge does), PCM16 at another rate or float32, and the model's 24 kHz PCM16 reaches it resampled and
 * encoded; the playback ledger, acks and truncation count ms of audio whatever the format; the log replays.
 */
const ANSWER = "Sure, here is my answer.";

describe("output audio formats", () => {
  const servers: Awaited<ReturnType<typeof startScriptedServer>>[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await server.stop();
  });

  const answer = async (format: unknown) => {
    const server = await startScriptedServer([
      "name: answer",
      "when_exhausted: repeat_last",
      "turns:",
      "  - on: respond",
      "    actions:",
      `      - speak: { text: "${ANSWER}", duration_ms: 1500 }`,
      "      - end_turn",
    ]);
    servers.push(server);
    const client = await RealtimeClient.connect(server.url);
    client.send({ type: "session.update", session: { output_audio_format: format } });
    const updated = await client.waitFor("session.updated", { since: 0 });
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    const done = await client.waitFor("response.done", { since: 0, timeoutMs: 10_000 });
    const deltas = client.received
      .filter((r) => r.event.type === "response.output_audio.delta")
      .map((r) => Buffer.from(String(r.event.delta), "base64"));
    return { server, client, updated, done, bytes: Buffer.concat(deltas), deltas };
  };

  it.each([
    ["g711_ulaw", { encoding: "g711_ulaw", rate: 8000 }, { type: "audio/pcmu" }],
    ["g711_alaw", { encoding: "g711_alaw", rate: 8000 }, { type: "audio/pcma" }],
    [
      { type: "audio/pcm", rate: 16000 },
      { encoding: "pcm16", rate: 16000 },
      { type: "audio/pcm", rate: 16000 },
    ],
    [{ type: "audio/pcm_f32le", rate: 48000 }, { encoding: "pcm_f32le", rate: 48000 }, null],
  ] as const)("%j: the model's speech arrives resampled and encoded, 1500 ms of it", async (format, wire, ga) => {
    const { server, client, updated, done, bytes } = await answer(format);
    if (ga !== null) expect(updated.session).toMatchObject({ audio: { output: { format: ga } } });
    const samples = decodeAudio(wire, bytes);
    if (!(samples instanceof Int16Array)) throw new Error(samples.message);
    // Within the resampler's held-back tail (about 1 ms) of the 1500 ms the model made.
    const ms = (samples.length / wire.rate) * 1000;
    expect(ms).toBeGreaterThan(1495);
    expect(ms).toBeLessThanOrEqual(1500);
    // The same speech: as loud as the model's audio resampled whole (G.711 and a filter change it by a few %).
    const reference = resamplePcm16(synthesizeSpeech(ANSWER, 24000, 1500 / ANSWER.length), 24000, wire.rate);
    expect(rms(samples)).toBeGreaterThan(rms(reference) * 0.9);
    expect(rms(samples)).toBeLessThan(rms(reference) * 1.1);
    // The ledger counts ms of the audio the client got.
    const playback = (done.response as { metadata: { duplex_event: { playback: { generated_ms: number } } } }).metadata
      .duplex_event.playback;
    expect(playback.generated_ms).toBe(Math.floor(ms));
    const id = String(((client.received[0]?.event.session ?? {}) as { id?: string }).id);
    await client.close();
    expect(replayEntries(await server.store.read(streamOf(id))).ok).toBe(true);
  });

  it("g711_ulaw: a playback ack and a truncation count ms, and history keeps what was heard", async () => {
    const { client, done } = await answer("g711_ulaw");
    const responseId = String((done.response as { id: string }).id);
    const acked = await (async () => {
      const since = client.received.length;
      client.send({ type: "playback.ack", response_id: responseId, played_ms: 600, truncate: true });
      return client.waitFor("playback.acknowledged", { since });
    })();
    expect(acked.event).toMatchObject({ played_ms: 600, committed_ms: 600, truncate: true });
    const since = client.received.length;
    client.send({ type: "conversation.item.retrieve", item_id: `item_${responseId}` });
    const item = (await client.waitFor("conversation.item.retrieved", { since })).item as {
      content: { transcript: string }[];
    };
    // 600 of 1500 ms heard: the first 40% of the transcript, right-trimmed (BEHAVIOUR.md, "Playback truth").
    expect(item.content[0]?.transcript).toBe(ANSWER.slice(0, Math.round(ANSWER.length * 0.4)).trimEnd());
  });

  it("a session that switches its output format mid-session gets the next response in the new one", async () => {
    const { client, bytes } = await answer("g711_ulaw");
    expect(bytes.length).toBeGreaterThan(11_900);
    client.send({ type: "session.update", session: { output_audio_format: "pcm16" } });
    const since = client.received.length;
    await client.waitFor("session.updated", { since });
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    await client.waitFor("response.done", { since, timeoutMs: 10_000 });
    const pcm = client.received
      .slice(since)
      .filter((r) => r.event.type === "response.output_audio.delta")
      .reduce((n, r) => n + Buffer.from(String(r.event.delta), "base64").length, 0);
    expect(pcm).toBe(1.5 * 24000 * 2);
  });
});
