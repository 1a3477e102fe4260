import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { stepsOf } from "../../src/engine/index.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import { PEAKS_PER_SECOND, peaksOf, reportOf, timelineOf } from "../../src/replay/index.ts";

/**
 * The data of a session's timeline (issue 21, parts 1-2: computed on the server, not in the browser), over every
 * recorded session of replays/: the responses, speech, VAD frames and marks the log decided, and waveform peaks that
 * are the audio's own.
 */
const dir = join(process.cwd(), "replays");
const files = readdirSync(dir).filter((f) => f.endsWith(".jsonl"));

describe("timelineOf", () => {
  it("peaks are the [min, max] of each bucket of a fiftieth of a second, as -1..1", () => {
    const samples = new Int16Array(16000 / PEAKS_PER_SECOND + 1);
    samples[3] = -16384;
    samples[7] = 32767;
    samples[16000 / PEAKS_PER_SECOND] = 8192;
    const peaks = peaksOf(new Uint8Array(samples.buffer), 16000);
    expect(peaks).toEqual([-0.5, 1, 0, 0.25]);
  });

  it.each(files)("%s: every response, utterance, VAD frame and mark of the log, once", async (file) => {
    const { entries } = await readSessionFile(join(dir, file));
    const timeline = timelineOf(entries);
    const report = reportOf(entries);
    const decisions = stepsOf(entries).flatMap((s) => s.decisions.map((d) => d.envelope.event));
    const ended = decisions.filter((e) => e.type === "ResponseEnded");
    expect(timeline.responses.map((r) => [r.id, r.status])).toEqual(
      ended.map((e) => (e.type === "ResponseEnded" ? [e.data.responseId, e.data.status] : [])),
    );
    for (const r of timeline.responses) {
      expect(r.created_ms).toBeLessThanOrEqual(r.ended_ms ?? Number.POSITIVE_INFINITY);
      // The peaks of the audio the response sent: a bucket a fiftieth of a second of its samples.
      const samples = decisions.reduce(
        (n, e) => n + (e.type === "AudioDelivered" && e.data.responseId === r.id ? e.data.audio.byteLength / 2 : 0),
        0,
      );
      expect(r.peaks.length).toBe(2 * Math.ceil(samples / (24000 / PEAKS_PER_SECOND)));
    }
    expect(timeline.speech.map((s) => s.item_id)).toEqual(
      decisions.flatMap((e) => (e.type === "SpeechStarted" ? [e.data.itemId] : [])),
    );
    const appends = entries.flatMap((e) => {
      const command = (e.data as { command?: { type?: string; audio?: Uint8Array; vad?: number[] } }).command;
      return e.type === "CommandReceived" && command?.type === "input_audio_buffer.append" ? [command] : [];
    });
    expect(timeline.vad.points.length).toBe(appends.reduce((n, c) => n + (c.vad?.length ?? 0), 0));
    const inputSamples = appends.reduce((n, c) => n + (c.audio?.byteLength ?? 0) / 2, 0);
    expect(timeline.input.peaks.length).toBe(2 * Math.ceil(inputSamples / (timeline.input.rate_hz / PEAKS_PER_SECOND)));
    const kinds = (kind: string) => timeline.marks.filter((m) => m.kind === kind).length;
    expect(kinds("commit")).toBe(decisions.filter((e) => e.type === "InputCommitted").length);
    expect(kinds("barge-in")).toBe(
      decisions.filter((e) => e.type === "OverlapDecided" && e.data.action === "barge_in").length,
    );
    expect(kinds("resume")).toBe(decisions.filter((e) => e.type === "SessionResumed").length);
    expect(kinds("restart")).toBe(entries.filter((e) => e.type === "SessionRecovered").length);
    expect(timeline.marks.map((m) => m.at_ms)).toEqual([...timeline.marks.map((m) => m.at_ms)].sort((a, b) => a - b));
    // Each response's acks, and what was heard: the playback ledger's committed ms after its last word.
    for (const r of timeline.responses) {
      const acks = decisions.filter((e) => e.type === "PlaybackAcknowledged" && e.data.responseId === r.id);
      expect(r.acks.map(([, played]) => played)).toEqual(
        acks.map((e) => (e.type === "PlaybackAcknowledged" ? e.data.playedMs : -1)),
      );
      // Heard is what history keeps of the response's item (BEHAVIOUR.md, "One story per session"): its last
      // settlement, or before any, the client's last acknowledged committed ms.
      const itemIds = decisions.flatMap((e) =>
        (e.type === "ResponseStarted" || e.type === "MessageStarted") && e.data.responseId === r.id
          ? [e.data.itemId]
          : [],
      );
      const settled = decisions.flatMap((e) =>
        e.type === "HistoryCommitted" && e.data.committedMs !== null && itemIds.includes(e.data.item.id)
          ? [e.data.item.audioMs]
          : [],
      );
      const acked = acks.map((e) => (e.type === "PlaybackAcknowledged" ? e.data.playback.committedMs : -1));
      expect(r.heard_ms).toBe(settled.at(-1) ?? acked.at(-1) ?? null);
      const heard = report.history.find((h) => itemIds.includes(h.id));
      if (heard !== undefined) expect(r.heard_ms ?? 0).toBe(heard.audioMs);
    }
    // The input clock's anchors rise on both clocks; the turns' times are the session's like the rest.
    for (const [i, [input, at]] of timeline.input.clock.entries()) {
      const [before, beforeAt] = timeline.input.clock[i - 1] ?? [0, 0];
      expect(input).toBeGreaterThanOrEqual(before);
      expect(at).toBeGreaterThanOrEqual(beforeAt);
    }
    expect(timeline.input.clock.at(-1)?.[0] ?? 0).toBe(timeline.input.duration_ms);
    const turnTimes = timeline.turns.flatMap((t) => [
      t.speechStoppedAt,
      t.committedAt,
      t.responseCreatedAt,
      t.firstAudioAt,
    ]);
    for (const at of turnTimes.filter((v) => v !== null)) {
      expect(at).toBeGreaterThanOrEqual(0);
      expect(at).toBeLessThanOrEqual(timeline.duration_ms);
    }
    expect(timeline.chain.verified).toBe(true);
  });

  it("the corpus's barge-in session shows its barge-in and its resume; the restart session its rebuild", async () => {
    const barge = timelineOf((await readSessionFile(join(dir, "barge-in-resume.jsonl"))).entries);
    expect(barge.marks.map((m) => m.kind)).toEqual(expect.arrayContaining(["barge-in", "resume", "detach"]));
    expect(barge.responses.some((r) => r.status === "cancelled")).toBe(true);
    const restart = timelineOf((await readSessionFile(join(dir, "restart-resume.jsonl"))).entries);
    expect(restart.marks.map((m) => m.kind)).toEqual(expect.arrayContaining(["restart", "resume"]));
  });
});
