import { createServer as createHttpServer, type IncomingMessage, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import Fastify, { type FastifyReply, type FastifyRequest, LogController } from "fastify";
import type { Logger } from "pino";
import type { Engine, EventStore } from "../engine/index.ts";
import { capabilitiesJson, handshakeErrorBody } from "../protocol/index.ts";
import { type AuthRefusal, createAuthGate, type TrustProxy } from "./auth-gate.ts";
import type { AuthLockoutOptions } from "./auth-lockout.ts";
import { type BrowserRefusal, createBrowserPolicy } from "./browser-policy.ts";
import { chatCompletionsHandler } from "./chat-completions.ts";
import { limitConnections } from "./connection-limits.ts";
import { closeUnreadBody, DEFAULT_HTTP_BODY_BYTES, registerBoundedJsonParser } from "./json-body.ts";
import type { ServerMetrics } from "./metrics.ts";
import { NOT_AVAILABLE_ROUTES, refuseNotAvailable } from "./not-available.ts";
import { noSniff } from "./page-security.ts";
import { registerRealtimeRoutes, upgradeOf } from "./realtime/routes.ts";
import type { OutputLimits } from "./realtime/socket-writer.ts";
import { createRouteRegistry, type RouteAccess } from "./route-access.ts";
import { sessionsApi } from "./sessions-api.ts";
import { wholeLogReads } from "./whole-log-reads.ts";

/** ms between Node's checks of the request and header timeouts (its default, 30 s, would double a 25 s bound). */
const TIMEOUT_CHECK_MS = 1000;

/** ms an idle keep-alive connection stays open (fastify's default). */
const KEEP_ALIVE_MS = 72_000;

/** `listen.*` and `limits.*` of the deployment config that the app enforces (docs/deploy.md, "Limits"). */
export interface ListenLimits {
  /** The host the server listens on: a name there is accepted in `Host` (browser policy). */
  readonly host?: string;
  readonly allowedHosts?: readonly string[];
  readonly allowedOrigins?: readonly string[];
  /** Open sockets in all, and from one peer address (defaults 2048 and 512). */
  readonly maxConnections?: number;
  readonly maxConnectionsPerAddress?: number;
  /** ms for a request's headers and body to arrive (default 25 000; checked every second). */
  readonly requestTimeoutMs?: number;
  /** Bytes of a request body (default 16 MiB). */
  readonly httpBodyBytes?: number;
  /** s of audio one chat completion's `input_audio` parts may carry in all (`limits.request_audio_s`, default 300). */
  readonly requestAudioS?: number;
}

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
  /** What a request may cost and who may send one from a browser (absent: the defaults of each). */
  readonly listen?: ListenLimits;
}

/**
 * Builds the fastify app: `GET /health`, `GET /metrics`, `GET /v1/models`, 426 Upgrade Required for a plain `GET` of
 * a realtime path, and the WebSocket upgrade on the realtime paths
 * (through `ws` with `noServer`, so the handshake stays ours), over TLS when `options.tls` is given.
 * Listening is the caller's.
 */
export const buildApp = (options: AppOptions) => {
  const app = createFastify(options);
  // Every route declares its access (route-access.ts): one without fails here, at registration.
  const registry = createRouteRegistry();
  app.addHook("onRoute", registry.onRoute);
  app.decorate("routeTable", registry.routes);
  app.setErrorHandler(answerError(options.log));
  // A path no route matches (after the key check, which the not-found answer needs too): the error envelope.
  app.setNotFoundHandler(async (request, reply) =>
    reply
      .code(404)
      .send(handshakeErrorBody("not_found", `no route ${request.method} ${request.url.split("?")[0] ?? ""}`)),
  );
  // Every answer says its content type is what it is (JSON, WAV, the pages): no browser sniffs another.
  app.addHook("onSend", noSniff);
  app.addHook("onResponse", async (request, reply) => {
    options.log.debug({ url: request.url, statusCode: reply.statusCode, ms: reply.elapsedTime }, "request");
  });
  const listen = options.listen ?? {};
  const gate = createAuthGate({
    apiKeys: options.apiKeys ?? [],
    lockout: options.authLockout ?? null,
    trustProxy: options.trustProxy ?? false,
    log: options.log,
  });
  limitConnections(app.server, {
    maxConnections: listen.maxConnections ?? 2048,
    maxPerAddress: listen.maxConnectionsPerAddress ?? 512,
    sharedPeer: gate.isTrustedProxy,
  });
  decideAccess(app, options, gate);
  registerHttpRoutes(app, options);
  registerRealtimeRoutes(app, options, gate);
  return app;
};

type App = ReturnType<typeof createFastify>;

/**
 * The fastify instance: its logger, plain HTTP or HTTPS (`options.tls`) with the request and header timeouts
 * (`listen.requestTimeoutMs`, default 25 s), the body limit and bounded JSON parser (`listen.httpBodyBytes`), and
 * the error envelope for URLs the router cannot decode.
 */
