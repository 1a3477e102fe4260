import type { Duplex } from "node:stream";
import Fastify, { LogController } from "fastify";
import type { Logger } from "pino";
import { WebSocketServer } from "ws";
import { ERROR_CODES } from "../domain/index.ts";
import type { Engine } from "../engine/index.ts";
import { capabilitiesJson, dialectOf } from "../protocol/index.ts";
import { createApiKeyCheck, offeredApiKey } from "./api-keys.ts";
import { type AuthLockoutOptions, createAuthLockout } from "./auth-lockout.ts";
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
  /** Keys an upgrade must offer (absent or empty: no authentication); compared in constant time. */
  readonly apiKeys?: readonly string[];
  /** Refuse an address with 429 for a while after repeated failed key checks (absent or null: never). */
  readonly authLockout?: AuthLockoutOptions | null;
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

  const keys = options.apiKeys ?? [];
  const checkKey = keys.length === 0 ? null : createApiKeyCheck(keys);
  const lockout = checkKey === null || options.authLockout == null ? null : createAuthLockout(options.authLockout);
  app.server.on("upgrade", (request, socket, head) => {
    const url = new URL(request.url ?? "/", "http://localhost");
    if (!REALTIME_PATHS.includes(url.pathname)) {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n");
      return;
    }
    const accept = (): void =>
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
    if (checkKey === null) {
      accept();
      return;
    }
    const address = request.socket.remoteAddress ?? "unknown";
    // Neither the offered key nor anything derived from it is logged.
    void (async () => {
      const waitMs = (await lockout?.lockedFor(address)) ?? 0;
      if (waitMs > 0) {
        const retryAfterS = Math.ceil(waitMs / 1000);
        options.log.info(
          { code: "too_many_auth_failures", path: url.pathname, address, retryAfterS },
          "upgrade refused: address locked out after failed API key checks",
        );
        refuseUpgrade(socket, "429 Too Many Requests", "too_many_auth_failures", {
          message: `too many failed API key checks from this address; retry after ${retryAfterS} s`,
          headers: { "Retry-After": String(retryAfterS) },
        });
        return;
      }
      if (!checkKey(offeredApiKey(request.headers))) {
        options.log.info({ code: "unauthorized", path: url.pathname }, "upgrade refused: missing or invalid API key");
        if ((await lockout?.failed(address)) === true) {
          options.log.info(
            { code: "too_many_auth_failures", address, lockoutS: options.authLockout?.lockoutS },
            "address locked out after repeated failed API key checks",
          );
        }
        // Refused before any session exists, at the HTTP level, so every client can read why.
        refuseUpgrade(socket, "401 Unauthorized", "unauthorized", { message: "missing or invalid API key" });
        return;
      }
      accept();
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

/**
 * Ends an upgrade request with an HTTP error before any session exists: `status` ("401 Unauthorized"), and a JSON
 * body `{type: "error", error: {type, code, message, param: null, event_id: null}}` whose `type` is the code's class
 * in the error table (src/domain/errors.ts), so every client can read why.
 */
const refuseUpgrade = (
  socket: Duplex,
  status: string,
  code: "unauthorized" | "too_many_auth_failures",
  details: { message: string; headers?: Record<string, string> },
): void => {
  const body = JSON.stringify({
    type: "error",
    error: { type: ERROR_CODES[code].type, code, message: details.message, param: null, event_id: null },
  });
  const headers = Object.entries(details.headers ?? {}).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.end(
    `HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${headers.join("")}Connection: close\r\n\r\n${body}`,
  );
};
