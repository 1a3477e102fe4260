import { execFile, spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { streamOf } from "../../src/engine/index.ts";
import { readWavFile, resamplePcm16 } from "../../src/infra/audio/index.ts";
import { encodeAudio } from "../../src/protocol/index.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";
import { createTestCertificate } from "../support/tls.ts";

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
    // Speech found by the demo in its own input: the model-native lane sends no speech events.
    expect(r.stderr).toMatch(/you spoke from \d+\.\d s to \d+\.\d s of the input/);
    expect(r.stderr).not.toMatch(/the server heard speech/);
    expect(r.stderr).toMatch(/response resp_\w+ completed: "I heard \d\.\d seconds of speech/);
    expect(r.stderr).toContain(`wrote ${join(out, "response-1.wav")}`);
  }, 60_000);

  it("Ctrl-C closes the session (session.close), writes the responses received so far, prints the line and exits 130", async () => {
    const out = join(dir, "interrupted");
    const child = spawn(
      process.execPath,
      ["bin/duplex.js", "demo", "--url", server.url, "--input", jfk, "--out", out],
      {
        env: { ...process.env, OPENAI_API_KEY: "" },
      },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    // In real time, the first answer is done after the first sentence, long before the 11 s file is sent.
    await new Promise<void>((resolve) => {
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
        if (/response resp_\w+ completed/.test(stderr)) resolve();
      });
    });
    child.kill("SIGINT");
    expect(await exited).toBe(130);
    const summary = JSON.parse(stdout.trim());
    expect(summary).toMatchObject({ interrupted: true, pace: "realtime" });
    expect(summary.responses).toBeGreaterThanOrEqual(1);
    expect(stderr).toContain("interrupted: closing the session and writing the responses received so far");
    expect(stderr).not.toContain("no response");
    const written = await readWavFile(join(out, "response-1.wav"));
    expect(written.samples.length).toBeGreaterThan(0);
    // The session ended by the demo's session.close, not detached waiting for a resume.
    const log = await server.store.read(streamOf(summary.session_id));
    expect(log.filter((e) => e.type === "SessionClosed").map((e) => (e.data as { reason: string }).reason)).toEqual([
      "session_close",
    ]);
    expect(
      log.some((e) => e.type === "AttachmentChanged" && (e.data as { change: string }).change === "detached"),
    ).toBe(false);
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

  /** A mono WAV of `data` with format `tag` and `bits` per sample at `rate` Hz (a hand-written 44-byte header). */
  const wavOf = (tag: number, bits: number, rate: number, data: Uint8Array): Uint8Array => {
    const header = Buffer.alloc(44);
    header.write("RIFF", 0);
    header.writeUInt32LE(36 + data.length, 4);
    header.write("WAVEfmt ", 8);
    header.writeUInt32LE(16, 16);
    header.writeUInt16LE(tag, 20);
    header.writeUInt16LE(1, 22);
    header.writeUInt32LE(rate, 24);
    header.writeUInt32LE((rate * bits) / 8, 28);
    header.writeUInt16LE(bits / 8, 32);
    header.writeUInt16LE(bits, 34);
    header.write("data", 36);
    header.writeUInt32LE(data.length, 40);
    return Buffer.concat([header, data]);
  };

  it.each([
    ["mu-law at 8 kHz", 7, 8, 8000, "g711_ulaw"],
    ["A-law at 8 kHz", 6, 8, 8000, "g711_alaw"],
    ["float32 at 16 kHz", 3, 32, 16000, "pcm_f32le"],
  ] as const)(
    "sends a %s WAV as it is, declared in session.update, and gets an answer",
    async (_what, tag, bits, rate, encoding) => {
      const speech = (await readWavFile(question)).samples;
      const samples = rate === 16000 ? speech : resamplePcm16(speech, 16000, rate);
      const file = join(dir, `${encoding}.wav`);
      await writeFile(file, wavOf(tag, bits, rate, encodeAudio({ encoding, rate }, samples)));
      const r = await demo(["--url", server.url, "--input", file, "--out", join(dir, encoding), "--fast", "--quiet"]);
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      const summary = JSON.parse(r.stdout) as { session_id: string; responses: number };
      expect(summary.responses).toBe(1);
      const entries = await server.store.read(`session-${summary.session_id}`);
      const update = entries.find(
        (e) =>
          e.type === "CommandReceived" && (e.data as { command: { type: string } }).command.type === "session.update",
      );
      expect(JSON.stringify(update?.data)).toContain(encoding);
    },
    60_000,
  );

  it.each([
    ["a missing file", () => join(dir, "nope.wav"), /--input .*nope\.wav: no such file/],
    ["a folder", () => dir, /--input .*: is a folder; give a WAV file/],
    ["a text file", () => join(dir, "notes.wav"), /--input .*notes\.wav: not a WAV file .*convert it with: sox /],
    ["a truncated WAV", () => join(dir, "cut.wav"), /--input .*cut\.wav: the WAV is truncated/],
    [
      "an MP3 file, named, with the package Debian's sox needs for it",
      () => join(dir, "song.mp3"),
      /--input .*song\.mp3: not a WAV file the demo can send \(not a RIFF\/WAVE file: an MP3 file\); convert it with: sox .* \(sox reads MP3 with Debian's libsox-fmt-mp3 package\)$/m,
    ],
    [
      "a WAV cut inside its header",
      () => join(dir, "stub.wav"),
      /--input .*stub\.wav: the WAV is truncated: the file ends inside its "fmt " chunk$/m,
    ],
  ])("names the input and what is wrong with %s, exits 2, and connects to nothing", async (_what, path, message) => {
    await writeFile(join(dir, "notes.wav"), "these are not samples");
    const whole = await readFile(question);
    await writeFile(join(dir, "cut.wav"), whole.subarray(0, 20_000));
    await writeFile(join(dir, "stub.wav"), whole.subarray(0, 30));
    await writeFile(join(dir, "song.mp3"), Buffer.from([...Buffer.from("ID3"), 4, 0, 0, 0, 0, 0, 0, 0xff, 0xfb, 0x90]));
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
    const wrongKey = await demo(["--url", keyed.url, ...args, "--api-key", "sk-wrong"]);
    expect(wrongKey.stderr).toContain("HTTP 401, the server refused that API key: check --api-key (or OPENAI_API_KEY)");
    expect((await demo(["--url", keyed.url, ...args, "--api-key", "sk-demo"])).code).toBe(0);
    expect((await demo(["--url", keyed.url, ...args], { OPENAI_API_KEY: "sk-demo" })).code).toBe(0);
  }, 60_000);

  it("says to use wss:// on a TLS port, and how to trust a self-signed certificate; trusted, the demo runs", async () => {
    const cert = await createTestCertificate();
    const tls = await startTestServer({ listen: { host: "127.0.0.1", port: 0, tls: cert.files } });
    try {
      const args = ["--input", question, "--out", join(dir, "tls"), "--fast"];
      const plain = await demo(["--url", tls.url.replace("wss:", "ws:"), ...args]);
      expect(plain.stderr).toContain("if the server listens with TLS (listen.tls), use wss://");
      const untrusted = await demo(["--url", tls.url, ...args]);
      expect(untrusted.stderr).toContain("the server's TLS certificate is not trusted (DEPTH_ZERO_SELF_SIGNED_CERT)");
      expect(untrusted.stderr).toContain("NODE_EXTRA_CA_CERTS");
      const trusted = await demo(["--url", tls.url, ...args], { NODE_EXTRA_CA_CERTS: cert.files.cert });
      expect(trusted.code).toBe(0);
    } finally {
      await tls.stop();
      await cert.remove();
    }
  }, 60_000);

  it("in the turn lane says why nothing answered, and --commit gets the answer", async () => {
    const args = ["--url", turn.url, "--input", question, "--out", join(dir, "t"), "--fast"];
    const silent = await demo(args);
    expect(silent.code).toBe(1);
    expect(silent.stderr).toContain("no response: the session is in the turn lane");
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
