import type { ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { freePort, startServerProcess } from "../../src/cli/server-process.ts";
import { RealtimeClient, type ServerEvent } from "../../src/client/index.ts";
import { pcm16ToBytes, readWavFile } from "../../src/infra/audio/index.ts";
import { sharedAudio } from "../support/server.ts";

/**
 * Keys and tokens (issue 10, part 8): no API key, resume token or audio ever reaches a log line. A real server
 * process at `log_level: debug` with `auth.api_keys` serves a session of real speech, a dropped socket, a resume,
 * failed upgrades up to the lockout; then everything it printed is searched for each secret.
 */

/** 120 ms of 16 kHz PCM16: 3,840 bytes, a multiple of 3, so each chunk's base64 is also a slice of the whole's. */
const CHUNK_SAMPLES = 1920;

/**
 * 24-character slices of `base64`, one every 512 characters, that say something: runs of near silence (`AAAA`,
 * `//8A`) would match unrelated text, so a slice needs at least 12 distinct characters.
 */
const fragmentsOf = (base64: string): string[] => {
  const out: string[] = [];
  for (let at = 0; at + 24 <= base64.length; at += 512) {
    const fragment = base64.slice(at, at + 24);
    if (new Set(fragment).size >= 12) out.push(fragment);
  }
  return out;
};

const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex");

describe("the server's log at debug level", () => {
  let dir = "";
  let server: ChildProcess | null = null;
  afterAll(async () => {
    server?.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  });

  it("carries no API key, no resume token and no audio through a session with auth, resume and a lockout", async () => {
    dir = await mkdtemp(join(tmpdir(), "duplex-log-secrets-"));
    const key = `sk-${randomBytes(24).toString("base64url")}`;
    const wrongKey = `sk-${randomBytes(24).toString("base64url")}`;
    const config = join(dir, "deploy.yaml");
    await writeFile(
      config,
      stringify({ log_level: "debug", auth: { api_keys: [key], max_failed_attempts: 2, lockout_s: 300 } }),
    );
    const port = await freePort();
    const started = await startServerProcess(port, join(dir, "data"), 30_000, ["--config", config]);
    server = started.child;
    const url = `ws://127.0.0.1:${port}/v1/realtime`;
    const auth = { headers: { Authorization: `Bearer ${key}` } };
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);

    // A session of real speech; the echo runner answers with audio.
    const first = await RealtimeClient.connect(url, auth);
    const created = await first.waitFor("session.created", { since: 0 });
    const sessionId = String((created.session as { id: string }).id);
    const oldToken = String(created.resume_token);
    first.send({
      type: "session.update",
      session: { input_audio_format: "pcm16", input_sample_rate_hz: 16000, turn_detection: { type: "server_vad" } },
    });
    await first.waitFor("session.updated", { since: 0 });
    const wav = await readWavFile(sharedAudio("jfk_16k.wav"));
    const sent: string[] = [];
    const samples = new Int16Array(wav.samples.length + 16000 * 1.5);
    samples.set(wav.samples);
    for (let at = 0; at < samples.length; at += CHUNK_SAMPLES) {
      const audio = Buffer.from(pcm16ToBytes(samples.subarray(at, at + CHUNK_SAMPLES))).toString("base64");
      sent.push(audio);
      first.send({ type: "input_audio_buffer.append", audio });
    }
    await first.waitFor("response.done", { since: 0, timeoutMs: 30_000 });

    // The socket drops; a new one resumes the session, and the token rotates.
    await first.terminate();
    const second = await RealtimeClient.connect(`${url}?autostart=0`, auth);
    second.send({
      type: "session.resume",
      session_id: sessionId,
      resume_token: oldToken,
      last_received_server_event_seq: first.lastSeq(),
    });
    const resumed = await second.waitFor("session.resumed", { since: 0 });
    const newToken = String(resumed.resume_token);
    expect(newToken).not.toBe(oldToken);
    second.send({ type: "session.close" });
    await second.closed;

    // Failed upgrades with a wrong key, up to the lockout; then even the good key is refused.
    const wrong = { headers: { Authorization: `Bearer ${wrongKey}` } };
    await expect(RealtimeClient.connect(url, wrong)).rejects.toThrow(/401/);
    await expect(RealtimeClient.connect(url, { headers: { "api-key": wrongKey } })).rejects.toThrow(/401/);
    await expect(RealtimeClient.connect(url, auth)).rejects.toThrow(/429/);

    const exited = new Promise((resolve) => started.child.once("exit", resolve));
    started.child.kill("SIGTERM");
    await exited;
    server = null;
    const output = started.output();
    const lines = started
      .stdout()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { level: number; msg: string; sessionId?: string; code?: string });

    // The log is the whole story, at debug level: otherwise the absences below would prove nothing.
    const messages = lines.map((l) => [l.level, l.msg]);
    expect(messages).toContainEqual([20, "request"]);
    // At info, one line per lifecycle event; the socket's own attach is at debug.
    expect(lines.filter((l) => l.sessionId === sessionId).map((l) => [l.level, l.msg])).toEqual([
      [30, "session opened"],
      [30, "socket dropped; session detached"],
      [20, "socket attached: resume"],
      [30, "session resumed"],
      [30, "session closed"],
    ]);
    expect(lines.filter((l) => l.code === "unauthorized").map((l) => [l.level, l.msg])).toEqual([
      [30, "upgrade refused: missing or invalid API key"],
      [30, "upgrade refused: missing or invalid API key"],
    ]);
    expect(lines.filter((l) => l.code === "too_many_auth_failures").map((l) => [l.level, l.msg])).toEqual([
      [30, "address locked out after repeated failed API key checks"],
      [30, "upgrade refused: address locked out after failed API key checks"],
    ]);

    const received = [...first.received, ...second.received]
      .map((r) => r.event)
      .filter((e: ServerEvent) => e.type === "response.output_audio.delta")
      .map((e) => String(e.delta));
    const sentFragments = sent.flatMap(fragmentsOf);
    const receivedFragments = received.flatMap(fragmentsOf);
    expect(sentFragments.length).toBeGreaterThan(500);
    expect(receivedFragments.length).toBeGreaterThan(10);
    const secrets = [key, key.slice(3), wrongKey, wrongKey.slice(3), oldToken, newToken];
    for (const secret of [...secrets, ...secrets.map(sha256)]) expect(output).not.toContain(secret);
    for (const fragment of [...sentFragments, ...receivedFragments]) expect(output).not.toContain(fragment);
    // And the concatenated input: every chunk is a whole number of 3 bytes, so its base64 is the chunks' joined.
    expect(output).not.toContain(sent.slice(40, 42).join("").slice(5_000, 5_200));
  }, 90_000);
});
