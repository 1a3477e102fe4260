import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket as WsSocket } from "ws";
import { runDemo } from "../../src/cli/demo.ts";
import { freePort } from "../../src/cli/server-process.ts";
import { DuplexClient } from "../../src/client/index.ts";
import { type ClientCase, loadClientCases } from "../../src/conformance/client/cases.ts";
import { referenceTone } from "../../src/conformance/client/graders.ts";
import { type CaseResult, startClientHarness } from "../../src/conformance/client/harness.ts";
import { renderClientTable, renderJUnit, requiredPassed } from "../../src/conformance/client/report.ts";
import { CLIENT_CASE_DIR, CLIENT_PEER_SCRIPT } from "../../src/conformance/files.ts";
import { encodeWav, readWavFile } from "../../src/infra/audio/index.ts";
import { sharedAudio } from "../support/server.ts";

const run = promisify(execFile);

/**
 * Client conformance (issue 23) as a client author runs it: `duplex conform --client` in a process of its own, and
 * the project's own client app (`duplex demo`'s runDemo: a DuplexClient that plays each answer, acknowledges
 * playback, stops on a cut and resumes a dropped connection) run through every case (`?case=ID`). The command ends
 * by itself once every case's session ended, exits 0, and leaves its report: JSON, HTML, JUnit and the sessions,
 * which `duplex conform --grade` grades again offline.
 */
