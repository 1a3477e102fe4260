import type { Server } from "node:http";
import type { Socket } from "node:net";
import { addressKey } from "./address-key.ts";

/** `listen.max_connections` and `listen.max_connections_per_address` (docs/deploy.md, "Limits"). */
export interface ConnectionLimitOptions {
  /** Open TCP sockets of the server in all (HTTP keep-alive, upgrading and upgraded WebSockets, SSE tails). */
  readonly maxConnections: number;
  /** Open TCP sockets from one peer address (the socket's, not a forwarded one). */
  readonly maxPerAddress: number;
  /** Peers counted only in the total (the trusted proxies of `listen.trust_proxy`, which speak for many clients). */
  readonly sharedPeer?: (address: string) => boolean;
}

/** Refusal written on a socket over a limit: no request of it is read. */
const refusal = (status: 429 | 503, message: string): string => {
  const body = JSON.stringify({
    type: "error",
    code: "too_many_connections",
    error: { type: "rate_limit_error", code: "too_many_connections", message, event_id: null, param: null },
  });
  const reason = status === 429 ? "Too Many Requests" : "Service Unavailable";
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nRetry-After: 5\r\nConnection: close\r\n\r\n${body}`;
};

/**
 * Caps the sockets a server holds (issue 32, part 2, "WebSocket frames and messages"): counted when the TCP
 * connection is accepted, before any request or upgrade of it is read, so a client cannot hold more than its share
 * whatever it then sends. A socket over a cap gets one HTTP response (503 over the total, 429 over its address's
 * share, `too_many_connections` in the error envelope, `Retry-After: 5`) and is closed. A socket leaves the count
 * when it closes (over TLS a refused socket is closed with no answer). `counts()` reads the numbers.
 */
export const limitConnections = (server: Server, options: ConnectionLimitOptions) => {
  let open = 0;
  const perAddress = new Map<string, number>();
  const tls = "setSecureContext" in server;
  const admit = (socket: Socket): boolean => {
    const peer = socket.remoteAddress ?? "unknown";
    // An IPv6 peer counts by its /64 (address-key.ts).
    const address = addressKey(peer);
    const mine = perAddress.get(address) ?? 0;
    const capped = options.sharedPeer?.(peer) !== true;
    if (open >= options.maxConnections || (capped && mine >= options.maxPerAddress)) {
      const total = open >= options.maxConnections;
      // Over TLS nothing readable can be said before the handshake: the socket is closed at once.
      if (tls) socket.destroy();
      else {
        socket.end(
          refusal(
            total ? 503 : 429,
            total
              ? `the server holds listen.max_connections (${options.maxConnections}) sockets; retry later`
              : `this address holds listen.max_connections_per_address (${options.maxPerAddress}) sockets; close one or retry later`,
          ),
        );
        // A peer that never reads its refusal is cut off.
        setTimeout(() => socket.destroy(), 1000).unref();
      }
      return false;
    }
    open += 1;
    perAddress.set(address, mine + 1);
    socket.once("close", () => {
      open -= 1;
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left === 0) perAddress.delete(address);
      else perAddress.set(address, left);
    });
    return true;
  };
  // The server's own listeners (the HTTP parser, or TLS's handshake) run only for a socket within the limits.
  const inner = server.listeners("connection") as ((socket: Socket) => void)[];
  server.removeAllListeners("connection");
  server.on("connection", (socket: Socket) => {
    if (!admit(socket)) return;
    for (const listener of inner) listener.call(server, socket);
  });
  return {
    counts: () => ({ open, addresses: perAddress.size }),
  };
};