const createFastify = (options: AppOptions) => {
  const listen = options.listen ?? {};
  const app = Fastify({
    // fastify's own lines (its "Server listening at ...") are not ours to print: the server logs one "listening".
    loggerInstance: options.log.child({}, { level: "warn" }),
    // Requests are logged at debug below (health checks and scrapes would flood info).
    logController: new LogController({ disableRequestLogging: true }),
    // Plain HTTP, or HTTPS with the configured certificate (both emit `upgrade`); a request's headers and body arrive
    // within `requestTimeoutMs`, or it is answered 408 and closed (a body sent a byte at a time), checked every second.
    serverFactory: (handler) => {
      const timeoutMs = listen.requestTimeoutMs ?? 25_000;
      const server =
        options.tls === undefined
          ? createHttpServer({ connectionsCheckingInterval: TIMEOUT_CHECK_MS }, handler)
          : createHttpsServer(
              { cert: options.tls.cert, key: options.tls.key, connectionsCheckingInterval: TIMEOUT_CHECK_MS },
              handler,
            );
      server.requestTimeout = timeoutMs;
      // Headers within the same bound (Node's default is 60 s; it may not exceed requestTimeout).
      server.headersTimeout = timeoutMs;
      server.keepAliveTimeout = KEEP_ALIVE_MS;
      return server as Server;
    },
    bodyLimit: listen.httpBodyBytes ?? DEFAULT_HTTP_BODY_BYTES,
    // A URL the router cannot decode (a lone surrogate, bad escapes) or a parameter over 100 characters: answered
    // before any route, in the error envelope (400 and 414).
    frameworkErrors: (error, _request, reply) =>
      (reply as FastifyReply).code(error.statusCode ?? 400).send(handshakeErrorBody("bad_event", error.message)),
  });
  registerBoundedJsonParser(app, { bodyLimitBytes: listen.httpBodyBytes ?? DEFAULT_HTTP_BODY_BYTES });

  return app;
};

/**
 * The one access decision, in one `onRequest` hook on the route that matched (never on the raw URL): a malformed
 * Host or target is refused, a CORS preflight answered, then the browser rules for every route that is not open, then
 * the key for `api_keys` routes (and `metrics` ones when `metrics.access` says so); an upgrade of a route that is not
 * a WebSocket endpoint is a 404.
 */
const decideAccess = (app: App, options: AppOptions, gate: ReturnType<typeof createAuthGate>): void => {
  const listen = options.listen ?? {};
  const metricsAccess = options.metricsAccess ?? "open";
  const browser = createBrowserPolicy({
    keysConfigured: gate.required,
    listenHost: listen.host ?? "127.0.0.1",
    allowedHosts: listen.allowedHosts ?? [],
    allowedOrigins: listen.allowedOrigins ?? [],
  });
  /**
   * The one access decision, on the route that matched (never on the raw URL): the browser rules for every route
   * that is not open, then the key for `api_keys` routes (and `metrics` ones when `metrics.access` says so).
   */
  const decide = async (
    request: IncomingMessage,
    access: RouteAccess,
    upgrade: boolean,
  ): Promise<AuthRefusal | BrowserRefusalWithHeaders | null> => {
    if (access === "open") return null;
    const refused = browser.check(request.method ?? "GET", request.headers, upgrade);
    if (refused !== null) return { ...refused, headers: {} };
    const keyed = access === "api_keys" || (access === "metrics" && metricsAccess === "api_keys");
    return keyed ? gate.check(request) : null;
  };
  app.addHook("onRequest", async (request, reply) => {
    // One Host, and a path as the target (RFC 9112, 3.2: a server refuses a request with two Host fields; the
    // absolute form is for proxies, and its authority could differ from the Host the browser rules read).
    const malformed = hostFieldProblem(request.raw);
    if (malformed !== null)
      return closeUnreadBody(request, reply).code(400).send(handshakeErrorBody("bad_event", malformed));
    const preflight = browser.preflight(request.method, request.headers);
    if (preflight !== null) return reply.code(204).headers(preflight).send();
    // No route matched: the not-found answer is keyed like the routes, so it tells a client without a key nothing
    // of which routes exist.
    const config = request.is404 ? NOT_FOUND_CONFIG : request.routeOptions.config;
    const access = config.access;
    // Unreachable while the registry refuses routes without access; refused rather than served if it ever is.
    const upgrading = upgradeOf(request.raw) !== undefined;
    const refusal = await decide(request.raw, access ?? "api_keys", upgrading);
    if (refusal !== null) {
      // Refused before its body is read: an unauthenticated upload is not drained either.
      return closeUnreadBody(request, reply)
        .code(refusal.status)
        .headers(refusal.headers)
        .send(handshakeErrorBody(refusal.code, refusal.message));
    }
    if (upgrading && config.upgrade !== true) {
      const path = request.url.split("?")[0] ?? "";
      return reply.code(404).send(handshakeErrorBody("bad_event", `${path} is not a WebSocket endpoint`));
    }
    reply.headers(browser.corsHeaders(request.headers.origin));
  });
};

