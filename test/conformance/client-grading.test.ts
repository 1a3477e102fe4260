import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket as WsSocket } from "ws";
import { runDemo } from "../../src/cli/demo.ts";
import { freePort } from "../../src/cli/server-process.ts";
import { DuplexClient } from "../../src/client/index.ts";
import { appInputOf, describeAppInput } from "../../src/conformance/client/app-input.ts";
import { guessSentRate, RATE_SNAP_TOLERANCE } from "../../src/conformance/client/appends.ts";
import { type ClientCase, loadClientCases } from "../../src/conformance/client/cases.ts";
import { runClientConformance } from "../../src/conformance/client/cli.ts";
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

/**
 * An app that speaks the wire itself: a session.update with `session`, then each append of `appends` (fields besides
 * the type), then session.close. Returns the codes of the `error` events the server sent it, in order.
 */
const wireApp = async (
  url: string,
  session: Record<string, unknown>,
  appends: readonly Record<string, unknown>[],
): Promise<string[]> => {
  const socket = new WsSocket(url);
  const errors: string[] = [];
  socket.on("message", (data) => {
    const event = JSON.parse(String(data)) as { type: string; error?: { code: string } };
    if (event.type === "error") errors.push(event.error?.code ?? "");
  });
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
  });
  socket.send(JSON.stringify({ type: "session.update", session }));
  for (const append of appends) socket.send(JSON.stringify({ type: "input_audio_buffer.append", ...append }));
  socket.send(JSON.stringify({ type: "session.close" }));
  await closed;
  return errors;
};

/** `samples` as base64 PCM16 appends of `perAppend` samples each, every one `extraBytes` longer (a half sample). */
const appendsOf = (samples: Int16Array, perAppend: number, extraBytes = 0): { audio: string }[] => {
  const bytes = Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
  const appends: { audio: string }[] = [];
  for (let at = 0; at + perAppend * 2 + extraBytes <= bytes.length; at += perAppend * 2)
    appends.push({ audio: bytes.subarray(at, at + perAppend * 2 + extraBytes).toString("base64") });
  return appends;
};

/** Runs `app` through the one case `id` of a fresh peer on `port`, and returns its result once its session ended. */
const gradeOne = async (id: string, port: number, app: (url: string) => Promise<unknown>): Promise<CaseResult> => {
  const cases = (await loadClientCases(CLIENT_CASE_DIR)).filter((c) => c.id === id);
  const harness = await startClientHarness({
    cases,
    host: "127.0.0.1",
    port,
    script: CLIENT_PEER_SCRIPT,
    unsupported: [],
  });
  await app(`${harness.url}?case=${id}`)
    .then(() => harness.allEnded)
    .catch(async (error: unknown) => {
      await harness.finish();
      throw error;
    });
  return (await harness.finish()).results[0] as CaseResult;
};

