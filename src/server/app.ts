import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import Fastify, { type FastifyReply, type FastifyRequest, LogController } from "fastify";
import type { Logger } from "pino";
import { WebSocketServer } from "ws";
import type { Engine, EventStore } from "../engine/index.ts";
import { capabilitiesJson, dialectOf, handshakeErrorBody } from "../protocol/index.ts";
import { type AuthRefusal, createAuthGate, type TrustProxy } from "./auth-gate.ts";
import type { AuthLockoutOptions } from "./auth-lockout.ts";
import { chatCompletionsHandler } from "./chat-completions.ts";
import type { ServerMetrics } from "./metrics.ts";
import { type OutputLimits, readRealtimeQuery, serveRealtimeSocket } from "./realtime-socket.ts";
import { sessionsApi } from "./sessions-api.ts";

/** WebSocket paths of the realtime endpoint (DESIGN.md, src/server): /v1/realtime and its alias /v1/duplex. */
export const REALTIME_PATHS: readonly string[] = ["/v1/realtime", "/v1/duplex"];

/** Frames up to this size reach the codec, which refuses those over 15 MiB with `event_too_large`. */
const WS_MAX_PAYLOAD = 64 * 1024 * 1024;

export interface AppOptions {
  readonly engine: Engine;
  /** The event store: the session API (`/v1/sessions`) reads the logs from it (absent: no session API). */
  readonly store?: EventStore;
  readonly log: Logger;
  readonly model: string;
  /**
   * Keys an upgrade and every `/v1/*` request must offer (absent or empty: no authentication); compared in constant
   * time. `/health` stays open; `/metrics` as `metricsAuth` says.
   */
  readonly apiKeys?: readonly string[];
  /** Refuse an address with 429 for a while after repeated failed key checks (absent or null: never). */
  readonly authLockout?: AuthLockoutOptions | null;
  /** fastify's `trustProxy`: whose `X-Forwarded-For` names the client's address (absent: none; the peer's). */
  readonly trustProxy?: TrustProxy;
  /**
   * `/metrics` on this app: `open` (default, as Prometheus scrapers expect), `api_keys` (a key as for `/v1`), or
   * `elsewhere` (not here: served on a listen address of its own, see `buildMetricsApp`).
   */
  readonly metricsAccess?: "open" | "api_keys" | "elsewhere";
  readonly firstMessageTimeoutMs?: number;
  /** Output buffer per socket (2 MiB / 512 events when absent). */
  readonly outputLimits?: OutputLimits;
  readonly metrics?: ServerMetrics;
  /** Whether this node can serve (false: it lost its shared event store); `/health` answers 503 then. */
  readonly healthy?: () => boolean;
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
    // fastify's own lines (its "Server listening at ...") are not ours to print: the server logs one "listening".
    loggerInstance: options.log.child({}, { level: "warn" }),
    // Requests are logged at debug below (health checks and scrapes would flood info).
    logController: new LogController({ disableRequestLogging: true }),
    https: options.tls === undefined ? null : { cert: options.tls.cert, key: options.tls.key },
  });
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: WS_MAX_PAYLOAD,
    handleProtocols: (protocols) => (protocols.has("realtime") ? "realtime" : false),
  });

  const gate = createAuthGate({
    apiKeys: options.apiKeys ?? [],
    lockout: options.authLockout ?? null,
    trustProxy: options.trustProxy ?? false,
    log: options.log,
  });
  const metricsAccess = options.metricsAccess ?? "open";
  app.addHook("onResponse", async (request, reply) => {
    options.log.debug({ url: request.url, statusCode: reply.statusCode, ms: reply.elapsedTime }, "request");
  });
  // Every /v1 route needs a key when keys are configured (the upgrade is checked on its own, below).
  app.addHook("onRequest", async (request, reply) => {
    const path = request.url.split("?")[0] ?? "";
    // The session pages show what the session API serves: behind the same keys.
    const gated = path.startsWith("/v1/") || path === "/sessions" || path.startsWith("/sessions/");
    if (!gated && !(path === "/metrics" && metricsAccess === "api_keys")) return;
    const refusal = await gate.check(request.raw);
    if (refusal !== null) {
      return reply
        .code(refusal.status)
        .headers(refusal.headers)
        .send(handshakeErrorBody(refusal.code, refusal.message));
    }
  });
  // 503 once this node lost its shared store past its lease (issue 22): a proxy in front sends clients elsewhere.
  app.get("/health", async (_request, reply) =>
    (options.healthy?.() ?? true)
      ? { status: "ok", sessions: options.engine.sessions().length }
      : reply.code(503).send({ status: "store_lost", sessions: options.engine.sessions().length }),
  );
  if (metricsAccess !== "elsewhere" && options.metrics !== undefined)
    app.get("/metrics", metricsHandler(options.metrics));
  // OpenAI's model object (`models.list()`, `models.retrieve()` of the SDKs read it), with the capabilities beside.
  // `created`: when this server started (Unix seconds); the model is the one it serves.
  const created = Math.floor(Date.now() / 1000);
  const model = () => ({
    id: options.model,
    object: "model",
    created,
    owned_by: "duplex-server",
    capabilities: capabilitiesJson(options.engine.capabilities),
  });
  app.get("/v1/models", async () => ({ object: "list", data: [model()] }));
  app.get<{ Params: { id: string } }>("/v1/models/:id", async (request, reply) =>
    request.params.id === options.model
      ? model()
      : reply
          .code(404)
          .send(
            handshakeErrorBody("model_not_found", `no model ${request.params.id}; this server serves ${options.model}`),
          ),
  );

  app.post(
    "/v1/chat/completions",
    chatCompletionsHandler({ engine: options.engine, model: options.model, log: options.log }),
  );

  if (options.store !== undefined) {
    const api = sessionsApi({ engine: options.engine, store: options.store });
    app.get("/v1/sessions", api.list);
    app.get("/v1/sessions/:id", api.show);
    app.get("/v1/sessions/:id/export", api.exported);
    app.get("/v1/sessions/:id/events", api.events);
    app.get("/v1/sessions/:id/input.wav", api.inputWav);
    app.get("/v1/sessions/:id/timeline.json", api.timeline);
    app.get("/sessions", api.pages);
    app.get("/sessions/:id", api.page);
    app.get("/v1/sessions/:id/responses/:file", api.responseWav);
  }

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
    void (async () => {
      // Refused before any session exists, at the HTTP level, so every client can read why.
      const refusal = await gate.check(request);
      if (refusal !== null) {
        refuseUpgrade(socket, refusal);
        return;
      }
      await (options.ready ?? Promise.resolve());
      wss.handleUpgrade(request, socket, head, (ws) => {
        serveRealtimeSocket(ws, options.engine, options.log, {
          firstMessageTimeoutMs: options.firstMessageTimeoutMs,
          ...(options.outputLimits === undefined ? {} : { outputLimits: options.outputLimits }),
          dialect: dialectOf(request.headers),
          query: readRealtimeQuery(url.searchParams),
          remote: { address: gate.addressOf(request), userAgent: request.headers["user-agent"] ?? null },
        });
      });
    })().catch((error: unknown) => {
      options.log.error({ err: error }, "upgrade failed");
      socket.destroy();
    });
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

/** The handler of `GET /metrics`: Prometheus' text format. */
const metricsHandler = (metrics: ServerMetrics) => async (_request: FastifyRequest, reply: FastifyReply) =>
  reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());

/**
 * A small app that serves only `GET /metrics`, for `metrics.listen`: scrapers reach it on an address of its own (a
 * private interface, say), and the main address has no `/metrics`.
 */
export const buildMetricsApp = (metrics: ServerMetrics, log: Logger) => {
  const app = Fastify({
    loggerInstance: log.child({}, { level: "warn" }),
    logController: new LogController({ disableRequestLogging: true }),
  });
  app.get("/metrics", metricsHandler(metrics));
  return app;
};

/**
 * Ends an upgrade request with an HTTP error before any session exists: `status` ("401 Unauthorized"), and the JSON
 * body of a handshake error (`handshakeErrorBody`: the error envelope, `code` repeated at the top level), so every
 * client can read why.
 */
const refuseUpgrade = (socket: Duplex, refusal: AuthRefusal): void => {
  const body = JSON.stringify(handshakeErrorBody(refusal.code, refusal.message));
  const headers = Object.entries(refusal.headers).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.end(
    `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${headers.join("")}Connection: close\r\n\r\n${body}`,
  );
};
