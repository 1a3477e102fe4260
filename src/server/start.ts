import { hostname } from "node:os";
import type { Logger } from "pino";
import {
  createEngine,
  type Engine,
  type EventStore,
  type ModelRunner,
  type NodeLeases,
  type VadModel,
} from "../engine/index.ts";
import type { DeployConfig } from "../infra/config.ts";
import { openEventStore } from "../infra/event-store/index.ts";
import { createSileroVad } from "../infra/vad/index.ts";
import { buildApp, buildMetricsApp } from "./app.ts";
import { diskGuardFor, type FreeBytes } from "./disk-guard.ts";
import { createMetrics } from "./metrics.ts";
import { keepNodeLease } from "./node-lease.ts";
import type { RegisteredRoute } from "./route-access.ts";
import {
  appOptionsOf,
  engineDepsOf,
  listenOrClose,
  nodeLeasesOf,
  readTlsFiles,
  runnerOf,
  serverLogger,
  startRetentionSweep,
  warnShortKeys,
} from "./server-parts.ts";

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

/** What a caller of `startServer` may set beyond the configuration (embedding, tests). */
export interface StartOptions {
  readonly firstMessageTimeoutMs?: number;
  /** A runner of the caller's instead of the configured one (embedding, tests); the profile still applies. */
  readonly runner?: ModelRunner;
  /**
   * Wraps the configured store (embedding, tests: a store that injects faults); the server still opens, locks and
   * closes the configured one.
   */
  readonly wrapStore?: (store: EventStore) => EventStore;
  /** Wraps the Silero VAD model (tests: a VAD whose answers are held back); the server still closes the model. */
  readonly wrapVad?: (vad: VadModel) => VadModel;
  /**
   * How the sqlite store's disk is looked at (src/server/disk-guard.ts): its free bytes (default `fs.statfs`;
   * tests: a disk that fills up) and the ms between looks (default 5000).
   */
  readonly disk?: { freeBytes?: FreeBytes; intervalMs?: number };
}

/**
 * Wires the embedded node (DESIGN.md): sqlite event store, Silero VAD, the configured runner, the engine and the
 * fastify app, and listens. `port: 0` picks a free port (tests). With `listen.tls`, the certificate and key are
 * read before anything else is opened, and the server speaks HTTPS and `wss:`.
 * @throws ConfigError when a `listen.tls` file cannot be read; ConfigError-like errors from the adapters (model
 *   checksum, unreadable store path).
 */
export const startServer = async (config: DeployConfig, options: StartOptions = {}): Promise<RunningServer> => {
  const tls = config.listen.tls === undefined ? undefined : await readTlsFiles(config.listen.tls);
  const log = serverLogger(config);
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
  const leases = await nodeLeasesOf(config, nodeId);
  await leases?.claim();
  const silero = await createSileroVad();
  const vad = options.wrapVad?.(silero) ?? silero;
  const { profile, base, runner } = await runnerOf(config, options.runner, log);
  const engine = createEngine({
    ...engineDepsOf(config, { store, runner, vad, log, leases }),
    observe: { ...metrics.observe, resumed: metrics.resumed },
    // New sessions are refused on a full disk, and by a process whose node id another process took.
    admit: () => cluster?.refusal() ?? disk?.refusal() ?? null,
  });
  metrics.bind(engine);
  // The port is bound before the log is recovered (a port in use fails before any session is touched); upgrades
  // wait for the recovery, so a client that resumes at once finds its session.
  let recovered: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    recovered = resolve;
  });
  let cluster: ReturnType<typeof keepNodeLease> | null = null;
  warnShortKeys(config.auth.api_keys, log);
  const app = buildApp({
    ready,
    healthy: () => cluster?.healthy() ?? true,
    engine,
    store,
    log,
    model: runner.name,
    tls,
    metrics,
    ...appOptionsOf(config, options),
  });
  const metricsApp = config.metrics.listen === undefined ? null : buildMetricsApp(metrics, log);
  await listenOrClose(config, app, metricsApp, async () => {
    await store.close();
    unlock();
  });
  const sessions = await engine.recover();
  if (sessions.length > 0) log.info({ sessions }, "sessions recovered from the log; waiting for resumes");
  // Looked at before the first upgrade is let in: a full disk refuses it, and ends the sessions just recovered.
  await disk?.start();
  recovered();
  cluster = leases === null ? null : keepNodeLease(engine, leases, metrics, log);
  const sweeper = await startRetentionSweep(store, config.retention, log);
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
    close: () => closeServer({ sweeper, disk, cluster, log, engine, app, metricsApp, silero, leases, store, unlock }),
  };
};

/**
 * Stops a running server in order: the sweeps and the lease, then the listeners, the engine (which drains its
 * sessions), the VAD model, this node's lease, the store and its lock.
 */
const closeServer = async (parts: {
  sweeper: { stop(): void };
  disk: { close(): void } | null;
  cluster: { stop(): void } | null;
  log: Logger;
  engine: Engine;
  app: { close(): Promise<unknown> };
  metricsApp: { close(): Promise<unknown> } | null;
  silero: { close(): Promise<void> };
  leases: NodeLeases | null;
  store: EventStore;
  unlock: () => void;
}): Promise<void> => {
  parts.sweeper.stop();
  parts.disk?.close();
  parts.cluster?.stop();
  parts.log.info({ sessions: parts.engine.sessions().filter((h) => !h.isClosed).length }, "shutting down");
  await parts.app.close();
  await parts.metricsApp?.close();
  await parts.engine.close();
  await parts.silero.close();
  await parts.leases?.release();
  await parts.store.close();
  parts.unlock();
};

export { createConfiguredRunner } from "./server-parts.ts";