describe("client grading: what the client's audio did", () => {
  it("fails core.handshake with the refusals as evidence when the server refused its appends (half samples, a rate it does not take)", async () => {
    const question = (await readWavFile(sharedAudio("question_16k.wav"))).samples;
    // 100 ms appends, each one byte too long (half a sample), and one of whole samples at a rate the server refuses.
    const halves = appendsOf(question, 1600, 1);
    const appends = [
      ...halves.slice(0, 5),
      { ...appendsOf(question, 1600)[5], sample_rate_hz: 11025 },
      ...halves.slice(6),
    ];
    let errors: string[] = [];
    const result = await gradeOne("core.handshake", await freePort(), async (url) => {
      errors = await wireApp(url, { input_sample_rate_hz: 16000 }, appends);
    });
    const badAudio = appends.length - 1;
    // What the client was told, one error per append: the grade counts the same.
    expect(errors.filter((c) => c === "bad_audio")).toHaveLength(badAudio);
    expect(errors.filter((c) => c === "bad_event")).toHaveLength(1);
    expect(result.grade.verdict).toBe("fail");
    expect(result.grade.reason).toBe("the server refused its audio appends");
    expect(result.grade.message).toBe(
      `${appends.length} of ${appends.length} audio append(s) refused: bad_audio x${badAudio} ("pcm16 audio must be a whole number of 2-byte samples; got 3201 bytes"), bad_event x1 ("sample_rate_hz must be one of 8000, 16000, 24000, 48000 Hz; got 11025")`,
    );
    const refused = result.grade.evidence.filter((e) => e.what.startsWith("append refused"));
    expect(refused.map((e) => e.what.replace(/\): .*/, ")"))).toEqual([
      `append refused: bad_audio (${badAudio} like it)`,
      "append refused: bad_event (1 like it)",
    ]);
    // Each names the log revision of its first refusal: the bad_audio one before the bad_event one.
    expect(refused.every((e) => e.revision !== null)).toBe(true);
    expect((refused[0]?.revision ?? 0) < (refused[1]?.revision ?? 0)).toBe(true);
    expect(result.grade.message).not.toMatch(/sent no audio/);
  }, 20_000);

  it("passes core.handshake for the same audio in whole samples, with no refusal in its evidence", async () => {
    const question = (await readWavFile(sharedAudio("question_16k.wav"))).samples;
    const appends = appendsOf(question.subarray(0, 16000), 1600);
    let errors: string[] = [];
    const result = await gradeOne("core.handshake", await freePort(), async (url) => {
      errors = await wireApp(url, { input_sample_rate_hz: 16000 }, appends);
    });
    expect(errors).toEqual([]);
    expect(result.grade.verdict).toBe("pass");
    expect(result.grade.message).toMatch(/^session\.update accepted; 10 appends of whole samples, 1000 ms of audio/);
    expect(result.grade.evidence.some((e) => e.what.startsWith("append refused"))).toBe(false);
  }, 20_000);

  it("fails core.audio-rate for the 16 kHz tone declared as 24 kHz, and names 16000 Hz as the rate it was sent at", async () => {
    // The tone.wav the case asks for (16 kHz), streamed by an app that declares 24 kHz: it plays 1.5 times too high.
    const appends = appendsOf(referenceTone(16000), 1600);
    const result = await gradeOne("core.audio-rate", await freePort(), (url) =>
      wireApp(url, { input_audio_format: "pcm16", input_sample_rate_hz: 24000 }, appends),
    );
    expect(result.grade.verdict).toBe("fail");
    const heard = Number(/heard at (\d+) Hz \(declared input rate 24000 Hz\)/.exec(result.grade.message)?.[1]);
    expect(Math.abs(heard / 1500 - 1)).toBeLessThan(0.03);
    const guess = /plays 1\.50 times too high; most likely sent at (\d+) Hz \(estimate (\d+) Hz\)/.exec(
      result.grade.message,
    );
    expect(guess?.[1]).toBe("16000");
    expect(Math.abs(Number(guess?.[2]) / 16000 - 1)).toBeLessThan(RATE_SNAP_TOLERANCE);
  }, 20_000);
});

describe("guessSentRate", () => {
  it("names the common rate within a few percent of the estimate, and keeps the raw estimate", () => {
    expect(guessSentRate(24000, 1000, 1500)).toEqual({ estimateHz: 16000, likelyHz: 16000 });
    expect(guessSentRate(24000, 1000, 1490)).toEqual({ estimateHz: (24000 * 1000) / 1490, likelyHz: 16000 });
    expect(guessSentRate(16000, 1000, 2000 / 3).likelyHz).toBe(24000);
    expect(guessSentRate(48000, 1000, (1000 * 48000) / 22050).likelyHz).toBe(22050);
    expect(guessSentRate(16000, 1000, (1000 * 16000) / 44100).likelyHz).toBe(44100);
    expect(guessSentRate(24000, 1000, 3000).likelyHz).toBe(8000);
  });

  it("names no rate when the estimate is far from every common rate", () => {
    const guess = guessSentRate(24000, 1000, 2000);
    expect(guess).toEqual({ estimateHz: 12000, likelyHz: null });
  });
});

