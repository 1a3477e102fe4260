import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { startTestServer } from "../support/server.ts";

/**
 * `npx duplex serve --config deploy/<profile>.yaml` as a user runs it (the real command in a child process): the
 * echo runner starts under that model's profile, `GET /v1/models` and `session.created` show the profile's
 * capabilities, and what the profile does not support is refused with its code.
 */
const serve = async (profile: string, extra: string[] = []) => {
  const data = await mkdtemp(join(tmpdir(), "duplex-serve-"));
  const child = spawn(
    process.execPath,
    ["bin/duplex.js", "serve", "--config", `deploy/${profile}.yaml`, "--port", "0", "--data", data, ...extra],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`duplex serve --config deploy/${profile}.yaml did not listen`)),
      20_000,
    );
    child.once("exit", (code) => reject(new Error(`duplex serve exited with ${code}`)));
    createInterface({ input: child.stdout }).on("line", (line) => {
      const entry = JSON.parse(line) as { msg?: string; url?: string };
      if (entry.msg === "duplex server listening" && entry.url !== undefined) {
        clearTimeout(timer);
        resolve(entry.url);
      }
    });
  });
  return { child, url, data };
};

const stop = async (child: ChildProcess): Promise<number | null> =>
  new Promise((resolve) => {
    child.once("exit", (code) => resolve(code));
    child.kill("SIGTERM");
  });

const run = promisify(execFile);

describe("duplex serve --config deploy/<profile>.yaml", () => {
  let running: Awaited<ReturnType<typeof serve>> | null = null;
  afterEach(async () => {
    if (running !== null) {
      await stop(running.child);
      await rm(running.data, { recursive: true, force: true });
      running = null;
    }
  });

  it.each([
    ["personaplex", "nvidia/personaplex-7b-v1", { supports_barge_in: false, supports_session_resume: false }],
    ["nemotron_voicechat", "nvidia/nemotron-voicechat", { supports_barge_in: false, supports_tool_calls: true }],
  ])(
    "%s: reports %s and refuses barge_in with barge_in_unsupported",
    async (profile, model, capabilities) => {
      running = await serve(profile);
      const port = new URL(running.url).port;
      const models = (await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json()) as {
        data: { id: string; capabilities: Record<string, unknown> }[];
      };
      expect(models.data).toEqual([
        expect.objectContaining({ id: model, capabilities: expect.objectContaining({ profile, ...capabilities }) }),
      ]);
      const client = await RealtimeClient.connect(running.url);
      client.send({ type: "session.update", session: {} });
      const created = await client.waitFor("session.created", { since: 0 });
      expect(created.session).toMatchObject({ model, capabilities: { profile, ...capabilities } });
      const eventId = client.send({ type: "barge_in" });
      const error = await client.waitFor("error", { since: 0 });
      expect(error.error).toMatchObject({ code: "barge_in_unsupported", event_id: eventId });
      await client.close();
    },
    30_000,
  );

  it("minicpmo_4_5: the demo holds a conversation with --ref-audio in the model-native lane (?native_duplex=1)", async () => {
    running = await serve("minicpmo_4_5");
    const out = join(running.data, "out");
    const { stdout } = await run(process.execPath, [
      "bin/duplex.js",
      "demo",
      "--url",
      `${running.url}?native_duplex=1`,
      "--ref-audio",
      "../shared/audio/jfk_16k.wav",
      "--input",
      "../shared/audio/question_16k.wav",
      "--out",
      out,
      "--fast",
    ]);
    const summary = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as { responses: number; audio_ms: number[] };
    expect(summary.responses).toBeGreaterThanOrEqual(1);
    expect(summary.audio_ms[0]).toBeGreaterThan(0);
  }, 60_000);

  it("minicpmo_4_5: the demo says to pass --ref-audio when refused, and in the turn lane to --commit or ask for ?native_duplex=1", async () => {
    running = await serve("minicpmo_4_5");
    const demo = (...args: string[]) =>
      run(process.execPath, [
        "bin/duplex.js",
        "demo",
        "--input",
        "../shared/audio/question_16k.wav",
        "--out",
        join(running?.data ?? "", "out"),
        "--fast",
        ...args,
      ]).catch((error: { code: number; stderr: string }) => error);
    const refused = await demo("--url", running.url);
    expect(refused).toMatchObject({ code: 1 });
    expect((refused as { stderr: string }).stderr).toContain(
      "pass --ref-audio FILE (a WAV, e.g. ../shared/audio/jfk_16k.wav)",
    );
    const unanswered = await demo("--url", running.url, "--ref-audio", "../shared/audio/jfk_16k.wav");
    expect(unanswered).toMatchObject({ code: 1 });
    const why = (unanswered as { stderr: string }).stderr;
    expect(why).toContain("no response: the session is in the turn lane");
    expect(why).toContain("pass --commit");
    expect(why).toContain(`--url 'ws://HOST:PORT/v1/realtime?native_duplex=1'`);
  }, 60_000);

  it("minicpmo_4_5: refuses a first session.update without ref_audio with ref_audio_required", async () => {
    running = await serve("minicpmo_4_5");
    const client = await RealtimeClient.connect(running.url);
    client.send({ type: "session.update", session: {} });
    const error = await client.waitFor("error", { since: 0 });
    expect(error.code).toBe("ref_audio_required");
    expect(client.types()).not.toContain("session.created");
    await client.close();
  }, 30_000);
});