/** The HTTP routes: health, metrics, models, chat completions and, with a store, the session API and pages. */
const registerHttpRoutes = (app: App, options: AppOptions): void => {
  const listen = options.listen ?? {};
  const metricsAccess = options.metricsAccess ?? "open";
  // 503 once this node lost its shared store past its lease (issue 22): a proxy in front sends clients elsewhere.
  const open = { config: { access: "open" as const } };
  const keyed = { config: { access: "api_keys" as const } };
  app.get("/health", open, async (_request, reply) =>
    (options.healthy?.() ?? true)
      ? { status: "ok", sessions: options.engine.sessions().length }
      : reply.code(503).send({ status: "store_lost", sessions: options.engine.sessions().length }),
  );
  if (metricsAccess !== "elsewhere" && options.metrics !== undefined)
    app.get("/metrics", { config: { access: "metrics" } }, metricsHandler(options.metrics));
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
  app.get("/v1/models", keyed, async () => ({ object: "list", data: [model()] }));
  app.get<{ Params: { id: string } }>("/v1/models/:id", keyed, async (request, reply) =>
    request.params.id === options.model
      ? model()
      : reply
          .code(404)
          .send(
            handshakeErrorBody("model_not_found", `no model ${request.params.id}; this server serves ${options.model}`),
          ),
  );

  // One set of places for everything a request does that reads and folds a whole session log.
  const reads = wholeLogReads();
  app.post(
    "/v1/chat/completions",
    keyed,
    chatCompletionsHandler({
      engine: options.engine,
      model: options.model,
      log: options.log,
      maxAudioS: listen.requestAudioS,
      wholeLogReads: reads,
      ...(options.store === undefined ? {} : { store: options.store }),
    }),
  );

  // The turn-based routes a duplex deployment does not serve answer "not available", not a bare 404.
  for (const [method, url] of NOT_AVAILABLE_ROUTES)
    app.route({ method, url, ...keyed, onRequest: refuseNotAvailable, handler: refuseNotAvailable });

  if (options.store !== undefined) {
    const api = sessionsApi({ engine: options.engine, store: options.store, wholeLogReads: reads });
    // Ids reach the store only in these shapes: a NUL, a lone surrogate or a 10 KB id is a 400, never a query.
    const session = { ...keyed, schema: { params: sessionParams } };
    app.get("/v1/sessions", keyed, api.list);
    app.get("/v1/sessions/:id", session, api.show);
    app.get("/v1/sessions/:id/export", session, api.exported);
    app.get("/v1/sessions/:id/events", session, api.events);
    app.get("/v1/sessions/:id/input.wav", session, api.inputWav);
    app.get("/v1/sessions/:id/timeline.json", session, api.timeline);
    app.get("/sessions", keyed, api.pages);
    app.get("/sessions/:id", session, api.page);
    app.get("/v1/sessions/:id/responses/:file", session, api.responseWav);
  }
};

/**
 * What a client gets for an error a route threw (issue 32, part 4: a database's message never reaches a client):
 * fastify's own 4xx (a body too large, a bad content type, a malformed URL) keep their status and message, in the
 * error envelope (413 as `request_too_large`, others `bad_event`); anything else is 500 `internal_error` with a
 * fixed message, and the error itself goes to the server's log.
 */
const answerError =
  (log: Logger) =>
  (error: Error & { statusCode?: number; code?: string }, request: FastifyRequest, reply: FastifyReply) => {
    const status = error.statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      const code = status === 413 ? "request_too_large" : "bad_event";
      return reply.code(status).send(handshakeErrorBody(code, error.message));
    }
    log.error({ err: error, method: request.method, route: request.routeOptions.url }, "request failed");
    return reply
      .code(500)
      .send(handshakeErrorBody("internal_error", "internal error; the server's log has the detail"));
  };

/** The `:id` (and `:file`) of the session routes: what a session id and a response's file name can be. */
const sessionParams = {
  type: "object",
  properties: {
    id: { type: "string", pattern: "^[A-Za-z0-9_.:-]{1,128}$" },
    file: { type: "string", pattern: "^[A-Za-z0-9_.-]{1,160}$" },
  },
} as const;

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
  app.get("/metrics", { config: { access: "open" } }, metricsHandler(metrics));
  return app;
};

/** Why a request's Host or target is malformed (two Host fields, an absolute-form target), or null. */
const hostFieldProblem = (request: IncomingMessage): string | null => {
  let hosts = 0;
  for (let i = 0; i < request.rawHeaders.length; i += 2)
    if (request.rawHeaders[i]?.toLowerCase() === "host") hosts += 1;
  if (hosts > 1) return "the request has more than one Host header";
  if (!(request.url ?? "/").startsWith("/") && request.url !== "*")
    return "the request target must be a path (origin form), not an absolute URL";
  return null;
};

/** A browser-policy refusal with the (no) headers an AuthRefusal carries, so both are answered alike. */
type BrowserRefusalWithHeaders = BrowserRefusal & { readonly headers: Readonly<Record<string, string>> };

/** The access of fastify's not-found answer: a key, as for the routes (a 404 says what does not exist). */
const NOT_FOUND_CONFIG = { access: "api_keys", upgrade: false } as const;
