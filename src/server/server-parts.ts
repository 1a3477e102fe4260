import { mkdir, readFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { type Logger, pino } from "pino";
import type { ModelProfile } from "../domain/index.ts";
import type { EngineDeps, EventStore, ModelRunner, NodeLeases } from "../engine/index.ts";
import { createResampler, createSpeexStreamResampler } from "../infra/audio/index.ts";
import { ConfigError, type DeployConfig } from "../infra/config.ts";
import { writeSessionFile } from "../infra/event-store/index.ts";
import { readSessionFile } from "../infra/event-store/session-file.ts";
import { createEchoRunner } from "../infra/runners/echo.ts";
import { resolveProfile, withModelProfile } from "../infra/runners/profile.ts";
import { createRecordedRunner } from "../infra/runners/recorded.ts";
import { loadScript } from "../infra/runners/script.ts";
import { createScriptedRunner } from "../infra/runners/scripted.ts";
import { createUpstreamRunner } from "../infra/runners/upstream/index.ts";
import { removeFinishedSessions } from "../replay/index.ts";
import type { AppOptions } from "./app.ts";

/**
 * The parts `startServer` assembles from a deployment's configuration (docs/deploy.md): its logger, the engine's
 * and the app's limits, the configured runner, the TLS files, the retention sweep, the warning of short keys.
 */

/** The server's pino logger at `log_level`; nodes sharing a store are told apart in their logs by the node id. */
export const serverLogger = (config: DeployConfig): Logger =>
  pino({
    level: config.log_level,
    base:
      config.event_store.kind === "postgres"
        ? { service: "duplex", node: config.node.id ?? `${hostname()}-${process.pid}` }
        : { service: "duplex" },
    timestamp: pino.stdTimeFunctions.isoTime,
  });

/**
 * The engine's parts a configuration decides: its store, runner, VAD, resamplers, model name, log, session mode,
 * node leases and limits (the caller adds the observer and admission).
 */
export const engineDepsOf = (
  config: DeployConfig,
  parts: Pick<EngineDeps, "store" | "runner" | "vad" | "log" | "leases">,
): Omit<EngineDeps, "observe" | "admit"> => ({
  ...parts,
  createResampler,
  createOutputResampler: createSpeexStreamResampler,
  model: parts.runner.name,
  sessionMode: config.session_mode,
  limits: engineLimitsOf(config),
});

/**
 * Nodes sharing a PostgreSQL store hold leases on its clock (issue 22, part 4): this node's, as `nodeId`; null for a
 * store of one node's own.
 */
export const nodeLeasesOf = async (config: DeployConfig, nodeId: string): Promise<NodeLeases | null> =>
  config.event_store.kind === "postgres"
    ? (await import("../infra/event-store/postgres.ts")).createPostgresNodeLeases({
        url: config.event_store.url,
        nodeId,
        leaseMs: config.node.lease_s * 1000,
      })
    : null;

/**
 * The runner the server serves: the caller's (`given`) or the configured one (`base`), wrapped in the configured
 * model profile (`runner`).
 */
export const runnerOf = async (
  config: DeployConfig,
  given: ModelRunner | undefined,
  log: Logger,
): Promise<{ profile: ModelProfile | null; base: ModelRunner; runner: ModelRunner }> => {
  const profile = config.runner.profile === undefined ? null : resolveProfile(config.runner.profile);
  const base = given ?? (await createConfiguredRunner(config.runner, profile, log));
  return { profile, base, runner: profile === null ? base : withModelProfile(base, profile) };
};

/**
 * Binds the app's port (and the metrics app's, when it has its own): on a failure both are closed, then
 * `closeStore`, and the error is thrown (a port in use fails before any session is touched).
 */
export const listenOrClose = async (
  config: DeployConfig,
  app: { listen(o: { host: string; port: number }): Promise<unknown>; close(): Promise<unknown> },
  metricsApp: { listen(o: { host?: string; port?: number }): Promise<unknown>; close(): Promise<unknown> } | null,
  closeStore: () => Promise<void>,
): Promise<void> => {
  try {
    await app.listen({ host: config.listen.host, port: config.listen.port });
    await metricsApp?.listen({ host: config.metrics.listen?.host, port: config.metrics.listen?.port });
  } catch (error) {
    await app.close();
    await metricsApp?.close();
    await closeStore();
    throw error;
  }
};

/** The engine's limits from `duplex_session` and `limits` (seconds and bytes as configured; the engine's units). */
export const engineLimitsOf = (config: DeployConfig): NonNullable<EngineDeps["limits"]> => ({
  maxSessions: config.duplex_session.max_sessions,
  idleTtlS: config.duplex_session.idle_ttl_s,
  disconnectGraceS: config.duplex_session.disconnect_grace_s,
  maxPendingInputBytes: config.duplex_session.max_pending_input_bytes_per_session,
  maxPendingTurns: config.duplex_session.max_pending_turns_per_session,
  responseTimeoutMs: config.duplex_session.response_timeout_ms,
  maxLifetimeS: config.duplex_session.max_session_lifetime_s,
  resumeReplayTtlS: config.duplex_session.resume_replay_ttl_s,
  resumeReplayMaxBytes: config.duplex_session.resume_replay_max_bytes,
  eventsPerS: config.limits.events_per_s,
  eventBurst: config.limits.event_burst,
  appendsPerS: config.limits.appends_per_s,
  appendBurst: config.limits.append_burst,
});

/**
 * What the app takes from the configuration: the API keys, the limits (`appLimitsOf`), the proxies it trusts, where
 * `/metrics` is served, and a first-message timeout of the caller's.
 */
export const appOptionsOf = (
  config: DeployConfig,
  options: { readonly firstMessageTimeoutMs?: number },
): Pick<
  AppOptions,
  "apiKeys" | "authLockout" | "outputLimits" | "listen" | "trustProxy" | "metricsAccess" | "firstMessageTimeoutMs"
> => ({
  apiKeys: config.auth.api_keys,
  ...appLimitsOf(config),
  trustProxy: config.listen.trust_proxy,
  metricsAccess: config.metrics.listen === undefined ? config.metrics.access : "elsewhere",
  ...(options.firstMessageTimeoutMs === undefined ? {} : { firstMessageTimeoutMs: options.firstMessageTimeoutMs }),
});

/** The app's limits: the auth lockout, the output buffer limits and the listener's caps. */
export const appLimitsOf = (config: DeployConfig): Pick<AppOptions, "authLockout" | "outputLimits" | "listen"> => ({
  authLockout:
    config.auth.max_failed_attempts === null
      ? null
      : {
          maxFailures: config.auth.max_failed_attempts,
          windowS: config.auth.failed_attempts_window_s,
          lockoutS: config.auth.lockout_s,
        },
  outputLimits: {
    maxBytes: config.duplex_session.max_output_buffer_bytes,
    maxEvents: config.duplex_session.max_output_buffer_events,
  },
  listen: {
    host: config.listen.host,
    allowedHosts: config.listen.allowed_hosts,
    allowedOrigins: config.listen.allowed_origins,
    maxConnections: config.listen.max_connections,
    maxConnectionsPerAddress: config.listen.max_connections_per_address,
    requestTimeoutMs: config.listen.request_timeout_s * 1000,
    httpBodyBytes: config.limits.http_body_bytes,
    requestAudioS: config.limits.request_audio_s,
  },
});

/**
 * The retention sweep (`retention`, docs/deploy.md): finished sessions older than `older_than` removed now and every
 * hour, each exported first to `export_dir` when set; a failed sweep is logged and keeps the logs. `stop()` ends it.
 */
export const startRetentionSweep = async (
  store: EventStore,
  retention: DeployConfig["retention"],
  log: Logger,
): Promise<{ stop(): void }> => {
  const sweep = async (): Promise<void> => {
    if (retention === undefined) return;
    const exportDir = retention.export_dir;
    const { removed } = await removeFinishedSessions(store, {
      olderThanMs: retention.older_than,
      now: Date.now(),
      ...(exportDir === undefined
        ? {}
        : {
            keep: async (id, stream, entries) => {
              await mkdir(exportDir, { recursive: true });
              await writeSessionFile(join(exportDir, `${id}.jsonl`), stream, entries);
            },
          }),
    });
    if (removed.length > 0)
      log.info({ removed: removed.length, exportDir: exportDir ?? null }, "retention: finished sessions removed");
  };
  const sweepFailed = (error: unknown) => log.warn({ err: error }, "retention sweep failed; logs kept");
  await sweep().catch(sweepFailed);
  const sweeper = setInterval(() => void sweep().catch(sweepFailed), 3_600_000);
  sweeper.unref();
  return { stop: () => clearInterval(sweeper) };
};

/** Reads the PEM certificate and key named by `listen.tls`. @throws ConfigError naming the unreadable file. */
export const readTlsFiles = async (paths: { cert: string; key: string }): Promise<{ cert: Buffer; key: Buffer }> => {
  const read = async (key: "cert" | "key"): Promise<Buffer> => {
    try {
      return await readFile(paths[key]);
    } catch (error) {
      throw new ConfigError(`listen.tls.${key}: cannot read ${paths[key]}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  };
  return { cert: await read("cert"), key: await read("key") };
};

/**
 * The runner a deployment configures. @throws ConfigError when an upstream's `api_key_env` names an unset variable;
 *   ScriptError when a script cannot be read.
 */
export const createConfiguredRunner = async (
  runner: DeployConfig["runner"],
  profile: ModelProfile | null,
  log?: { info(obj: object, msg: string): void },
): Promise<ModelRunner> => {
  switch (runner.kind) {
    case "echo":
      return createEchoRunner({
        chunkPeriodMs: runner.chunk_period_ms ?? profile?.chunkPeriodMs ?? 200,
        speedFactor: runner.speed_factor,
      });
    case "scripted":
      return createScriptedRunner(await loadScript(runner.script));
    case "recorded": {
      let entries: Awaited<ReturnType<typeof readSessionFile>>["entries"];
      try {
        entries = (await readSessionFile(runner.log)).entries;
      } catch (error) {
        throw new ConfigError(`runner.log: cannot read ${runner.log}: ${(error as Error).message}`, { cause: error });
      }
      return createRecordedRunner(entries);
    }
    case "upstream": {
      const apiKey = runner.api_key_env === undefined ? undefined : process.env[runner.api_key_env];
      if (runner.api_key_env !== undefined && (apiKey === undefined || apiKey === "")) {
        throw new ConfigError(`runner.api_key_env: the environment variable ${runner.api_key_env} is not set`);
      }
      let ca: Buffer | undefined;
      if (runner.ca_file !== undefined) {
        try {
          ca = await readFile(runner.ca_file);
        } catch (error) {
          throw new ConfigError(`runner.ca_file: cannot read ${runner.ca_file}: ${(error as Error).message}`, {
            cause: error,
          });
        }
      }
      return createUpstreamRunner({
        url: runner.url,
        vad: runner.vad,
        heartbeatMs: runner.heartbeat_ms,
        ...(ca === undefined ? {} : { ca }),
        dialect: runner.dialect,
        headers: runner.headers,
        connectTimeoutMs: runner.connect_timeout_ms,
        resume: {
          graceMs: runner.resume.grace_ms,
          initialDelayMs: runner.resume.initial_delay_ms,
          maxDelayMs: runner.resume.max_delay_ms,
        },
        ...(runner.model === undefined ? {} : { model: runner.model }),
        ...(apiKey === undefined ? {} : { apiKey }),
        ...(log === undefined
          ? {}
          : { onRetry: (retry) => log.info({ upstream: runner.url, ...retry }, "upstream resume retried") }),
      });
    }
    default: {
      const unhandled: never = runner;
      throw new Error(`unhandled runner ${JSON.stringify(unhandled)}`);
    }
  }
};

/** Keys shorter than this are guessable at the network's speed despite the lockout: warned about at start-up. */
const MIN_KEY_LENGTH = 32;

/** One warning per short key of `auth.api_keys`, naming its position in the list, never the key. */
export const warnShortKeys = (keys: readonly string[], log: Logger): void => {
  keys.forEach((key, index) => {
    if (key.length < MIN_KEY_LENGTH)
      log.warn(
        { key_index: index, length: key.length },
        `auth.api_keys[${index}] is shorter than ${MIN_KEY_LENGTH} characters: use a long random key`,
      );
  });
};