describe("duplex demo when the session ends under it", () => {
  it("says why at once when the server's upstream is down, instead of waiting for a heartbeat", async () => {
    const server = await startTestServer({
      runner: { kind: "upstream", url: "ws://127.0.0.1:9/v1/realtime", dialect: "duplex" },
    });
    try {
      const failed = await run(process.execPath, [
        "bin/duplex.js",
        "demo",
        "--url",
        server.url,
        "--input",
        "../shared/audio/question_16k.wav",
        "--out",
        join(server.dataDir, "out"),
      ]).then(
        () => null,
        (error: { code: number; stderr: string }) => error,
      );
      expect(failed?.code).toBe(1);
      expect(failed?.stderr).toMatch(/the server ended the session \(runner_failed\); upstream_unavailable: /);
      // Not the heartbeat timeout it used to wait for (a timing bound would flake on shared machines).
      expect(failed?.stderr).not.toContain("heartbeat_ack");
    } finally {
      await server.stop();
    }
  }, 30_000);

  it("refuses --data with a shared store configured, naming the flag and the store, instead of serving SQLite alone", async () => {
    const refused = await run(process.execPath, [
      "bin/duplex.js",
      "serve",
      "--config",
      "deploy/cluster.yaml",
      "--data",
      "/tmp/duplex-never-written",
      "--port",
      "0",
    ]).then(
      () => null,
      (error: { code: number; stderr: string }) => error,
    );
    expect(refused?.code).toBe(2);
    expect(refused?.stderr.trim()).toMatch(
      /^duplex: --data \/tmp\/duplex-never-written: the configuration's event_store is postgres; --data names the folder of an embedded sqlite store/,
    );
  });

  it("--runner-url puts a model server behind the server without editing YAML; a URL that is not ws:// is refused", async () => {
    const behind = await startTestServer();
    const running = await serve("embedded", ["--runner-url", behind.url]);
    try {
      const port = new URL(behind.url).port;
      const models = (await (
        await fetch(running.url.replace(/^ws/, "http").replace("/realtime", "/models"))
      ).json()) as {
        data: { id: string }[];
      };
      expect(models.data.map((m) => m.id)).toEqual([`upstream:127.0.0.1:${port}`]);
      const client = await RealtimeClient.connect(running.url);
      await client.waitFor("session.created", { since: 0 });
      client.send({ type: "response.create", response: { instructions: "Answer." } });
      const done = await client.waitFor("response.done", { since: 0 });
      expect(done.response).toMatchObject({ status: "completed" });
      await client.close();
      // The answer came from the server behind: its log holds the response.
      expect(behind.engine.sessions().length).toBe(1);
      const refused = await run(process.execPath, [
        "bin/duplex.js",
        "serve",
        "--runner-url",
        "http://127.0.0.1:1",
      ]).then(
        () => null,
        (error: { code: number; stderr: string }) => error,
      );
      expect(refused?.code).toBe(2);
      expect(refused?.stderr.trim()).toBe("duplex: --runner-url http://127.0.0.1:1: expected a ws:// or wss:// URL");
    } finally {
      await stop(running.child);
      await rm(running.data, { recursive: true, force: true });
      await behind.stop();
    }
  }, 30_000);
});
