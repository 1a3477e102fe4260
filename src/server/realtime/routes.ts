import { type IncomingMessage, type Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { WebSocketServer } from "ws";
import type { Engine } from "../../engine/index.ts";
import { dialectOf, readRealtimeQuery } from "../../protocol/index.ts";
import type { AuthGate } from "../auth-gate.ts";
import { serveRealtimeSocket } from "./socket.ts";
import type { OutputLimits } from "./socket-writer.ts";

/**
 * The realtime routes (DESIGN.md, src/server/realtime): WebSocket upgrades routed through fastify's router, the 426
 * answer to a plain GET, the socket handed to `serveRealtimeSocket`, and the 1012 close of every socket at shutdown.
 */

/** WebSocket paths of the realtime endpoint (DESIGN.md, src/server): /v1/realtime and its alias /v1/duplex. */
export const REALTIME_PATHS: readonly string[] = ["/v1/realtime", "/v1/duplex"];

/**
 * Bytes of one WebSocket message, all its fragments together: ws cuts a message the moment it passes this (close
 * 1009), so no socket holds more. Messages up to it reach the codec, which refuses those over 15 MiB
 * (`MAX_FRAME_BYTES`) with `event_too_large` and the session goes on; the 2 MiB between let a client that sent a
 * little too much hear why.
 */
export const WS_MAX_MESSAGE_BYTES = 17 * 1024 * 1024;

const UPGRADE = Symbol("duplex.upgrade");

/** The socket and first bytes of an upgrade request that `routeUpgrade` routed (undefined for a plain request). */
export const upgradeOf = (request: IncomingMessage): { readonly socket: Duplex; readonly head: Buffer } | undefined =>
  (request as IncomingMessage & { [UPGRADE]?: { socket: Duplex; head: Buffer } })[UPGRADE];

/**
 * Routes an HTTP upgrade request through fastify's router like any request (as @fastify/websocket does), so its
 * route is matched on the decoded path and the same hooks decide its access: a response fastify gives it (401, 403,
 * 404, 429) is written on the socket, which then closes; the upgrade routes' handler upgrades it (app.ts).
 */
const routeUpgrade = (
  app: { routing: (request: IncomingMessage, response: ServerResponse) => void },
  log: Logger,
  request: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): void => {
  socket.on("error", () => socket.destroy());
  (request as IncomingMessage & { [UPGRADE]?: { socket: Duplex; head: Buffer } })[UPGRADE] = { socket, head };
  const response = new ServerResponse(request);
  response.shouldKeepAlive = false;
  try {
    response.assignSocket(socket as Socket);
    app.routing(request, response);
  } catch (error) {
    log.warn({ err: error }, "upgrade failed");
    socket.destroy();
  }
};

/** What the realtime routes are served with (the app's options). */
export interface RealtimeRouteOptions {
  readonly engine: Engine;
  readonly log: Logger;
  readonly firstMessageTimeoutMs?: number;
  /** Output buffer per socket (2 MiB / 512 events when absent). */
  readonly outputLimits?: OutputLimits;
  /** Resolves once the sessions of the log are recovered: WebSocket upgrades wait for it (absent: at once). */
  readonly ready?: Promise<void>;
}

/**
 * Registers `GET` of each realtime path (an upgrade becomes a realtime socket; a plain GET learns what to do, 426),
 * routes the server's upgrade requests through fastify (`routeUpgrade`), and closes every socket at shutdown.
 */
export const registerRealtimeRoutes = <L extends FastifyBaseLogger>(
  app: FastifyInstance<Server, IncomingMessage, ServerResponse, L>,
  options: RealtimeRouteOptions,
  gate: Pick<AuthGate, "addressOf">,
): void => {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: WS_MAX_MESSAGE_BYTES,
    handleProtocols: (protocols) => (protocols.has("realtime") ? "realtime" : false),
  });

  // A plain GET of the realtime endpoint (a browser, curl, a client without WebSocket support) learns what to do.
  // A plain GET learns what to do (426); an upgrade request routed here (see `routeUpgrade`) becomes a realtime socket.
  for (const path of REALTIME_PATHS) {
    app.get(path, { config: { access: "api_keys", upgrade: true } }, async (request, reply) => {
      const upgrade = upgradeOf(request.raw);
      if (upgrade === undefined) {
        return reply
          .code(426)
          .header("Upgrade", "websocket")
          .send({
            error: {
              type: "invalid_request_error",
              code: "upgrade_required",
              message: `${path} is a WebSocket endpoint (OpenAI Realtime API): connect with ws:// or wss:// and an Upgrade: websocket request`,
            },
          });
      }
      reply.hijack();
      await (options.ready ?? Promise.resolve());
      const url = new URL(request.raw.url ?? "/", "http://localhost");
      wss.handleUpgrade(request.raw, upgrade.socket, upgrade.head, (ws) => {
        serveRealtimeSocket(ws, options.engine, options.log, {
          firstMessageTimeoutMs: options.firstMessageTimeoutMs,
          ...(options.outputLimits === undefined ? {} : { outputLimits: options.outputLimits }),
          dialect: dialectOf(request.headers),
          query: readRealtimeQuery(url.searchParams),
          remote: { address: gate.addressOf(request.raw), userAgent: request.headers["user-agent"] ?? null },
          transport: upgrade.socket,
        });
      });
    });
  }
  app.server.on("upgrade", (request: IncomingMessage, socket: Duplex, head: Buffer) =>
    routeUpgrade(app, options.log, request, socket, head),
  );
  // An upgrade request answered over HTTP (refused, 404, a route that is not an upgrade): its socket ends with it.
  app.addHook("onResponse", async (request) => {
    upgradeOf(request.raw)?.socket.destroy();
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
};