describe("client conformance: the project's DuplexClient app, through duplex conform --client", () => {
  let dir = "";
  let exit: number | null = null;
  let stdout = "";
  let cases: ClientCase[] = [];
  let child: ChildProcess | null = null;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "duplex-client-conform-"));
    cases = await loadClientCases(CLIENT_CASE_DIR);
    const port = await freePort();
    const peer = spawn(
      process.execPath,
      [
        "bin/duplex.js",
        "conform",
        "--client",
        "--port",
        String(port),
        "--agent",
        "duplex-demo",
        "--duplex-aware",
        "--report",
        join(dir, "report"),
        "--idle-ttl-s",
        "8",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    child = peer;
    const exited = new Promise<number | null>((resolve) => peer.once("exit", (code) => resolve(code)));
    peer.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the peer did not start: ${stdout}`)), 30_000);
      peer.stdout.on("data", () => {
        if (stdout.includes("waiting for the client")) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    const url = /on (ws:\/\/\S+)/.exec(stdout)?.[1] ?? "";
    // The microphone: the question, a pause, then the user talks over the answer; and the tone the peer wrote.
    const question = (await readWavFile(sharedAudio("question_16k.wav"))).samples;
    const interrupt = (await readWavFile(sharedAudio("interrupt_16k.wav"))).samples;
    const talkOver = new Int16Array(question.length + 16000 * 1.5 + interrupt.length);
    talkOver.set(question);
    talkOver.set(interrupt, question.length + 24000);
    await writeFile(join(dir, "talk-over.wav"), encodeWav(talkOver, 16000));
    const inputOf = (c: ClientCase): string =>
      c.grader === "audio-rate"
        ? join(dir, "report", "tone.wav")
        : c.profile === "barge-in"
          ? join(dir, "talk-over.wav")
          : sharedAudio("question_16k.wav");
    await Promise.all(
      cases.map(async (c) => {
        const demo = runDemo({
          url: `${url}?case=${c.id}`,
          input: inputOf(c),
          out: join(dir, c.id),
          tailMs: 4000,
          serverVad: c.profile === "barge-in",
          // lease.idle: the app stays, silent, past the peer's idle timeout (8 s), heartbeating every 2 s.
          ...(c.profile === "lease" ? { lingerMs: 12_000, heartbeatMs: 2000 } : {}),
        });
        // The resume is refused, or the session was taken over: the demo says it cannot go on, and stops.
        if (c.grader !== "no-retry") return demo;
        await expect(demo).rejects.toThrow(/resum|replay/);
      }),
    );
    exit = await exited;
  }, 120_000);
  afterAll(async () => {
    // A run that failed before the peer ended (a demo that could not run) leaves no peer behind.
    if (child !== null && child.exitCode === null) child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  });

  it("passes every case, ends by itself with exit 0, and prints the table", () => {
    expect(exit).toBe(0);
    for (const c of cases) expect(stdout).toMatch(new RegExp(`^${c.id.replace(".", "\\.")} +required +pass +`, "m"));
    expect(stdout).toContain("every required case passed");
  });

  it("writes the report: an index and a JSON per case, an HTML matrix, JUnit XML, each case's session", async () => {
    const report = join(dir, "report");
    const index = JSON.parse(await readFile(join(report, "index.json"), "utf8")) as {
      agent: string;
      required_passed: boolean;
      cases: { id: string; verdict: string; session_id: string }[];
    };
    expect(index.agent).toBe("duplex-demo");
    expect(index.required_passed).toBe(true);
    expect(index.cases.map((c) => [c.id, c.verdict])).toEqual(cases.map((c) => [c.id, "pass"]));
    for (const c of cases) {
      const one = JSON.parse(await readFile(join(report, "cases", `${c.id}.json`), "utf8")) as {
        grade: { evidence: unknown[] };
      };
      expect(one.grade.evidence.length).toBeGreaterThan(0);
    }
    const junit = await readFile(join(report, "junit.xml"), "utf8");
    expect(junit).toContain(`tests="${cases.length}" failures="0" errors="0" skipped="0"`);
    const html = await readFile(join(report, "report.html"), "utf8");
    expect(html.match(/data-verdict="pass"/g)?.length).toBe(cases.length);
    expect(html).not.toMatch(/<script|<link/);
    expect(html).toMatch(/<tr id="exercised"><th>rules exercised<\/th><td>[^<]*barge-in[^<]*resume[^<]*<\/td><\/tr>/);
    // Graded again offline from the recorded session: the same verdict.
    const barge = index.cases.find((c) => c.id === "barge-in.truncate");
    const graded = await run(process.execPath, [
      "bin/duplex.js",
      "conform",
      "--grade",
      join(report, "sessions", `${barge?.session_id}.jsonl`),
    ]);
    expect(graded.stdout).toMatch(/^barge-in\.truncate: pass: after each of 1 cut\(s\) it stopped/);
    // Informational: the demo reports what it played, behind what it was sent (the peer sends at twice real time).
    expect(graded.stdout).toMatch(
      /its clock reads like a played or wall-clock position \(\d+ ms behind what it was sent/,
    );
  });
});

/**
 * A deliberately broken client (issue 23, "Tested in CI"): it declares 16 kHz but sends audio made at 24 kHz, never
 * stops playing an answer that was cut and acknowledges more than it was sent, sends no heartbeat, and does not
 * resume (which it declares). It fails exactly the cases it breaks.
 */
const brokenApp = async (url: string, samples: Int16Array, serverVad: boolean, stayMs: number): Promise<void> => {
  const client = await DuplexClient.connect(url, {
    session: { input_sample_rate_hz: 16000, ...(serverVad ? { turn_detection: { type: "server_vad" } } : {}) },
    reconnect: null,
    heartbeatIntervalMs: null,
  });
  // It acknowledges 1 s more than it received, until 3 s after its microphone ended; then it sends nothing.
  let acking = true;
  const acker = setInterval(() => {
    for (const r of client.responses)
      if (acking && r.responseId !== null && r.audioMs > 0 && client.phase === "open")
        client.ackPlayback(r.responseId, Math.floor(r.audioMs) + 1000);
  }, 200);
  try {
    const bytes = new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);
    await client.streamAudio(bytes, { bytesPerSecond: 32_000, realtime: true }).catch(() => undefined);
    setTimeout(() => {
      acking = false;
    }, 3000);
    await new Promise((resolve) => setTimeout(resolve, stayMs));
  } finally {
    clearInterval(acker);
    await client.close().catch(() => undefined);
  }
};

describe("client conformance: a deliberately broken client", () => {
  let results: CaseResult[] = [];
  beforeAll(async () => {
    const cases = await loadClientCases(CLIENT_CASE_DIR);
    const harness = await startClientHarness({
      cases,
      host: "127.0.0.1",
      port: 0,
      script: CLIENT_PEER_SCRIPT,
      unsupported: ["resume"],
      graceS: 16,
      idleTtlS: 6,
    });
    const question = (await readWavFile(sharedAudio("question_16k.wav"))).samples;
    const interrupt = (await readWavFile(sharedAudio("interrupt_16k.wav"))).samples;
    const talkOver = new Int16Array(question.length + 24000 + interrupt.length + 32000);
    talkOver.set(question);
    talkOver.set(interrupt, question.length + 24000);
    const padded = new Int16Array(question.length + 32000);
    padded.set(question);
    // The tone made at 24 kHz, sent as if it were 16 kHz audio.
    const wrongRate = referenceTone(24000);
    await Promise.all(
      cases.map((c) =>
        brokenApp(
          `${harness.url}?case=${c.id}`,
          c.grader === "audio-rate" ? wrongRate : c.profile === "barge-in" ? talkOver : padded,
          c.profile === "barge-in",
          // lease.idle: it stays, silent, past the idle timeout (6 s) but sends nothing to keep the session.
          c.profile === "lease" ? 14_000 : 7000,
        ),
      ),
    );
    await harness.allEnded;
    results = (await harness.finish()).results;
  }, 120_000);

  it("fails the audio rate, barge-in, playback and lease cases, says it does not resume, and passes the rest", () => {
    const verdicts = Object.fromEntries(results.map((r) => [r.id, r.grade.verdict]));
    expect(verdicts).toEqual({
      "barge-in.truncate": "fail",
      "core.audio-rate": "fail",
      "core.error-recovery": "pass",
      "core.forward-compat": "pass",
      "core.handshake": "pass",
      "core.spellings": "pass",
      "lease.idle": "fail",
      "playback.acks": "fail",
      "resume.drop": "unsupported",
      "resume.expired": "unsupported",
      "resume.going-away": "unsupported",
      "resume.replaced": "unsupported",
      "resume.restart": "unsupported",
      "resume.resync": "unsupported",
    });
    const why = (id: string) => results.find((r) => r.id === id)?.grade.message ?? "";
    expect(why("core.audio-rate")).toMatch(/heard at 66\d Hz/);
    expect(why("barge-in.truncate")).toMatch(/beyond the \d+ ms it was sent/);
    expect(why("playback.acks")).toMatch(/went beyond what was sent/);
    expect(why("lease.idle")).toMatch(
      /^the session expired idle \d+ s after the conversation went quiet \(idle timeout 6 s; 0 heartbeat/,
    );
  });
});

describe("client conformance: the peer under bad connections", () => {
  it("refuses a URL that does not parse and an unknown case with 1008, goes on, and grades a case nobody ran as not run", async () => {
    const cases = (await loadClientCases(CLIENT_CASE_DIR)).filter((c) => c.id === "core.handshake");
    const lines: string[] = [];
    const harness = await startClientHarness({
      cases,
      host: "127.0.0.1",
      port: 0,
      script: CLIENT_PEER_SCRIPT,
      unsupported: [],
      log: (line) => lines.push(line),
    });
    const closeOf = (url: string) =>
      new Promise<number>((resolve) => {
        const socket = new WsSocket(url);
        socket.on("error", () => undefined);
        socket.on("close", (code) => resolve(code));
      });
    const base = harness.url.replace(/\/v1\/realtime$/, "");
    expect(await closeOf(`${base}/case/%E0%A4%A/v1/realtime`)).toBe(1008);
    expect(await closeOf(`${harness.url}?case=nope`)).toBe(1008);
    expect(lines.some((l) => l.startsWith("refused a connection: no case nope"))).toBe(true);
    const { results } = await harness.finish();
    expect(results.map((r) => [r.id, r.grade.verdict])).toEqual([["core.handshake", "harness-broken"]]);
    const report = { agent: "nobody", duplexAware: false, results };
    expect(requiredPassed(report)).toBe(false);
    expect(renderClientTable(report)).toMatch(/a required case could not run\n$/);
    // JUnit goes red too: a required case that could not run is an error, not a skip.
    expect(renderJUnit(report)).toContain('tests="1" failures="0" errors="1" skipped="0"');
  });
});
