import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * `duplex demo` as a new user meets it (issue 9, "The demo" and "Errors that say what to do"), run as the real
 * command in a child process: progress on stderr, the JSON line last on stdout, and one line that says what to do
 * for each mistake, before anything is sent.
 */
const run = promisify(execFile);
type Result = { code: number; stdout: string; stderr: string };
const demo = async (args: string[], env: Record<string, string> = {}): Promise<Result> =>
  run(process.execPath, ["bin/duplex.js", "demo", ...args], {
    env: { ...process.env, OPENAI_API_KEY: "", ...env },
    timeout: 60_000,
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({
      code: error.code,
      stdout: error.stdout,
      stderr: error.stderr,
    }),
  );

describe("duplex demo from the command line", () => {
  let dir = "";
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let keyed: Awaited<ReturnType<typeof startTestServer>>;
  let turn: Awaited<ReturnType<typeof startTestServer>>;
  const jfk = sharedAudio("jfk_16k.wav");
  const question = sharedAudio("question_16k.wav");

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "duplex-demo-cli-"));
    server = await startTestServer();
    keyed = await startTestServer({ auth: { api_keys: ["sk-demo"] } });
    turn = await startTestServer({ session_mode: "turn" });
  });
  afterAll(async () => {
    await Promise.all([server.stop(), keyed.stop(), turn.stop()]);
    await rm(dir, { recursive: true, force: true });
  });

  it("prints progress on stderr (speech, each response with its transcript, the files) and the JSON line last on stdout", async () => {
    const out = join(dir, "out");
    const r = await demo(["--url", server.url, "--input", question, "--out", out, "--fast"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines).toHaveLength(1);
    const summary = JSON.parse(lines[0] ?? "{}");
    expect(summary).toMatchObject({ responses: 1, pace: "fast" });
    expect(r.stderr).toMatch(/speech started at \d+\.\d s/);
    expect(r.stderr).toMatch(/speech stopped at \d+\.\d s/);
    expect(r.stderr).toMatch(/response resp_\w+ completed: "I heard \d\.\d seconds of speech/);
    expect(r.stderr).toContain(`wrote ${join(out, "response-1.wav")}`);
  }, 60_000);

  it("removes the response files of an earlier run from --out", async () => {
    const out = join(dir, "again");
    await demo(["--url", server.url, "--input", jfk, "--out", out, "--fast"]);
    const before = (await readdir(out)).filter((f) => f.startsWith("response-"));
    expect(before.length).toBeGreaterThanOrEqual(2);
    const r = await demo(["--url", server.url, "--input", question, "--out", out, "--fast"]);
    expect(r.code).toBe(0);
    expect((await readdir(out)).filter((f) => f.startsWith("response-"))).toEqual(["response-1.wav"]);
  }, 60_000);

  it.each([
    ["a missing file", () => join(dir, "nope.wav"), /--input .*nope\.wav: no such file/],
    ["a folder", () => dir, /--input .*: is a folder; give a WAV file/],
    ["a text file", () => join(dir, "notes.wav"), /--input .*notes\.wav: not a WAV file .*convert it with: sox /],
    ["a truncated WAV", () => join(dir, "cut.wav"), /--input .*cut\.wav: the WAV is truncated/],
  ])("names the input and what is wrong with %s, exits 2, and connects to nothing", async (_what, path, message) => {
    await writeFile(join(dir, "notes.wav"), "these are not samples");
    const whole = await readFile(question);
    await writeFile(join(dir, "cut.wav"), whole.subarray(0, 20_000));
    // Port 1: a connection would fail with another message, so the input was checked first.
    const r = await demo(["--url", "ws://127.0.0.1:1/v1/realtime", "--input", path(), "--out", join(dir, "o")]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe("");
  });

  it("checks --out before connecting", async () => {
    const file = join(dir, "a-file");
    await writeFile(file, "x");
    const r = await demo(["--url", "ws://127.0.0.1:1/v1/realtime", "--input", question, "--out", file]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe(`duplex: --out ${file}: is a file; give a folder`);
  });

  it("says what to do when nothing listens, the path is wrong, or a key is needed; --api-key and OPENAI_API_KEY work", async () => {
    const args = ["--input", question, "--out", join(dir, "k"), "--fast"];
    const refused = await demo(["--url", "ws://127.0.0.1:1/v1/realtime", ...args]);
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toBe(
      "duplex: nothing listens at 127.0.0.1:1: start the server (npm start) or pass --url",
    );
    const wrongPath = await demo(["--url", server.url.replace("/v1/realtime", "/realtime"), ...args]);
    expect(wrongPath.stderr).toContain("HTTP 404, nothing there: the realtime endpoint is ws://127.0.0.1:");
    const noKey = await demo(["--url", keyed.url, ...args]);
    expect(noKey.stderr).toContain("HTTP 401, the server needs an API key: pass --api-key KEY (or set OPENAI_API_KEY)");
    expect((await demo(["--url", keyed.url, ...args, "--api-key", "sk-demo"])).code).toBe(0);
    expect((await demo(["--url", keyed.url, ...args], { OPENAI_API_KEY: "sk-demo" })).code).toBe(0);
  }, 60_000);

  it("in the turn lane says why nothing answered, and --commit gets the answer", async () => {
    const args = ["--url", turn.url, "--input", question, "--out", join(dir, "t"), "--fast"];
    const silent = await demo(args);
    expect(silent.code).toBe(1);
    expect(silent.stderr).toContain("no response: the server is in the turn lane");
    expect(silent.stderr).toContain("pass --commit");
    const committed = await demo([...args, "--commit"]);
    expect(committed.code).toBe(0);
    expect(JSON.parse(committed.stdout)).toMatchObject({ responses: 1 });
  }, 60_000);
});

describe("duplex conform against a server it cannot reach", () => {
  it("stops with one line that says what to do, instead of a report of every scenario failing", async () => {
    const r = await run(process.execPath, ["bin/duplex.js", "conform", "--url", "ws://127.0.0.1:1/v1/realtime"]).then(
      () => ({ code: 0, stdout: "", stderr: "" }),
      (error: Result) => error,
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr.trim()).toBe("duplex: nothing listens at 127.0.0.1:1: start the server (npm start) or pass --url");
  }, 30_000);
});

describe("usage errors", () => {
  it.each([
    [["demo", "--input", "x.wav", "--bogus"], "error: unknown option '--bogus'"],
    [["nosuch"], "error: unknown command 'nosuch'"],
    [["bench", "--only", "vad,nope"], 'unknown bench "nope"'],
    [["bench", "--sessions", "many"], "expected a positive number"],
  ])("duplex %j exits 2 and names what is wrong", async (args, message) => {
    const r = await run(process.execPath, ["bin/duplex.js", ...args]).then(
      () => ({ code: 0, stdout: "", stderr: "" }),
      (error: Result) => error,
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
  });
});
