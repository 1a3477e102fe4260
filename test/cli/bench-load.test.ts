import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import {
  createTally,
  histogramDelta,
  histogramQuantile,
  parseHistogram,
  parseSample,
  percentile,
  searchCapacity,
} from "../../src/cli/load/index.ts";

const METRICS = `# HELP duplex_engine_added_seconds From a runner output reaching the engine to its server events being written.
# TYPE duplex_engine_added_seconds histogram
duplex_engine_added_seconds_bucket{le="0.001"} 10
duplex_engine_added_seconds_bucket{le="0.002"} 50
duplex_engine_added_seconds_bucket{le="0.005"} 90
duplex_engine_added_seconds_bucket{le="0.01"} 100
duplex_engine_added_seconds_bucket{le="+Inf"} 100
duplex_engine_added_seconds_sum 0.3
duplex_engine_added_seconds_count 100
duplex_log_append_seconds_bucket{le="0.001"} 7
`;

describe("load bench percentiles", () => {
  it("takes the nearest rank of the samples, the largest for p99 of ten", () => {
    const values = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
    expect(percentile(values, 50)).toBe(5);
    expect(percentile(values, 90)).toBe(9);
    expect(percentile(values, 99)).toBe(10);
    expect(percentile([], 50)).toBeNaN();
  });

  it("reads only the named histogram's cumulative buckets, in increasing bounds", () => {
    expect(parseHistogram(METRICS, "duplex_engine_added_seconds")).toEqual([
      { le: 0.001, count: 10 },
      { le: 0.002, count: 50 },
      { le: 0.005, count: 90 },
      { le: 0.01, count: 100 },
      { le: Number.POSITIVE_INFINITY, count: 100 },
    ]);
    expect(parseHistogram(METRICS, "duplex_missing_seconds")).toEqual([]);
  });

  it("sums a gauge's or a histogram sum's samples over their labels, and only the named metric", () => {
    const text = `${METRICS}nodejs_gc_duration_seconds_sum{kind="minor"} 0.25
nodejs_gc_duration_seconds_sum{kind="major"} 0.5
nodejs_gc_duration_seconds_sum_extra 9
nodejs_eventloop_lag_p99_seconds 0.0123
`;
    expect(parseSample(text, "nodejs_gc_duration_seconds_sum")).toBe(0.75);
    expect(parseSample(text, "nodejs_eventloop_lag_p99_seconds")).toBe(0.0123);
    expect(parseSample(text, "duplex_engine_added_seconds_sum")).toBe(0.3);
    expect(parseSample(text, "nodejs_missing")).toBeNull();
  });

  it("interpolates a quantile linearly inside its bucket, from 0 below the first", () => {
    const buckets = parseHistogram(METRICS, "duplex_engine_added_seconds");
    // rank 50 of 100 is the top of the (0.001, 0.002] bucket; rank 5 is half of the first bucket's 10.
    expect(histogramQuantile(buckets, 0.5)).toBeCloseTo(0.002, 9);
    expect(histogramQuantile(buckets, 0.05)).toBeCloseTo(0.0005, 9);
    // rank 70 is half way through the 40 observations of (0.002, 0.005].
    expect(histogramQuantile(buckets, 0.7)).toBeCloseTo(0.0035, 9);
    expect(histogramQuantile([], 0.5)).toBeNaN();
  });

  it("answers the highest finite bound for a quantile in the +Inf bucket", () => {
    const buckets = [
      { le: 0.01, count: 1 },
      { le: Number.POSITIVE_INFINITY, count: 4 },
    ];
    expect(histogramQuantile(buckets, 0.99)).toBe(0.01);
  });

  it("counts only the observations between two scrapes", () => {
    const before = [
      { le: 0.001, count: 3 },
      { le: Number.POSITIVE_INFINITY, count: 5 },
    ];
    const after = [
      { le: 0.001, count: 4 },
      { le: Number.POSITIVE_INFINITY, count: 9 },
    ];
    expect(histogramDelta(after, before)).toEqual([
      { le: 0.001, count: 1 },
      { le: Number.POSITIVE_INFINITY, count: 4 },
    ]);
  });
});

