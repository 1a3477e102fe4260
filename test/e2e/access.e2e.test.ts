import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createRouteRegistry, type RegisteredRoute, RouteAccessError } from "../../src/server/route-access.ts";
import { startTestServer } from "../support/server.ts";
import { upgradeRequest } from "../support/upgrade-request.ts";

/**
 * Access is decided on the matched route, never on a spelling (issue 32, part 1; BEHAVIOUR.md, "The edges",
 * scenario 19). The table is generated from the routes the server registered: each is tried with every spelling a
 * router may accept, without a key, with a wrong key and with a good one, over a real socket with the raw path as
 * written (Node's http client sends the path unchanged).
 */

const KEY = "k".repeat(40);

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** Sends one request with `path` exactly as given. */
const send = (port: number, method: string, path: string, headers: Record<string, string> = {}): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, method, path, headers, agent: false }, (res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => {
        body += chunk.toString();
      });
      res.once("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.once("error", reject);
    if (method === "POST") req.setHeader("content-type", "application/json");
    req.end(method === "POST" ? "{}" : undefined);
  });

/** The status of an upgrade request for `path`: 101 when a socket was opened (then dropped). */
const upgradeStatus = async (port: number, path: string, headers: Record<string, string> = {}): Promise<number> =>
  (await upgradeRequest(port, path, headers)).status;

const hex = (c: string, upper: boolean): string => {
  const h = c.charCodeAt(0).toString(16).padStart(2, "0");
  return `%${upper ? h.toUpperCase() : h.toLowerCase()}`;
};

/**
 * Every spelling of `path` a router might take for it: each character percent-encoded (upper- and lower-case hex),
 * an encoded slash, doubled slashes, a trailing slash, `/./`, `/x/../`, `;params` on each segment, a query.
 */
const spellingsOf = (path: string): string[] => {
  const out = new Set<string>([path]);
  for (let i = 0; i < path.length; i += 1) {
    const c = path[i] as string;
    if (c === "/") {
      out.add(`${path.slice(0, i)}//${path.slice(i + 1)}`);
      out.add(`${path.slice(0, i)}/./${path.slice(i + 1)}`);
      out.add(`${path.slice(0, i)}/x/../${path.slice(i + 1)}`);
      if (i > 0) out.add(`${path.slice(0, i)}%2F${path.slice(i + 1)}`);
      if (i > 0) out.add(`${path.slice(0, i)};p=1/${path.slice(i + 1)}`);
      continue;
    }
    out.add(path.slice(0, i) + hex(c, true) + path.slice(i + 1));
    out.add(path.slice(0, i) + hex(c, false) + path.slice(i + 1));
  }
  out.add(`${path}/`);
  out.add(`${path};p=1`);
  out.add(`${path}?x=1`);
  out.add(`${path.toUpperCase()}`);
  return [...out];
};

