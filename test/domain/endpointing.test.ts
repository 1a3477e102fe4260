import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type EndpointerEvent,
  type EndpointerParams,
  type EndpointerState,
  initialEndpointer,
  lowerThreshold,
  resetEndpointer,
  stepEndpointer,
} from "../../src/domain/index.ts";

/** The golden of BEHAVIOUR.md, "Turn-taking": 32 ms frames, silence 100 ms, min speech 96 ms, no padding. */
const GOLDEN: EndpointerParams = {
  threshold: 0.5,
  prefixPaddingMs: 0,
  silenceDurationMs: 100,
  minSpeechDurationMs: 96,
};
const FRAME_MS = 32;
const GOLDEN_FRAMES = [0, 0.9, 0.9, 0.9, 0, 0, 0, 0, 0, 0];

const run = (
  probabilities: readonly number[],
  params: EndpointerParams = GOLDEN,
  state = initialEndpointer,
  startMs = 0,
) => stepEndpointer(state, params, probabilities, startMs, FRAME_MS);

describe("server-VAD endpointing", () => {
  it("starts speech at 32 ms and stops it at 256 ms on the golden frames", () => {
    const { events, state } = run(GOLDEN_FRAMES);
    expect(events).toEqual([
      { type: "speech_started", speechStartMs: 32, audioStartMs: 32 },
      { type: "speech_stopped", audioEndMs: 256 },
    ]);
    expect(state.phase).toBe("silence");
  });

  it("does not restart the silence timer for a single 0.45 frame inside the silence", () => {
    const frames = [0, 0.9, 0.9, 0.9, 0, 0.45, 0, 0, 0, 0];
    expect(run(frames).events).toEqual([
      { type: "speech_started", speechStartMs: 32, audioStartMs: 32 },
      { type: "speech_stopped", audioEndMs: 256 },
    ]);
  });

  it("stops only on a frame below the lower threshold, even when the silence is long enough", () => {
    // The frame ending at 256 ms is 0.45 (above 0.35): the stop moves to the next quiet frame.
    const frames = [0, 0.9, 0.9, 0.9, 0, 0, 0, 0.45, 0, 0];
    expect(run(frames).events).toEqual([
      { type: "speech_started", speechStartMs: 32, audioStartMs: 32 },
      { type: "speech_stopped", audioEndMs: 288 },
    ]);
  });

  it("cancels the silence candidate on a frame at or above the threshold", () => {
    const frames = [0, 0.9, 0.9, 0.9, 0, 0, 0.5, 0, 0, 0, 0];
    expect(run(frames).events).toEqual([
      { type: "speech_started", speechStartMs: 32, audioStartMs: 32 },
      { type: "speech_stopped", audioEndMs: 352 },
    ]);
  });

  it("does not treat a one-frame blip shorter than min_speech as speech", () => {
    const { events, state } = run([0, 0.9, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(events).toEqual([]);
    expect(state.phase).toBe("silence");
    expect(run([0, 0.9, 0.9, 0, 0, 0]).events).toEqual([]);
  });

  it("needs the speech frames to be consecutive", () => {
    expect(run([0.9, 0.9, 0.2, 0.9, 0.9, 0.2]).events).toEqual([]);
  });

  it("puts audio_start_ms at the start minus the prefix padding", () => {
    const params = { ...GOLDEN, prefixPaddingMs: 300 };
    const { events } = run([0, 0, 0.9, 0.9, 0.9], params, initialEndpointer, 1000);
    expect(events).toEqual([{ type: "speech_started", speechStartMs: 1064, audioStartMs: 764 }]);
  });

  it("puts audio_start_ms no earlier than the last reset", () => {
    const params = { ...GOLDEN, prefixPaddingMs: 300 };
    const { events } = run([0, 0, 0.9, 0.9, 0.9], params, resetEndpointer(1000), 1000);
    expect(events).toEqual([{ type: "speech_started", speechStartMs: 1064, audioStartMs: 1000 }]);
    expect(run(GOLDEN_FRAMES, params).events[0]).toEqual({
      type: "speech_started",
      speechStartMs: 32,
      audioStartMs: 0,
    });
  });

  it("keeps the session clock on reset", () => {
    expect(resetEndpointer(1234)).toEqual({ phase: "silence", runStartMs: null, silenceStartMs: null, floorMs: 1234 });
  });

  it("begins silence below max(threshold - 0.15, 0.01)", () => {
    expect(lowerThreshold(0.5)).toBeCloseTo(0.35, 10);
    expect(lowerThreshold(0.1)).toBe(0.01);
    // threshold 0.1: frames of 0.05 are below the threshold but above the lower one; they never stop speech.
    const params = { ...GOLDEN, threshold: 0.1 };
    const quietButNotSilent = run([0.5, 0.5, 0.5, ...Array.from({ length: 10 }, () => 0.05)], params);
    expect(quietButNotSilent.events.map((e) => e.type)).toEqual(["speech_started"]);
    expect(quietButNotSilent.state.phase).toBe("speech");
  });

  describe("properties", () => {
    const probability = fc.oneof(
      fc.constantFrom(0, 0.2, 0.35, 0.4, 0.45, 0.5, 0.6, 0.9, 1),
      fc.double({ min: 0, max: 1, noNaN: true }),
    );
    const params: fc.Arbitrary<EndpointerParams> = fc.record({
      threshold: fc.constantFrom(0.3, 0.5, 0.7),
      prefixPaddingMs: fc.constantFrom(0, 100, 300),
      silenceDurationMs: fc.constantFrom(32, 64, 100, 200, 500),
      minSpeechDurationMs: fc.constantFrom(32, 64, 96, 250),
    });

    /** Feeds `frames` in chunks cut at `cuts` (frame indices), as consecutive appends would. */
    const chunked = (
      start: EndpointerState,
      p: EndpointerParams,
      frames: readonly number[],
      cuts: readonly number[],
      baseMs: number,
    ): { state: EndpointerState; events: EndpointerEvent[] } => {
      const bounds = [...new Set([0, ...cuts.map((c) => c % (frames.length + 1)), frames.length])].sort(
        (a, b) => a - b,
      );
      let state = start;
      const events: EndpointerEvent[] = [];
      for (let i = 1; i < bounds.length; i += 1) {
        const from = bounds[i - 1] as number;
        const to = bounds[i] as number;
        const step = stepEndpointer(state, p, frames.slice(from, to), baseMs + from * FRAME_MS, FRAME_MS);
        state = step.state;
        events.push(...step.events);
      }
      return { state, events };
    };

    it("endpointing does not depend on how frames are chunked", () => {
      fc.assert(
        fc.property(
          params,
          fc.array(probability, { maxLength: 200 }),
          fc.array(fc.nat(), { maxLength: 20 }),
          fc.nat({ max: 100 }),
          (p, frames, cuts, baseFrames) => {
            const baseMs = baseFrames * FRAME_MS;
            const start = resetEndpointer(baseMs);
            const whole = stepEndpointer(start, p, frames, baseMs, FRAME_MS);
            const pieces = chunked(start, p, frames, cuts, baseMs);
            expect(pieces.events).toEqual(whole.events);
            expect(pieces.state).toEqual(whole.state);
          },
        ),
      );
    });

    it("speech_started and speech_stopped alternate, starting with started, in time order", () => {
      fc.assert(
        fc.property(
          params,
          fc.array(probability, { maxLength: 300 }),
          fc.nat({ max: 100 }),
          (p, frames, baseFrames) => {
            const baseMs = baseFrames * FRAME_MS;
            const { events, state } = stepEndpointer(resetEndpointer(baseMs), p, frames, baseMs, FRAME_MS);
            events.forEach((e, i) => {
              expect(e.type).toBe(i % 2 === 0 ? "speech_started" : "speech_stopped");
            });
            expect(state.phase).toBe(events.length % 2 === 1 ? "speech" : "silence");
            let last = baseMs;
            for (const e of events) {
              if (e.type === "speech_started") {
                expect(e.audioStartMs).toBeGreaterThanOrEqual(baseMs);
                expect(e.audioStartMs).toBeLessThanOrEqual(e.speechStartMs);
                expect(e.speechStartMs).toBeGreaterThanOrEqual(last);
                last = e.speechStartMs;
              } else {
                expect(e.audioEndMs).toBeGreaterThan(last);
                expect(e.audioEndMs).toBeLessThanOrEqual(baseMs + frames.length * FRAME_MS);
                last = e.audioEndMs;
              }
            }
          },
        ),
      );
    });
  });
});