describe("load session tally", () => {
  it("matches responses to utterances in order and times first audio from each stop", () => {
    const tally = createTally();
    tally.speechStopped(1000);
    tally.speechStopped(1500);
    tally.responseCreated("resp_a", 1020);
    tally.audioDelta("resp_a", 1040);
    tally.audioDelta("resp_a", 1090);
    tally.responseDone("resp_a", "completed", undefined);
    expect(tally.settled()).toBe(false);
    tally.responseCreated("resp_b", 1650);
    tally.audioDelta("resp_b", 1700);
    tally.responseDone("resp_b", "completed", undefined);
    expect(tally.settled()).toBe(true);
    expect(tally.counts()).toMatchObject({ expected: 2, completed: 2, interrupted: 0, firstAudioMs: [40, 200] });
  });

  it("counts a barge-in after first audio as interrupted and one before any audio as silent, not received", () => {
    const tally = createTally();
    tally.speechStopped(0);
    tally.responseCreated("resp_a", 20);
    tally.audioDelta("resp_a", 50);
    tally.responseDone("resp_a", "cancelled", "turn_detected");
    tally.speechStopped(100);
    tally.responseCreated("resp_b", 120);
    tally.responseDone("resp_b", "cancelled", "turn_detected");
    tally.speechStopped(200);
    tally.responseCreated("resp_c", 220);
    tally.responseDone("resp_c", "failed", undefined);
    expect(tally.counts()).toMatchObject({
      expected: 3,
      completed: 0,
      interrupted: 1,
      interruptedSilent: 1,
      otherEnds: { failed: 1 },
      firstAudioMs: [50],
    });
  });

  it("keeps a response created with no utterance waiting apart, and unsettled until it ends", () => {
    const tally = createTally();
    tally.responseCreated("resp_x", 0);
    expect(tally.settled()).toBe(false);
    tally.speechStopped(1000);
    tally.responseDone("resp_x", "completed", undefined);
    // The utterance stopped after resp_x was created: it still waits for its own response.
    expect(tally.settled()).toBe(false);
    expect(tally.counts()).toMatchObject({ expected: 1, completed: 0, unprompted: 1, firstAudioMs: [] });
  });

  it("pairs a response created just before the client placed the stop with that stop, and the next ones in order", () => {
    const tally = createTally();
    // The server heard the stop one append before the client placed it (model-native lane).
    tally.responseCreated("resp_a", 900);
    tally.audioDelta("resp_a", 920);
    tally.speechStopped(1000);
    tally.responseDone("resp_a", "completed", undefined);
    tally.speechStopped(2000);
    tally.responseCreated("resp_b", 2010);
    tally.audioDelta("resp_b", 2030);
    tally.responseDone("resp_b", "completed", undefined);
    expect(tally.settled()).toBe(true);
    // Audio before the placed stop counts as 0 ms, and resp_b answers the second stop, not the first.
    expect(tally.counts()).toMatchObject({ expected: 2, completed: 2, unprompted: 0, firstAudioMs: [0, 30] });
  });
});

describe("load capacity search", () => {
  it("doubles until a count fails, then bisects to a tenth of the count that fit", async () => {
    const tried: number[] = [];
    const { capacity, probes } = await searchCapacity(async (n) => {
      tried.push(n);
      return n <= 37;
    }, 512);
    expect(tried.slice(0, 6)).toEqual([2, 4, 8, 16, 32, 64]);
    // 36 fits and 38 fails: 2 apart, within a tenth of 36, so 37 is not tried.
    expect(tried.slice(6)).toEqual([48, 40, 36, 38]);
    expect(capacity).toBe(36);
    expect(probes.map((p) => p.fits)).toEqual(tried.map((n) => n <= 37));
  });

  it("stops at the maximum when every count fits, probing the maximum itself", async () => {
    const tried: number[] = [];
    const { capacity } = await searchCapacity(async (n) => {
      tried.push(n);
      return true;
    }, 20);
    expect(tried).toEqual([2, 4, 8, 16, 20]);
    expect(capacity).toBe(20);
  });

  it("answers 1 when two sessions already fail", async () => {
    expect((await searchCapacity(async () => false, 512)).capacity).toBe(1);
  });
});

/** Runs `duplex bench load ARGS` as a user would; stdout and stderr as text. */
const duplex = (args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, ["bin/duplex.js", "bench", "load", ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once("exit", (code) => resolve({ code, stdout, stderr }));
  });

describe("duplex bench load (CI smoke: 3 sessions, 8 s; the figures are in docs/benchmarks.md)", () => {
  it("streams speech from a load process into a server process, delivers every expected response and measures a relay beside it", async () => {
    const { code, stdout, stderr } = await duplex(["--sessions", "3", "--seconds", "8", "--ramp", "1"]);
    expect(code, stderr).toBe(0);
    const lines = stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(1);
    const line = lines[0] ?? {};
    expect(line).toMatchObject({
      bench: "load",
      lane: "turn",
      first_audio_from: "speech_stopped received",
      sessions: 3,
      sessions_opened: 3,
      sessions_completed: 3,
      responses_lost: 0,
      responses_unprompted: 0,
      all_delivered: true,
      errors: {},
      relay_deltas_per_append: 1,
    });
    // Each session streams whole repeats of jfk (8 s asked: one repeat of 12.5 s, its utterances); each is answered
    // (or cut by the next after audio).
    const expected = Number(line.responses_expected);
    expect(expected).toBeGreaterThanOrEqual(6);
    expect(Number(line.responses_received) + Number(line.responses_interrupted)).toBe(expected);
    expect(line.first_audio_after_stop_samples).toBe(expected);
    expect(Number(line.engine_added_samples)).toBeGreaterThan(0);
    expect(Number(line.server_cpu_cores)).toBeGreaterThan(0);
    expect(Number(line.server_rss_mib_peak)).toBeGreaterThan(0);
    expect(Number(line.relay_cpu_cores)).toBeGreaterThanOrEqual(0);
    // The load client's own figures, so that a saturated load client shows.
    expect(Number(line.client_cpu_cores)).toBeGreaterThan(0);
    expect(Number(line.client_send_late_ms_p99)).toBeGreaterThanOrEqual(0);
    expect(typeof line.client_saturated).toBe("boolean");
    expect(stderr).toContain("| turn | 3 | 3 / 3 |");
  }, 60_000);

  it("refuses a session count that is not a whole number, as a usage error", async () => {
    const { code, stderr, stdout } = await duplex(["--sessions", "1.5"]);
    expect(code).toBe(2);
    expect(stderr).toContain("expected a positive whole number");
    expect(stdout).toBe("");
  });
});
