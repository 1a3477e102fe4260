import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { type Turn, turnLedger } from "../../src/projections/index.ts";
import { reportOf } from "../../src/replay/index.ts";
import { sharedAudio, startScriptedServer } from "../support/server.ts";

/**
 * The turn ledger (issue 20, part 3) over a real session: a spoken question answered at length, acknowledged,
 * then cut by a second question (a barge-in), which is answered. The ledger the live session's events give is the
 * one its log gives, value for value.
 */
describe("the turn ledger", () => {
  let server: Awaited<ReturnType<typeof startScriptedServer>>;
  beforeAll(async () => {
    server = await startScriptedServer([
      "name: long-then-short",
      "speed_factor: 1",
      "turns:",
      "  - on: speech_stopped",
      '    actions: [{ speak: { text: "A long answer.", duration_ms: 20000 } }, end_turn]',
      "  - on: speech_stopped",
      '    actions: [{ speak: { text: "Short.", duration_ms: 600 } }, end_turn]',
    ]);
  });
  afterAll(async () => server.stop());

  it("times each turn (speech stop, created, first audio, first ack, the barge-in that cut it) as the log does", async () => {
    const question = await readWavFile(sharedAudio("question_16k.wav"));
    const client = await RealtimeClient.connect(server.url);
    const created = await client.waitFor("session.created", { since: 0 });
    const sessionId = String((created.session as { id: string }).id);
    const host = server.engine.get(sessionId);
    const live: (readonly Turn[])[] = [];
    host?.events$.pipe(turnLedger()).subscribe((turns) => live.push(turns));
    client.send({
      type: "session.update",
      session: { input_audio_format: "pcm16", input_sample_rate_hz: 16000, overlap_policy: "barge_in_on_speech" },
    });
    await client.waitFor("session.updated", { since: 0 });

    client.appendSamples(question.samples, { sampleRateHz: 16000, tailMs: 1000 });
    const first = await client.waitFor("response.output_audio.delta", { since: 0, timeoutMs: 20_000 });
    const firstResponse = String(first.response_id);
    client.send({ type: "playback.ack", response_id: firstResponse, played_ms: 200 });
    // Some more of the answer is made (in real time) before the user talks over it.
    await client.waitFor(
      () => client.received.filter((r) => r.event.type === "response.output_audio.delta").length >= 3,
      { since: 0, timeoutMs: 20_000 },
    );
    // The second question talks over the long answer: a barge-in cuts it, and the question is answered.
    const before = client.received.length;
    client.appendSamples(question.samples, { sampleRateHz: 16000, tailMs: 1000 });
    await client.waitFor((e) => e.type === "response.done" && (e.response as { id: string }).id !== firstResponse, {
      since: before,
      timeoutMs: 30_000,
    });
    await client.close(1000);

    const log = await server.store.read(streamOf(sessionId));
    const report = reportOf(log);
    expect(report.turns).toEqual(live.at(-1));
    const [one, two] = report.turns;
    expect(report.turns).toHaveLength(2);
    // Turn 1: every step in order, acknowledged, then cut by the user.
    expect(one).toMatchObject({ index: 1, responseId: firstResponse, status: "cancelled" });
    expect(["barge_in", "turn_detected"]).toContain(one?.endReason);
    const order = (t: Turn | undefined, keys: (keyof Turn)[]) => keys.map((k) => t?.[k] as number);
    const steps1 = order(one, [
      "speechStartedAt",
      "speechStoppedAt",
      "responseCreatedAt",
      "firstAudioAt",
      "firstAckAt",
    ]);
    expect(steps1.every((v) => typeof v === "number")).toBe(true);
    expect([...steps1].sort((a, b) => a - b)).toEqual(steps1);
    expect(one?.bargeInAt).toBeGreaterThan(one?.firstAckAt ?? Number.POSITIVE_INFINITY);
    expect(one?.responseEndedAt).toBeGreaterThanOrEqual(one?.bargeInAt ?? Number.POSITIVE_INFINITY);
    // Generated far less than the 20 s it would have been; heard at least what was acknowledged, less than made.
    expect(one?.generatedMs).toBeGreaterThan(0);
    expect(one?.generatedMs).toBeLessThan(20_000);
    expect(one?.heardMs).toBeGreaterThanOrEqual(200);
    expect(one?.heardMs).toBeLessThan(one?.generatedMs ?? 0);
    // Turn 2: answered in full, no barge-in.
    expect(two).toMatchObject({ index: 2, status: "completed", endReason: null, bargeInAt: null });
    expect(two?.speechStoppedAt).toBeGreaterThan(one?.speechStoppedAt ?? 0);
    // The spans: two samples where both turns have both ends, one where only turn 1 has.
    const span = (name: string) => report.spans.find((s) => s.span === name);
    expect(span("speech_stop_to_first_audio")?.samples).toBe(2);
    expect(span("barge_in_to_response_ended")?.samples).toBe(1);
    expect(span("first_audio_to_first_ack")).toMatchObject({
      samples: 1,
      worst: (one?.firstAckAt ?? 0) - (one?.firstAudioAt ?? 0),
    });
    // The same spans, observed live, on /metrics.
    const metrics = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
    const count = (name: string) =>
      Number(new RegExp(`^duplex_turn_span_seconds_count\\{span="${name}"\\} (\\d+)$`, "m").exec(metrics)?.[1]);
    expect(count("speech_stop_to_first_audio")).toBe(2);
    expect(count("barge_in_to_response_ended")).toBe(1);
    expect(count("first_audio_to_first_ack")).toBe(1);
  });
});
