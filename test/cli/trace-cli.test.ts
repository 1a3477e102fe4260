import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stepsOf } from "../../src/engine/index.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import { type ChromeTrace, sessionMsOfInput, type TraceEvent, timelineOf, traceOf } from "../../src/replay/index.ts";

/**
 * `duplex trace` (issue 21, part 3): a session's log as a Chrome trace. Every recorded session of replays/ is
 * checked against the Trace Event Format's rules as Perfetto's importer applies them (phases, µs times, complete
 * events that nest or are apart on a track, counters with numbers, named tracks), and against its log: one slice
 * per response, one barge-in, cancel and error instant per such decision.
 */
const run = promisify(execFile);
const replays = join(process.cwd(), "replays");

/** The format's rules; returns every violation found. */
const violations = (trace: ChromeTrace): string[] => {
  const out: string[] = [];
  if (!Array.isArray(trace.traceEvents)) return ["traceEvents is not an array"];
  if (!["ms", "ns"].includes(trace.displayTimeUnit)) out.push(`displayTimeUnit ${trace.displayTimeUnit}`);
  const named = new Set<number>();
  for (const [i, e] of trace.traceEvents.entries()) {
    const at = `event ${i} (${e.name})`;
    if (typeof e.name !== "string" || e.name === "") out.push(`${at}: no name`);
    if (!["X", "i", "C", "M"].includes(e.ph)) out.push(`${at}: phase ${e.ph}`);
    if (!Number.isInteger(e.pid)) out.push(`${at}: pid`);
    if (e.ph === "M") {
      if (!["process_name", "thread_name"].includes(e.name)) out.push(`${at}: metadata name`);
      if (typeof e.args?.name !== "string") out.push(`${at}: metadata without args.name`);
      if (e.name === "thread_name" && e.tid !== undefined) named.add(e.tid);
      continue;
    }
    if (typeof e.ts !== "number" || !Number.isFinite(e.ts) || e.ts < 0) out.push(`${at}: ts ${e.ts}`);
    if (e.ph === "X" && (typeof e.dur !== "number" || !Number.isFinite(e.dur) || e.dur < 0))
      out.push(`${at}: dur ${e.dur}`);
    if (e.ph === "i" && !["t", "p", "g"].includes(e.s ?? "")) out.push(`${at}: instant scope ${e.s}`);
    if (e.ph === "C" && Object.values(e.args ?? {}).some((v) => typeof v !== "number" || !Number.isFinite(v)))
      out.push(`${at}: counter with a value that is not a number`);
    if ((e.ph === "X" || e.ph === "i") && !Number.isInteger(e.tid)) out.push(`${at}: tid`);
  }
  // Complete events on one track either nest or are apart.
  const byTrack = new Map<number, TraceEvent[]>();
  for (const e of trace.traceEvents) if (e.ph === "X") byTrack.set(e.tid ?? 0, [...(byTrack.get(e.tid ?? 0) ?? []), e]);
  for (const [track, slices] of byTrack) {
    if (!named.has(track)) out.push(`track ${track} has no thread_name`);
    const sorted = [...slices].sort((a, b) => (a.ts ?? 0) - (b.ts ?? 0) || (b.dur ?? 0) - (a.dur ?? 0));
    const open: TraceEvent[] = [];
    for (const s of sorted) {
      while (open.length > 0 && (open.at(-1)?.ts ?? 0) + (open.at(-1)?.dur ?? 0) <= (s.ts ?? 0)) open.pop();
      const parent = open.at(-1);
      if (parent !== undefined && (s.ts ?? 0) + (s.dur ?? 0) > (parent.ts ?? 0) + (parent.dur ?? 0))
        out.push(`track ${track}: ${s.name} overlaps ${parent.name} without nesting`);
      open.push(s);
    }
  }
  return out;
};

const files = (await readdir(replays)).filter((f) => f.endsWith(".jsonl"));

