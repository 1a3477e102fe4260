import { mkdir, readFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { type Logger, pino } from "pino";
import type { ModelProfile } from "../domain/index.ts";
import {
  type AdmissionRefusal,
  createEngine,
  type Engine,
  type EventStore,
  type ModelRunner,
  NodeIdInUseError,
  type NodeLeases,
  type VadModel,
} from "../engine/index.ts";
import { createResampler, createSpeexStreamResampler } from "../infra/audio/index.ts";
import { ConfigError, type DeployConfig } from "../infra/config.ts";
import { openEventStore, writeSessionFile } from "../infra/event-store/index.ts";
import { createEchoRunner } from "../infra/runners/echo.ts";
import { resolveProfile, withModelProfile } from "../infra/runners/profile.ts";
import { loadScript } from "../infra/runners/script.ts";
import { createScriptedRunner } from "../infra/runners/scripted.ts";
import { createUpstreamRunner } from "../infra/runners/upstream/index.ts";
import { createSileroVad } from "../infra/vad/index.ts";
import { removeFinishedSessions } from "../replay/index.ts";
import { buildApp, buildMetricsApp } from "./app.ts";
import { diskGuardFor, type FreeBytes } from "./disk-guard.ts";
import { createMetrics, type ServerMetrics } from "./metrics.ts";
import type { RegisteredRoute } from "./route-access.ts";

/** A running server: its address, and `close()` which stops listening, drains sessions and closes the store. */
export interface RunningServer {
  /** The realtime endpoint: `wss://host:port/v1/realtime` when `listen.tls` is configured, else `ws://...`. */
  readonly url: string;
  readonly port: number;
  /** The model id this server serves (`GET /v1/models`): the runner's name, e.g. `echo` or `upstream:HOST:PORT`. */
  readonly model: string;
  readonly engine: Engine;
  readonly store: EventStore;
  /** Every route the server registered, with its declared access (src/server/route-access.ts). */
  readonly routes: () => readonly RegisteredRoute[];
  close(): Promise<void>;
}

/**
 * Wires the embedded node (DESIGN.md): sqlite event store, Silero VAD, the configured runner, the engine and the
 * fastify app, and listens. `port: 0` picks a free port (tests). With `listen.tls`, the certificate and key are
 * read before anything else is opened, and the server speaks HTTPS and `wss:`.
 * @throws ConfigError when a `listen.tls` file cannot be read; ConfigError-like errors from the adapters (model
 *   checksum, unreadable store path).
 */
export const startServer = async (
  config: DeployConfig,
  options: {
    firstMessageTimeoutMs?: number;
    /** A runner of the caller's instead of the configured one (embedding, tests); the profile still applies. */
    runner?: ModelRunner;
    /**
     * Wraps the configured store (embedding, tests: a store that injects faults); the server still opens, locks and
     * closes the configured one.
     */
    wrapStore?: (store: EventStore) => EventStore;
    /** Wraps the Silero VAD model (tests: a VAD whose answers are held back); the server still closes the model. */
    wrapVad?: (vad: VadModel) => VadModel;
    /**
     * How the sqlite store's disk is looked at (src/server/disk-guard.ts): its free bytes (default `fs.statfs`;
     * tests: a disk that fills up) and the ms between looks (default 5000).
     */
    disk?: { freeBytes?: FreeBytes; intervalMs?: number };
  } = {},
): Promise<RunningServer> => {
  const tls = config.listen.tls === undefined ? undefined : await readTlsFiles(config.listen.tls);
  const log = pino({
    level: config.log_level,
    // Nodes sharing a store are told apart in their logs by the node id.
    base:
      config.event_store.kind === "postgres"
        ? { service: "duplex", node: config.node.id ?? `${hostname()}-${process.pid}` }
        : { service: "duplex" },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
  // One server per sqlite file: refused before anything is read or written (an in-memory store is this process's
  // own). A PostgreSQL or KurrentDB store is shared by nodes.
  const nodeId = config.node.id ?? `${hostname()}-${process.pid}`;
  const metrics = createMetrics(config.event_store.kind === "postgres" ? nodeId : null);
  const {
    store: opened,
    where,
    unlock,
  } = await openEventStore(config.event_store, {
    groupCommitted: metrics.groupCommitted,
  });
  const store = options.wrapStore?.(opened) ?? opened;
  // The sqlite file's disk (issue 32, part 2): below its floors new sessions are refused, then open ones end.
  const disk = diskGuardFor(
    config.event_store,
    config.limits,
    log,
    (message) => engine.endAll("disk", message),
    options.disk,
  );
  // Nodes sharing a PostgreSQL store hold leases on its clock (issue 22, part 4); this one's is taken before it
  // recovers anything, so no other node takes its sessions meanwhile.
  const leases =
    config.event_store.kind === "postgres"
      ? await (await import("../infra/event-store/postgres.ts")).createPostgresNodeLeases({
          url: config.event_store.url,
          nodeId,
          leaseMs: config.node.lease_s * 1000,
        })
      : null;
  await leases?.claim();
  const silero = await createSileroVad();
  const vad = options.wrapVad?.(silero) ?? silero;
  const profile = config.runner.profile === undefined ? null : resolveProfile(config.runner.profile);
  const base = options.runner ?? (await createConfiguredRunner(config.runner, profile, log));
  const runner = profile === null ? base : withModelProfile(base, profile);
  const engine = createEngine({
    store,
    runner,
    vad,
    createResampler,
    createOutputResampler: createSpeexStreamResampler,
    model: runner.name,
    log,
    sessionMode: config.session_mode,
    observe: { ...metrics.observe, resumed: metrics.resumed },
    leases,
    // New sessions are refused on a full disk, and by a process whose node id another process took.
    admit: () => cluster?.refusal() ?? disk?.refusal() ?? null,
    limits: {
      maxSessions: config.duplex_session.max_sessions,
      idleTtlS: config.duplex_session.idle_ttl_s,
      disconnectGraceS: config.duplex_session.disconnect_grace_s,
      maxPendingInputBytes: config.duplex_session.max_pending_input_bytes_per_session,
      maxPendingTurns: config.duplex_session.max_pending_turns_per_session,
      responseTimeoutMs: config.duplex_session.response_timeout_ms,
      resumeReplayTtlS: config.duplex_session.resume_replay_ttl_s,
      resumeReplayMaxBytes: config.duplex_session.resume_replay_max_bytes,
      eventsPerS: config.limits.events_per_s,
      eventBurst: config.limits.event_burst,
      appendsPerS: config.limits.appends_per_s,
      appendBurst: config.limits.append_burst,
    },
  });
  metrics.bind(engine);
  // The port is bound before the log is recovered (a port in use fails before any session is touched); upgrades
  // wait for the recovery, so a client that resumes at once finds its session.
  let recovered: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    recovered = resolve;
  });
  let cluster: ReturnType<typeof keepLease> | null = null;
  warnShortKeys(config.auth.api_keys, log);
  const app = buildApp({
    ready,
    healthy: () => cluster?.healthy() ?? true,
    engine,
    store,
    log,
    model: runner.name,
    apiKeys: config.auth.api_keys,
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
    tls,
    metrics,
    trustProxy: config.listen.trust_proxy,
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
    metricsAccess: config.metrics.listen === undefined ? config.metrics.access : "elsewhere",
    ...(options.firstMessageTimeoutMs === undefined ? {} : { firstMessageTimeoutMs: options.firstMessageTimeoutMs }),
  });
  const metricsApp = config.metrics.listen === undefined ? null : buildMetricsApp(metrics, log);
  try {
    await app.listen({ host: config.listen.host, port: config.listen.port });
    await metricsApp?.listen({ host: config.metrics.listen?.host, port: config.metrics.listen?.port });
  } catch (error) {
    await app.close();
    await metricsApp?.close();
    await store.close();
    unlock();
    throw error;
  }
  const sessions = await engine.recover();
  if (sessions.length > 0) log.info({ sessions }, "sessions recovered from the log; waiting for resumes");
  // Looked at before the first upgrade is let in: a full disk refuses it, and ends the sessions just recovered.
  await disk?.start();
  recovered();
  cluster = leases === null ? null : keepLease(engine, leases, metrics, log);
  const retention = config.retention;
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
  const address = app.server.address();
  const port = typeof address === "object" && address !== null ? address.port : config.listen.port;
  const url = `${tls === undefined ? "ws" : "wss"}://${config.listen.host}:${port}/v1/realtime`;
  log.info(
    { url, store: where, runner: base.name, model: runner.name, profile: profile?.name ?? null },
    "duplex server listening",
  );
  return {
    url,
    port,
    routes: app.routeTable,
    model: runner.name,
    engine,
    store,
    async close() {
      clearInterval(sweeper);
      disk?.close();
      cluster?.stop();
      log.info({ sessions: engine.sessions().filter((h) => !h.isClosed).length }, "shutting down");
      await app.close();
      await metricsApp?.close();
      await engine.close();
      await silero.close();
      await leases?.release();
      await store.close();
      unlock();
    },
  };
};

/**
 * A node's part in a cluster (issue 22, part 4): renews its lease every third of it, and takes over, every half of
 * it, the open sessions of nodes whose lease ran out. A lease found expired (this node was paused past it) or not
 * renewed for a whole lease (the store out of reach) gives up every session held here: another node may own them
 * now, and their clients resume there.
 */
const keepLease = (
  engine: Engine,
  leases: NodeLeases,
  metrics: ServerMetrics,
  log: Logger,
): { healthy(): boolean; refusal(): AdmissionRefusal | null; stop(): void } => {
  let lastHeld = Date.now();
  let lost = false;
  /** Another process holds this node id now: this one serves nothing again (unhealthy, opens nothing, stops). */
  let displaced = false;
  const giveUp = (why: string): void => {
    const held = engine.sessions().filter((h) => !h.isClosed).length;
    log.error({ node: leases.nodeId, sessions: held }, `${why}: every session here is given up to the other nodes`);
    engine.relinquishAll(`${why}: resume the session to reach the node that holds it now`);
  };
  /** A renewal that takes longer than a third of the lease counts as failed: the store is out of reach. */
  const renewWithin = (ms: number): Promise<boolean> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer from the event store within ${ms} ms`)), ms);
      leases.renew().then(
        (held) => {
          clearTimeout(timer);
          resolve(held);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  let renewing = false;
  const renew = async (): Promise<void> => {
    if (renewing) return;
    renewing = true;
    try {
      const held = await renewWithin(Math.max(50, leases.leaseMs / 3));
      metrics.leaseRenewed(held ? "held" : "expired");
      if (!held && !lost) giveUp("this node's lease had expired");
      lastHeld = Date.now();
      lost = false;
    } catch (error) {
      metrics.leaseRenewed("failed");
      if (error instanceof NodeIdInUseError) {
        if (displaced) return;
        displaced = true;
        lost = true;
        clearInterval(renewer);
        clearInterval(sweeper);
        giveUp(`another process took this node's id (${leases.nodeId}) while its lease had run out; stop this process`);
        return;
      }
      log.warn({ err: error, node: leases.nodeId }, "lease renewal failed: the event store is out of reach");
      if (!lost && Date.now() - lastHeld > leases.leaseMs) {
        lost = true;
        giveUp("this node lost its event store for longer than its lease");
      }
    } finally {
      renewing = false;
    }
  };
  const sweep = async (): Promise<void> => {
    if (lost) return;
    try {
      const taken = await engine.sweep();
      if (taken.length > 0) log.info({ sessions: taken }, "sessions taken over from nodes whose lease expired");
    } catch (error) {
      log.warn({ err: error }, "takeover sweep failed");
    }
  };
  const renewer = setInterval(() => void renew(), Math.max(50, leases.leaseMs / 3));
  const sweeper = setInterval(() => void sweep(), Math.max(100, leases.leaseMs / 2));
  renewer.unref();
  sweeper.unref();
  return {
    healthy: () => !lost,
    refusal: () =>
      displaced
        ? {
            code: "resource_exhausted" as const,
            message: `this process no longer holds node id ${leases.nodeId}: connect to another node`,
          }
        : null,
    stop() {
      clearInterval(renewer);
      clearInterval(sweeper);
    },
  };
};

/** Reads the PEM certificate and key named by `listen.tls`. @throws ConfigError naming the unreadable file. */
const readTlsFiles = async (paths: { cert: string; key: string }): Promise<{ cert: Buffer; key: Buffer }> => {
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
const warnShortKeys = (keys: readonly string[], log: Logger): void => {
  keys.forEach((key, index) => {
    if (key.length < MIN_KEY_LENGTH)
      log.warn(
        { key_index: index, length: key.length },
        `auth.api_keys[${index}] is shorter than ${MIN_KEY_LENGTH} characters: use a long random key`,
      );
  });
};
