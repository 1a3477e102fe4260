import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseConfig } from "../../src/infra/config.ts";
import { type RunningServer, startServer } from "../../src/server/index.ts";

/** Test audio of ../shared/audio (never copied into the project). */
export const sharedAudio = (name: string): string => resolve(process.cwd(), "../shared/audio", name);

/**
 * A real server on 127.0.0.1 port 0 with its own sqlite store in a temp folder. `stop()` closes and removes it.
 *
 * With `DUPLEX_TEST_CHAIN=1` (`npm run test:chain`), the server is the front of a chain: its runner is an
 * `upstream` runner (duplex dialect) in front of a second server that runs the configured runner, so tests written
 * for one server check the chain too. Tests that bring their own runner object, or an upstream, are left alone.
 */
export const startTestServer = async (
  overrides: Record<string, unknown> = {},
  options: Parameters<typeof startServer>[1] = {},
): Promise<RunningServer & { dataDir: string; stop(): Promise<void> }> => {
  const runner = overrides.runner as { kind?: string } | undefined;
  if (process.env.DUPLEX_TEST_CHAIN === "1" && options.runner === undefined && runner?.kind !== "upstream") {
    const behind = await startSingleServer(
      { ...(runner === undefined ? {} : { runner }), duplex_session: { max_sessions: 64 } },
      {},
    );
    const front = await startSingleServer(
      { ...overrides, runner: { kind: "upstream", url: behind.url, dialect: "duplex" } },
      options,
    );
    return {
      ...front,
      async stop() {
        await front.stop();
        await behind.stop();
      },
    };
  }
  return startSingleServer(overrides, options);
};

const startSingleServer = async (
  overrides: Record<string, unknown>,
  options: Parameters<typeof startServer>[1],
): Promise<RunningServer & { dataDir: string; stop(): Promise<void> }> => {
  const dataDir = await mkdtemp(join(tmpdir(), "duplex-test-"));
  const config = parseConfig({
    log_level: "silent",
    listen: { host: "127.0.0.1", port: 0 },
    event_store: { kind: "sqlite", path: join(dataDir, "duplex.sqlite") },
    ...overrides,
  });
  const server = await startServer(config, options);
  return {
    ...server,
    dataDir,
    async stop() {
      await server.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
};

/**
 * `startTestServer` with the scripted runner playing `lines` (a script in YAML, one line each; see
 * src/infra/runners/script.ts), written to a temp file that `stop()` removes too; `overrides` as startTestServer's.
 */
export const startScriptedServer = async (
  lines: readonly string[],
  overrides: Record<string, unknown> = {},
): Promise<Awaited<ReturnType<typeof startTestServer>>> => {
  const dir = await mkdtemp(join(tmpdir(), "duplex-script-"));
  const script = join(dir, "script.yaml");
  await writeFile(script, `${lines.join("\n")}\n`);
  const server = await startTestServer({ ...overrides, runner: { kind: "scripted", script } });
  return {
    ...server,
    async stop() {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
};
