import Fastify, { LogController } from "fastify";
import type { Logger } from "pino";
import { WebSocketServer } from "ws";
import type { Engine } from "../engine/index.ts";
import { capabilitiesJson, dialectOf } from "../protocol/index.ts";
import type { ServerMetrics } from "./metrics.ts";
import { type OutputLimits, readRealtimeQuery, serveRealtimeSocket } from "./realtime-socket.ts";

/** WebSocket paths of the realtime endpoint (DESIGN.md, src/server): /v1/realtime and its alias /v1/duplex. */
export const REALTIME_PATHS: readonly string[] = ["/v1/realtime", "/v1/duplex"];

/** Frames up to this size reach the codec, which refuses those over 15 MiB with `event_too_large`. */
const WS_MAX_PAYLOAD = 64 * 1024 * 1024;

export interface AppOptions {
  readonly engine: Engine;
  readonly log: Logger;
  readonly model: string;
  readonly apiKeys?: readonly string[];
  readonly firstMessageTimeoutMs?: number;
  /** Output buffer per socket (2 MiB / 512 events when absent). */
  readonly outputLimits?: OutputLimits;
  readonly metrics?: ServerMetrics;
  /** Resolves once the sessions of the log are recovered: WebSocket upgrades wait for it (absent: at once). */
  readonly ready?: Promise<void>;
  /** PEM certificate and private key (contents, not paths): serve HTTPS and `wss:`. Absent: plain HTTP and `ws:`. */
  readonly tls?: { readonly cert: string | Buffer; readonly key: string | Buffer };
}

/**
 * Builds the fastify app: `GET /health`, `GET /metrics`, `GET /v1/models`, 426 Upgrade Required for a plain `GET` of
 * a realtime path, and the WebSocket upgrade on the realtime paths
 * (through `ws` with `noServer`, so the handshake stays ours), over TLS when `options.tls` is given.
 * Listening is the caller's.
 */
export const buildApp = (options: AppOptions) => {
  // `https: null` is fastify's documented plain-HTTP case of its https overload; both servers emit `upgrade`.
  const app = Fastify({
    loggerInstance: options.log,
    // Requests are logged at debug below (health checks and scrapes would flood info).
    logController: new LogController({ disableRequestLogging: true }),
    https: options.tls === undefined ? null : { cert: options.tls.cert, key: options.tls.key },
  });
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: WS_MAX_PAYLOAD,
    handleProtocols: (protocols) => (protocols.has("realtime") ? "realtime" : false),
  });

  app.addHook("onResponse", async (request, reply) => {
    request.log.debug({ url: request.url, statusCode: reply.statusCode, ms: reply.elapsedTime }, "request");
  });
  app.get("/health", async () => ({ status: "ok", sessions: options.engine.sessions().length }));
  app.get("/metrics", async (_request, reply) => {
    if (options.metrics === undefined) return reply.code(404).send({ error: "metrics are not enabled" });
    return reply.type(options.metrics.registry.contentType).send(await options.metrics.registry.metrics());
  });
  app.get("/v1/models", async () => ({
    object: "list",
    data: [
      {
        id: options.model,
        object: "model",
        owned_by: "duplex-server",
        capabilities: capabilitiesJson(options.engine.capabilities),
      },
    ],
  }));

  // A plain GET of the realtime endpoint (a browser, curl, a client without WebSocket support) learns what to do.
  for (const path of REALTIME_PATHS) {
    app.get(path, async (_request, reply) =>
      reply
        .code(426)
        .header("Upgrade", "websocket")
        .send({
          error: {
            type: "invalid_request_error",
            code: "upgrade_required",
            message: `${path} is a WebSocket endpoint (OpenAI Realtime API): connect with ws:// or wss:// and an Upgrade: websocket request`,
          },
        }),
    );
  }

  app.server.on("upgrade", (request, socket, head) => {
    const url = new URL(request.url ?? "/", "http://localhost");
    if (!REALTIME_PATHS.includes(url.pathname)) {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n");
      return;
    }
    const keys = options.apiKeys ?? [];
    if (keys.length > 0) {
      const bearer = request.headers.authorization?.replace(/^Bearer\s+/i, "");
      const header = request.headers["api-key"];
      const offered = (request.headers["sec-websocket-protocol"] ?? "")
        .split(",")
        .map((p) => p.trim())
        .find((p) => p.startsWith("openai-insecure-api-key."))
        ?.slice("openai-insecure-api-key.".length);
      const key = bearer ?? (typeof header === "string" ? header : undefined) ?? offered;
      if (key === undefined || !keys.includes(key)) {
        options.log.info({ code: "unauthorized", path: url.pathname }, "upgrade refused: missing or invalid API key");
        // Refused before any session exists, at the HTTP level, so every client can read why.
        const body = JSON.stringify({
          type: "error",
          error: {
            type: "invalid_request_error",
            code: "unauthorized",
            message: "missing or invalid API key",
            param: null,
            event_id: null,
          },
        });
        socket.end(
          `HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
        return;
      }
    }
    void (options.ready ?? Promise.resolve()).then(() =>
      wss.handleUpgrade(request, socket, head, (ws) => {
        serveRealtimeSocket(ws, options.engine, options.log, {
          firstMessageTimeoutMs: options.firstMessageTimeoutMs,
          ...(options.outputLimits === undefined ? {} : { outputLimits: options.outputLimits }),
          dialect: dialectOf(request.headers),
          query: readRealtimeQuery(url.searchParams),
        });
      }),
    );
  });
  // Upgraded sockets hold the HTTP server open: end them before it closes (a shutdown is a disconnect for every
  // client; their sessions stay open in the log and resume after a restart).
  app.addHook("preClose", async () => {
    // 1012 (service restart) with a reason, not a dropped connection (1006): clients know to resume after it.
    const open = [...wss.clients];
    const closed = Promise.all(open.map((c) => new Promise<void>((resolve) => c.once("close", () => resolve()))));
    for (const client of open) client.close(1012, "server shutting down; resume the session after the restart");
    // A client that does not answer the closing handshake within a second is cut off.
    const timer = setTimeout(() => {
      for (const client of open) client.terminate();
    }, 1000);
    await closed;
    clearTimeout(timer);
    wss.close();
  });
  return app;
};
