import { pino } from "pino";
import { createEngine, type Engine, type EventStore } from "../engine/index.ts";
import { createResampler } from "../infra/audio/index.ts";
import type { DeployConfig } from "../infra/config.ts";
import { createSqliteEventStore } from "../infra/event-store/index.ts";
import { createEchoRunner } from "../infra/runners/echo.ts";
import { loadScript } from "../infra/runners/script.ts";
import { createScriptedRunner } from "../infra/runners/scripted.ts";
import { createSileroVad } from "../infra/vad/index.ts";
import { buildApp } from "./app.ts";

/** A running server: its address, and `close()` which stops listening, drains sessions and closes the store. */
export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly engine: Engine;
  readonly store: EventStore;
  close(): Promise<void>;
}

/**
 * Wires the embedded node (DESIGN.md): sqlite event store, Silero VAD, the configured runner, the engine and the
 * fastify app, and listens. `port: 0` picks a free port (tests).
 * @throws ConfigError-like errors from the adapters (model checksum, unreadable store path).
 */
export const startServer = async (
  config: DeployConfig,
  options: { firstMessageTimeoutMs?: number } = {},
): Promise<RunningServer> => {
  const log = pino({ level: config.log_level, base: { service: "duplex" } });
  const store = createSqliteEventStore({ path: config.event_store.path });
  const vad = await createSileroVad();
  const runner =
    config.runner.kind === "echo"
      ? createEchoRunner({ chunkPeriodMs: config.runner.chunk_period_ms, speedFactor: config.runner.speed_factor })
      : createScriptedRunner(await loadScript(config.runner.script));
  const engine = createEngine({
    store,
    runner,
    vad,
    createResampler,
    model: runner.name,
    log,
    limits: {
      maxSessions: config.duplex_session.max_sessions,
      idleTtlS: config.duplex_session.idle_ttl_s,
      disconnectGraceS: config.duplex_session.disconnect_grace_s,
    },
  });
  const app = buildApp({ engine, log, model: runner.name, apiKeys: config.auth.api_keys, ...options });
  await app.listen({ host: config.listen.host, port: config.listen.port });
  const address = app.server.address();
  const port = typeof address === "object" && address !== null ? address.port : config.listen.port;
  const url = `ws://${config.listen.host}:${port}/v1/realtime`;
  log.info({ url, store: config.event_store.path, runner: runner.name }, "duplex server listening");
  return {
    url,
    port,
    engine,
    store,
    async close() {
      await app.close();
      await engine.close();
      await vad.close();
      await store.close();
    },
  };
};