describe("access on the matched route", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let sessionId = "";
  let routes: readonly RegisteredRoute[] = [];

  beforeAll(async () => {
    server = await startTestServer({
      auth: { api_keys: [KEY], max_failed_attempts: null },
      metrics: { access: "api_keys" },
    });
    routes = server.routes();
    // One real session, so the session routes have something to serve with a good key.
    const ws = new WebSocket(server.url, { headers: { Authorization: `Bearer ${KEY}` } });
    sessionId = await new Promise<string>((resolve, reject) => {
      ws.once("message", (data) => resolve((JSON.parse(String(data)) as { session: { id: string } }).session.id));
      ws.once("error", reject);
    });
    ws.close(1000);
    await new Promise((resolve) => ws.once("close", resolve));
  });
  afterAll(async () => {
    await server?.stop();
  });

  const concrete = (url: string): string => url.replace(":id", sessionId).replace(":file", "resp_00000000_1.wav");

  it("declares an access on every route it registered, and /health alone is open", () => {
    expect(routes.length).toBeGreaterThan(10);
    for (const route of routes) expect(["open", "api_keys", "metrics"]).toContain(route.access);
    const open = [...new Set(routes.filter((r) => r.access === "open").map((r) => r.url))];
    expect(open).toEqual(["/health"]);
    expect(routes.filter((r) => r.upgrade).map((r) => r.url)).toEqual(
      expect.arrayContaining(["/v1/realtime", "/v1/duplex"]),
    );
  });

  it("refuses a route registered without an access at registration", () => {
    const app = Fastify();
    const registry = createRouteRegistry();
    app.addHook("onRoute", registry.onRoute);
    expect(() => app.get("/v1/new", async () => "open?")).toThrow(RouteAccessError);
    expect(registry.routes()).toEqual([]);
  });

  it("never answers a keyed route's spelling with success without a good key; answers its plain spelling with one", async () => {
    const keyed = routes.filter((r) => r.access !== "open");
    let tried = 0;
    for (const route of keyed) {
      const method = route.method.split(",")[0] as string;
      if (method === "HEAD") continue;
      const path = concrete(route.url);
      for (const spelling of spellingsOf(path)) {
        const refusedKeys: Record<string, string>[] = [{}, { Authorization: "Bearer wrong" }, { "api-key": "wrong" }];
        for (const headers of refusedKeys) {
          const answer = await send(server.port, method, spelling, headers);
          tried += 1;
          if (![401, 403, 404].includes(answer.status))
            throw new Error(`${method} ${spelling} ${JSON.stringify(headers)}: ${answer.status} ${answer.body}`);
        }
        const good = await send(server.port, method, spelling, { Authorization: `Bearer ${KEY}` });
        expect(good.status, `${method} ${spelling} with the key`).toBeLessThan(500);
      }
      const plain = await send(server.port, method, path, { Authorization: `Bearer ${KEY}` });
      // The realtime paths answer a plain GET with 426; the chat route refuses an empty request with 400.
      expect([200, 400, 404, 426], `${method} ${path} with the key`).toContain(plain.status);
    }
    expect(tried).toBeGreaterThan(1000);
  });

  it("answers 401 in the error envelope for /%761/sessions, as for /v1/sessions (scenario 19)", async () => {
    for (const path of ["/v1/sessions", "/%761/sessions", "/%76%31/%73essions", "/v1/%73essions"]) {
      const answer = await send(server.port, "GET", path);
      expect(answer.status, path).toBe(401);
      expect(JSON.parse(answer.body)).toMatchObject({ error: { code: "unauthorized", type: "invalid_request_error" } });
    }
  });

  it("never opens a socket on an upgrade route's spelling without a good key", async () => {
    for (const route of routes.filter((r) => r.upgrade && r.method.startsWith("GET"))) {
      for (const spelling of spellingsOf(route.url)) {
        const query = spelling.includes("?") ? "&autostart=0" : "?autostart=0";
        const refusedKeys: Record<string, string>[] = [{}, { Authorization: "Bearer wrong" }];
        for (const headers of refusedKeys) {
          const status = await upgradeStatus(server.port, spelling + query, headers);
          expect([401, 403, 404], `${spelling} ${JSON.stringify(headers)}`).toContain(status);
        }
      }
      expect(await upgradeStatus(server.port, `${route.url}?autostart=0`, { Authorization: `Bearer ${KEY}` })).toBe(
        101,
      );
      expect(await upgradeStatus(server.port, `/v1/%72ealtime?autostart=0`, { Authorization: `Bearer ${KEY}` })).toBe(
        101,
      );
    }
  });

  it("does not upgrade a route that is not an upgrade route, even with a key", async () => {
    expect(await upgradeStatus(server.port, "/v1/sessions", { Authorization: `Bearer ${KEY}` })).toBe(404);
    expect(await upgradeStatus(server.port, "/health")).toBe(404);
    expect(await upgradeStatus(server.port, "/v1/nothing")).toBe(401);
    expect(await upgradeStatus(server.port, "/v1/nothing", { Authorization: `Bearer ${KEY}` })).toBe(404);
  });
});

describe("the lockout counts every refused spelling", () => {
  it("locks an address out after refused tries of encoded paths, and then refuses a good key with 429", async () => {
    const server = await startTestServer({
      auth: { api_keys: [KEY], max_failed_attempts: 3, failed_attempts_window_s: 60, lockout_s: 60 },
    });
    try {
      for (const path of ["/%761/sessions", "/v1/%73essions", "/%73essions"])
        expect((await send(server.port, "GET", path)).status).toBe(401);
      const locked = await send(server.port, "GET", "/v1/sessions", { Authorization: `Bearer ${KEY}` });
      expect(locked.status).toBe(429);
      expect(locked.headers["retry-after"]).toMatch(/^\d+$/);
    } finally {
      await server.stop();
    }
  });
});

