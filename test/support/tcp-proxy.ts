import { createConnection, createServer, type Server, type Socket } from "node:net";

/**
 * TCP proxies for the cluster tests (issue 22, part 5), on 127.0.0.1.
 *
 * - `failover`: what a load balancer with health checks does in front of two nodes: each new connection goes to the
 *   first backend whose `GET /health` answered 200 at the last check (every `checkMs`); a node that is killed,
 *   stopped (its /health times out) or lost its store (503) gets no new connections.
 * - `pausable`: one backend (a node's way to PostgreSQL) whose traffic can be held in both directions (`pause`), as
 *   a cut network holds it, and let go again (`resume`).
 */
export interface TcpProxy {
  readonly port: number;
  close(): Promise<void>;
}

const listen = (server: Server): Promise<number> =>
  new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve(typeof address === "object" && address !== null ? address.port : 0);
    });
  });

const pipeBoth = (a: Socket, b: Socket): void => {
  a.pipe(b);
  b.pipe(a);
  a.on("error", () => b.destroy());
  b.on("error", () => a.destroy());
  a.on("close", () => b.destroy());
  b.on("close", () => a.destroy());
};

const healthy = (port: number, timeoutMs: number): Promise<boolean> =>
  fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(timeoutMs) }).then(
    (r) => r.status === 200,
    () => false,
  );

/** A health-checked failover proxy in front of `backends` (ports), preferring them in order. */
export const failoverProxy = async (
  backends: readonly number[],
  checkMs = 250,
): Promise<TcpProxy & { healthyBackends(): number[] }> => {
  let up: number[] = [];
  const check = async (): Promise<void> => {
    const results = await Promise.all(backends.map((p) => healthy(p, checkMs)));
    up = backends.filter((_, i) => results[i]);
  };
  await check();
  const timer = setInterval(() => void check(), checkMs);
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    const target = up[0];
    if (target === undefined) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: "127.0.0.1", port: target });
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    pipeBoth(client, upstream);
  });
  const port = await listen(server);
  return {
    port,
    healthyBackends: () => [...up],
    close: () =>
      new Promise((resolve) => {
        clearInterval(timer);
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
};

/** Stops the bytes between `a` and `b` (both ways) where they are: read no further, written no further. */
const hold = (a: Socket, b: Socket): void => {
  a.unpipe(b);
  b.unpipe(a);
  a.pause();
  b.pause();
};

/** A proxy to one backend whose traffic `pause` holds (both ways, every connection) until `resume`. */
export const pausableProxy = async (
  host: string,
  backendPort: number,
): Promise<TcpProxy & { pause(): void; resume(): void }> => {
  let paused = false;
  const pairs = new Set<[Socket, Socket]>();
  const server = createServer((client) => {
    const upstream = createConnection({ host, port: backendPort });
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    client.on("close", () => pairs.delete(pair));
    pipeBoth(client, upstream);
    if (paused) hold(client, upstream);
  });
  const port = await listen(server);
  return {
    port,
    pause() {
      paused = true;
      for (const [a, b] of pairs) hold(a, b);
    },
    resume() {
      paused = false;
      for (const [a, b] of pairs) {
        a.pipe(b);
        b.pipe(a);
      }
    },
    close: () =>
      new Promise((resolve) => {
        for (const [a, b] of pairs) {
          a.destroy();
          b.destroy();
        }
        server.close(() => resolve());
      }),
  };
};