describe("duplex conform --client, in process", () => {
  const dir = "/tmp/h4/conform-client";
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("prints for each case the files, server VAD and what the app must do", async () => {
    const cases = await loadClientCases(CLIENT_CASE_DIR);
    const lines = cases.map((c) => describeAppInput(c, "/audio", "/report/tone.wav")).join("");
    const of = (id: string) =>
      lines
        .slice(lines.indexOf(`  ${id} `))
        .split("\n")
        .slice(0, 2)
        .join("\n");
    expect(of("core.handshake")).toMatch(
      /^ {2}core\.handshake +every client +send \/audio\/question_16k\.wav; server VAD off \(turn_detection unset\)\n +Open a session/,
    );
    expect(of("core.audio-rate")).toMatch(/send \/report\/tone\.wav; server VAD off/);
    expect(of("barge-in.truncate")).toMatch(
      /^ {2}barge-in\.truncate +every client +send \/audio\/question_16k\.wav, then \/audio\/interrupt_16k\.wav; server VAD on \(turn_detection: \{type: "server_vad"\}\)\n +With server VAD/,
    );
    // Every case says what to send: none is left without a file.
    for (const c of cases) expect(appInputOf(c).files.length).toBeGreaterThan(0);
    expect(lines.match(/^ {2}\S+ +(?:every client|duplex-aware) +send /gm)).toHaveLength(cases.length);
  });

  it("says in the README's grading section what every case's app streams and whether it turns on server VAD", async () => {
    const readme = await readFile("README.md", "utf8");
    const section = readme.slice(readme.indexOf("## Grade your client"), readme.indexOf("<!-- client-table:begin"));
    const rows = new Map(
      [...section.matchAll(/^\| ([a-z.-]+|every other case) +\| (.+?) +\| (on|off) /gm)].map((m) => [
        m[1] ?? "",
        { streams: m[2] ?? "", vad: m[3] === "on" },
      ]),
    );
    expect([...rows.keys()]).toEqual(["core.audio-rate", "barge-in.truncate", "every other case"]);
    for (const c of await loadClientCases(CLIENT_CASE_DIR)) {
      const row = rows.get(c.id) ?? rows.get("every other case");
      const input = appInputOf(c);
      expect(row?.vad, c.id).toBe(input.serverVad);
      for (const file of input.files) expect(row?.streams, c.id).toContain(file);
    }
  });

  it("grades a run and records in its report and its table the date, the server's name and version, and the command line", async () => {
    await rm(dir, { recursive: true, force: true });
    await mkdir(join(dir, "cases"), { recursive: true });
    // One case, so that the run ends once its session does.
    await writeFile(
      join(dir, "cases", "core.handshake.yaml"),
      await readFile(join(CLIENT_CASE_DIR, "core.handshake.yaml"), "utf8"),
    );
    const pkg = JSON.parse(await readFile("package.json", "utf8")) as { name: string; version: string };
    let printed = "";
    const before = Date.now();
    const port = await freePort();
    const command = ["duplex", "conform", "--client", "--port", String(port), "--agent", "wire app"];
    const passed = runClientConformance({
      host: "127.0.0.1",
      port,
      agent: "wire app",
      report: join(dir, "report"),
      cases: join(dir, "cases"),
      unsupported: [],
      duplexAware: false,
      idleTtlS: 40,
      command,
      audioDir: "/audio",
      out: (text) => {
        printed += text;
      },
    });
    while (!printed.includes("waiting for the client")) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(printed).toMatch(/^ {2}core\.handshake +every client +send \/audio\/question_16k\.wav; server VAD off/m);
    const url = /on (ws:\/\/\S+)/.exec(printed)?.[1] ?? "";
    const question = (await readWavFile(sharedAudio("question_16k.wav"))).samples;
    await wireApp(url, { input_sample_rate_hz: 16000 }, appendsOf(question.subarray(0, 8000), 1600));
    expect(await passed).toBe(true);
    const index = JSON.parse(await readFile(join(dir, "report", "index.json"), "utf8")) as {
      date: string;
      server: { name: string; version: string };
      command: string[];
      command_line: string;
    };
    expect(index.server).toEqual({ name: pkg.name, version: pkg.version });
    expect(index.command).toEqual(command);
    expect(index.command_line).toBe(`duplex conform --client --port ${port} --agent 'wire app'`);
    expect(Date.parse(index.date)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(index.date)).toBeLessThanOrEqual(Date.now());
    expect(index.date).toBe(new Date(Date.parse(index.date)).toISOString());
    expect(printed).toContain(
      `client: wire app\ngraded ${index.date} by ${pkg.name} ${pkg.version}: duplex conform --client --port ${port} --agent 'wire app'\ncase `,
    );
  }, 20_000);
});