describe("duplex trace", () => {
  it.each(files)("%s: a valid Chrome trace whose slices and instants count what its log decided", async (file) => {
    const { entries } = await readSessionFile(join(replays, file));
    const trace = traceOf(entries);
    expect(violations(trace)).toEqual([]);
    const decisions = stepsOf(entries).flatMap((s) => s.decisions.map((d) => d.envelope.event));
    const ended = decisions.filter((e) => e.type === "ResponseEnded");
    const track = (name: string) =>
      trace.traceEvents.find((e) => e.name === "thread_name" && e.args?.name === name)?.tid ?? -1;
    const on = (name: string, ph: string) => trace.traceEvents.filter((e) => e.tid === track(name) && e.ph === ph);
    expect(on("responses", "X").length).toBe(ended.length);
    const instants = (name: string) => on("events", "i").filter((e) => e.name === name).length;
    expect(instants("barge-in")).toBe(
      decisions.filter((e) => e.type === "OverlapDecided" && e.data.action === "barge_in").length,
    );
    expect(instants("cancel")).toBe(
      ended.filter((e) => e.type === "ResponseEnded" && e.data.status === "cancelled").length,
    );
    expect(instants("commit")).toBe(decisions.filter((e) => e.type === "InputCommitted").length);
    const errors =
      decisions.filter((e) => e.type === "RequestRejected" || e.type === "RunnerFailed").length +
      ended.filter((e) => e.type === "ResponseEnded" && e.data.error !== null).length;
    expect(on("events", "i").filter((e) => e.name.startsWith("error ")).length).toBe(errors);
    const frames = entries.reduce((n, e) => {
      const command = (e.data as { command?: { type?: string; vad?: unknown[] } }).command;
      return (
        n +
        (e.type === "CommandReceived" && command?.type === "input_audio_buffer.append" ? (command.vad?.length ?? 0) : 0)
      );
    }, 0);
    expect(trace.traceEvents.filter((e) => e.ph === "C" && e.name === "vad").length).toBe(frames);
    // The VAD counter where the timeline page draws each frame: its audio's place on the session's clock.
    const timeline = timelineOf(entries);
    expect(trace.traceEvents.filter((e) => e.ph === "C" && e.name === "vad").map((e) => e.ts)).toEqual(
      timeline.vad.points.map(([inputMs]) =>
        Math.max(0, Math.round(sessionMsOfInput(timeline.input.clock, inputMs) * 1000)),
      ),
    );
  });

  describe("from the command line", () => {
    let dir = "";
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "duplex-trace-"));
    });
    afterAll(async () => rm(dir, { recursive: true, force: true }));

    it("writes the trace of a session file as JSON, the same as the library's", async () => {
      const out = join(dir, "trace.json");
      const file = join(replays, "barge-in-resume.jsonl");
      const { stdout } = await run(process.execPath, ["bin/duplex.js", "trace", file, "--out", out]);
      const written = JSON.parse(await readFile(out, "utf8")) as ChromeTrace;
      expect(stdout).toBe(
        `wrote ${written.traceEvents.length} trace events to ${out} (open it in https://ui.perfetto.dev or chrome://tracing)\n`,
      );
      expect(written).toEqual(traceOf((await readSessionFile(file)).entries));
    });

    it("duplex timeline writes one page with the session's timeline, its audio and both libraries inside", async () => {
      const out = join(dir, "page.html");
      const file = join(replays, "barge-in-resume.jsonl");
      const { stdout } = await run(process.execPath, ["bin/duplex.js", "timeline", file, "--out", out]);
      const html = await readFile(out, "utf8");
      const { entries } = await readSessionFile(file);
      expect(stdout).toBe(
        `wrote the timeline of ${entries.length} log entries to ${out} (${Math.round(html.length / 1024)} KiB)\n`,
      );
      const data = JSON.parse(
        /<script type="application\/json" id="timeline-data">(.*?)<\/script>/s.exec(html)?.[1] ?? "",
      );
      expect(data.timeline).toEqual(JSON.parse(JSON.stringify(timelineOf(entries))));
      expect(data.live).toBeNull();
      // The audio of the input and of every response, as WAV data URLs: it plays with no server.
      expect(data.audio.input).toMatch(/^data:audio\/wav;base64,UklGR/);
      expect(Object.keys(data.audio.responses)).toEqual(data.timeline.responses.map((r: { id: string }) => r.id));
      // Nothing fetched at view time: no script or stylesheet by URL, uPlot and wavesurfer.js inlined.
      expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+stylesheet/);
      expect(html).toContain("uPlot");
      expect(html).toContain("WaveSurfer");
    });
  });
});
