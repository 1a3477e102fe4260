import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import type { RawData, WebSocket } from "ws";
import { Connection, type Engine } from "../../engine/index.ts";
import { type Dialect, peekFrame, type RealtimeQuery } from "../../protocol/index.ts";
import { DEFAULT_OUTPUT_LIMITS, type OutputLimits, SocketWriter } from "./socket-writer.ts";

/** What the realtime socket is served with (from the app's options and the upgrade request). */
export interface RealtimeSocketOptions {
  readonly firstMessageTimeoutMs?: number;
  readonly dialect?: Dialect;
  readonly query?: RealtimeQuery;
  readonly outputLimits?: OutputLimits;
  /** Who is at the other end, for the logs: the client's address (as the auth gate counts it) and user agent. */
  readonly remote?: { readonly address: string; readonly userAgent: string | null };
  /** The connection under the WebSocket, corked by the socket writer for the events of one drain. */
  readonly transport?: Pick<Duplex, "cork" | "uncork">;
}

/**
 * Serves one WebSocket at /v1/realtime (DESIGN.md, src/server/realtime): the ws wiring of a `Connection` (the
 * connection rules, src/engine/connection.ts) over a `SocketWriter` (rendering, cork, output limits). Each frame is
 * peeked (size, kind, event_id; src/protocol/frame-peek.ts) and handed to the connection.
 */
export const serveRealtimeSocket = (
  socket: WebSocket,
  engine: Engine,
  log: Logger,
  options: RealtimeSocketOptions = {},
): void => {
  const dialect = options.dialect ?? "ga";
  const writer = new SocketWriter(socket, {
    dialect,
    limits: options.outputLimits ?? DEFAULT_OUTPUT_LIMITS,
    ...(options.transport === undefined ? {} : { transport: options.transport }),
    overflowed: (output) => connection.overflowed(output),
  });
  const connection = new Connection(engine, writer, log, {
    dialect,
    ...(options.firstMessageTimeoutMs === undefined ? {} : { firstMessageTimeoutMs: options.firstMessageTimeoutMs }),
    ...(options.query === undefined ? {} : { query: options.query }),
    ...(options.remote === undefined ? {} : { remote: options.remote }),
  });

  /**
   * After the upgrade response has gone out on its own: a client that attaches its message handler once the socket
   * is open (LiveKit's plugin does) must not find session.created in the same read as the 101.
   */
  const onUpgraded = (): void => connection.connected();
  const onMessage = (data: RawData, isBinary: boolean): void => void connection.receive(peekFrame(data, isBinary));
  const onClose = (code: number, reason: Buffer): void => connection.closed(code, reason.toString());
  const onError = (error: Error): void => log.warn({ err: error }, "socket error");

  setImmediate(onUpgraded);
  socket.on("message", onMessage);
  socket.on("close", onClose);
  socket.on("error", onError);
};
