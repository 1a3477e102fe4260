import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseConfig } from "../../src/infra/config.ts";
import { type RunningServer, startServer } from "../../src/server/index.ts";

/** Test audio of ../shared/audio (never copied into the project). */
export const sharedAudio = (name: string): string => resolve(process.cwd(), "../shared/audio", name);

/** A real server on 127.0.0.1 port 0 with its own sqlite store in a temp folder. `stop()` closes and removes it. */
export const startTestServer = async (
  overrides: Record<string, unknown> = {},
  options: Parameters<typeof startServer>[1] = {},
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
