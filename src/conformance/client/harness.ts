import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WebSocketServer } from "ws";
import type { RecordedEntry } from "../../engine/index.ts";
import { type CaseResult, createCaseRuns } from "./case-runs.ts";
import type { ClientCase } from "./cases.ts";
import { relayConnection } from "./relay.ts";

/**
 * The peer of client conformance (issue 23): our server with the client peer's model (conformance/client-peer.yaml),
 * behind a WebSocket relay on the public port that plays each connection's case: it forwards every frame, and does to
 * the connection what the case's actions say (inject an unknown event, add an unknown field, drop it, close it with a
 * code) when the server event that triggers them goes out. Each connection gets the next case, or the one its URL
 * names (`?case=ID`, or a path under `/case/ID/`); a connection whose first client event is `session.resume` belongs
 * to that session's case.
 * Grading reads each case's session from the server's log once the client is done.
 * This module starts and stops the peer; each connection's relay is relay.ts, the actions it plays case-actions.ts,
 * the runs and their grading case-runs.ts.
 */

export type { CaseResult, CaseRun } from "./case-runs.ts";

/** A running peer. */
export interface ClientHarness {
  /** `ws://HOST:PORT/v1/realtime`: where the client under test connects. */
  readonly url: string;
  /** Resolves once every case has a session that ended. */
  readonly allEnded: Promise<void>;
  /** Grades every case (one never run is harness-broken), stops the peer, and returns the results in case order. */
  finish(): Promise<{ results: CaseResult[]; logs: Map<string, RecordedEntry[]> }>;
}

/** What the peer plays and where it listens. */
export interface ClientHarnessOptions {
  readonly cases: readonly ClientCase[];
  readonly host: string;
  /** The public port (0: any free one). */
  readonly port: number;
  /** The client peer's script (conformance/client-peer.yaml). */
  readonly script: string;
  /** Profiles the client declared it does not do. */
  readonly unsupported: readonly string[];
  /** The sessions' disconnect grace, s (default 20: above the resume bound of 15 s). */
  readonly graceS?: number;
  /**
   * The sessions' idle timeout, s (`idle_ttl_s`; default 40: above the 30 s heartbeat interval the reference's
   * client uses). The `lease.idle` case asks the app to stay silent for longer.
   */
  readonly idleTtlS?: number;
  /** Progress lines: a case started or ended, a connection refused. */
  readonly log?: (line: string) => void;
}

/** Our server with the client peer's model, its log in a fresh temporary folder (removed by `close`). */
const startPeerServer = async (o: ClientHarnessOptions) => {
  const { parseConfig } = await import("../../infra/config.ts");
  const { startServer } = await import("../../server/index.ts");
  const dir = await mkdtemp(join(tmpdir(), "duplex-conform-client-"));
  const server = await startServer(
    parseConfig({
      log_level: "warn",
      listen: { host: "127.0.0.1", port: 0 },
      event_store: { kind: "sqlite", path: join(dir, "duplex.sqlite") },
      runner: { kind: "scripted", script: o.script },
      // A client that does not resume lets its session expire: `graceS` after a drop (the resume bound is 15 s).
      duplex_session: { max_sessions: 64, disconnect_grace_s: o.graceS ?? 20, idle_ttl_s: o.idleTtlS ?? 40 },
    }),
  );
  return {
    server,
    async close(): Promise<void> {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
};

/** Binds `http` to `port` on `host`. @throws Error saying to pick another port when it is in use. */
const listen = async (http: ReturnType<typeof createServer>, host: string, port: number): Promise<number> => {
  try {
    await new Promise<void>((resolve, reject) => {
      http.once("error", reject);
      http.listen(port, host, () => resolve());
    });
  } catch (error) {
    const code = (error as { code?: string }).code;
    throw new Error(
      code === "EADDRINUSE" ? `port ${port} on ${host} is in use: pick another with --port` : (error as Error).message,
    );
  }
  const address = http.address();
  return typeof address === "object" && address !== null ? address.port : port;
};

/** Starts the peer. @throws Error when a port cannot be bound or the server cannot start. */
export const startClientHarness = async (o: ClientHarnessOptions): Promise<ClientHarness> => {
  const peer = await startPeerServer(o);
  const upstreamBase = peer.server.url.replace(/\/v1\/realtime$/, "");
  const runs = createCaseRuns(o.cases, o.log);
  const stopWatch = runs.watch(peer.server.store);
  const http = createServer((_request, response) => {
    response
      .writeHead(426, { "content-type": "text/plain" })
      .end("the client conformance peer speaks WebSocket only\n");
  });
  const wss = new WebSocketServer({
    server: http,
    // The client's subprotocols (an SDK's "realtime", its key): the first one is answered, and all go upstream.
    handleProtocols: (protocols) => protocols.values().next().value ?? false,
  });
  wss.on("connection", (client, request) =>
    relayConnection({ cases: o.cases, upstreamBase, runs, log: o.log }, client, request),
  );
  let port: number;
  try {
    port = await listen(http, o.host, o.port);
  } catch (error) {
    stopWatch();
    await peer.close();
    throw error;
  }
  return {
    url: `ws://${o.host}:${port}/v1/realtime`,
    allEnded: runs.allEnded,
    async finish() {
      stopWatch();
      for (const c of wss.clients) c.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await new Promise<void>((resolve) => http.close(() => resolve()));
      const graded = await runs.grade(peer.server.store, o.unsupported);
      await peer.close();
      return graded;
    },
  };
};