describe("browsers", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  beforeAll(async () => {
    server = await startTestServer({
      listen: {
        host: "127.0.0.1",
        port: 0,
        allowed_hosts: ["duplex.internal"],
        allowed_origins: ["https://app.example.com"],
      },
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("refuses a Host that is not loopback, the listening address or allowed, while no keys are set (DNS rebinding)", async () => {
    const evil = await send(server.port, "GET", "/v1/sessions", { Host: `evil.example:${server.port}` });
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.body)).toMatchObject({ error: { code: "forbidden_host" } });
    expect(await upgradeStatus(server.port, "/v1/realtime?autostart=0", { Host: "rebind.evil.example" })).toBe(403);
    for (const host of [
      `127.0.0.1:${server.port}`,
      `localhost:${server.port}`,
      "duplex.internal",
      "[::1]:80",
      "10.1.2.3",
    ])
      expect((await send(server.port, "GET", "/v1/sessions", { Host: host })).status, host).toBe(200);
    // /health is open: a load balancer probes it by whatever name it knows.
    expect((await send(server.port, "GET", "/health", { Host: "lb.evil.example" })).status).toBe(200);
  });

  it("refuses an upgrade or a POST from another site's page; same origin, allowed origins and no Origin pass", async () => {
    const self = `http://127.0.0.1:${server.port}`;
    expect(await upgradeStatus(server.port, "/v1/realtime?autostart=0", { Origin: "https://evil.example" })).toBe(403);
    expect(await upgradeStatus(server.port, "/v1/realtime?autostart=0", { Origin: "null" })).toBe(403);
    expect(await upgradeStatus(server.port, "/v1/realtime?autostart=0", { Origin: self })).toBe(101);
    expect(await upgradeStatus(server.port, "/v1/realtime?autostart=0", { Origin: "https://app.example.com" })).toBe(
      101,
    );
    expect(await upgradeStatus(server.port, "/v1/realtime?autostart=0")).toBe(101);
    const post = await send(server.port, "POST", "/v1/chat/completions", { Origin: "https://evil.example" });
    expect(post.status).toBe(403);
    expect(JSON.parse(post.body)).toMatchObject({ error: { code: "forbidden_origin" } });
  });

  it("sends CORS headers to allowed origins only, never *, and answers their preflights", async () => {
    const allowed = await send(server.port, "GET", "/v1/models", { Origin: "https://app.example.com" });
    expect(allowed.status).toBe(200);
    expect(allowed.headers["access-control-allow-origin"]).toBe("https://app.example.com");
    const other = await send(server.port, "GET", "/v1/models", { Origin: "https://evil.example" });
    expect(other.headers["access-control-allow-origin"]).toBeUndefined();
    const preflight = await send(server.port, "OPTIONS", "/v1/chat/completions", {
      Origin: "https://app.example.com",
      "Access-Control-Request-Method": "POST",
      "Access-Control-Request-Headers": "authorization, content-type",
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers["access-control-allow-origin"]).toBe("https://app.example.com");
    expect(String(preflight.headers["access-control-allow-headers"])).toContain("authorization");
    const refused = await send(server.port, "OPTIONS", "/v1/chat/completions", {
      Origin: "https://evil.example",
      "Access-Control-Request-Method": "POST",
    });
    expect(refused.headers["access-control-allow-origin"]).toBeUndefined();
    expect(refused.status).toBe(404);
  });
});

/** Writes `head` (request line and headers, CRLF-separated, ending with an empty line) and reads the status. */
const rawStatus = (port: number, head: string): Promise<{ status: number; text: string }> =>
  new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(head));
    let text = "";
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString();
    });
    socket.once("end", () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text }));
    socket.once("error", reject);
    setTimeout(() => socket.end(), 500);
  });

describe("malformed targets and hosts", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  beforeAll(async () => {
    server = await startTestServer({ auth: { api_keys: [KEY], max_failed_attempts: null } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("refuses two Host headers and an absolute-form target with 400, whatever key is sent", async () => {
    const key = `Authorization: Bearer ${KEY}\r\n`;
    const twice = await rawStatus(
      server.port,
      `GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n${key}Connection: close\r\n\r\n`,
    );
    expect(twice.status).toBe(400);
    const absolute = await rawStatus(
      server.port,
      `GET http://evil.example/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n${key}Connection: close\r\n\r\n`,
    );
    expect(absolute.status).toBe(400);
    const plain = await rawStatus(
      server.port,
      `GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n${key}Connection: close\r\n\r\n`,
    );
    expect(plain.status).toBe(200);
  });

  it("answers a path no route has with 404 not_found in the error envelope, once the key is good", async () => {
    const answer = await send(server.port, "GET", "/v1/nothing", { Authorization: `Bearer ${KEY}` });
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.body)).toMatchObject({ error: { code: "not_found", type: "invalid_request_error" } });
    expect((await send(server.port, "GET", "/v1/nothing")).status).toBe(401);
  });
});

describe("sockets and slow requests", () => {
  it("caps the sockets of one address before any request of them is read, and takes one again once one closes", async () => {
    const server = await startTestServer({
      listen: { host: "127.0.0.1", port: 0, max_connections_per_address: 3, max_connections: 10 },
    });
    try {
      const sockets = await Promise.all(
        [0, 1, 2].map(
          () =>
            new Promise<ReturnType<typeof connect>>((resolve) => {
              const s = connect(server.port, "127.0.0.1", () => resolve(s));
            }),
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      const refused = await send(server.port, "GET", "/health");
      expect(refused.status).toBe(429);
      expect(JSON.parse(refused.body)).toMatchObject({ error: { code: "too_many_connections" } });
      expect(refused.headers["retry-after"]).toBe("5");
      sockets[0]?.destroy();
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect((await send(server.port, "GET", "/health")).status).toBe(200);
      for (const s of sockets) s.destroy();
    } finally {
      await server.stop();
    }
  });

  it("closes a request whose body arrives a byte at a time within its request timeout", async () => {
    const server = await startTestServer({ listen: { host: "127.0.0.1", port: 0, request_timeout_s: 1 } });
    try {
      const started = Date.now();
      const socket = connect(server.port, "127.0.0.1");
      let answer = "";
      socket.on("data", (chunk: Buffer) => {
        answer += chunk.toString();
      });
      socket.write(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
      );
      const drip = setInterval(() => socket.writable && socket.write(" "), 100);
      await new Promise((resolve) => socket.once("close", resolve));
      clearInterval(drip);
      expect(Date.now() - started).toBeLessThan(3500);
      expect(answer).toMatch(/^HTTP\/1.1 408/);
    } finally {
      await server.stop();
    }
  });
});
