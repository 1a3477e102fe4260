import { connect } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, type Engine, type EventStore } from "../../src/engine/index.ts";
import { createResampler, createSpeexStreamResampler } from "../../src/infra/audio/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { createEchoRunner } from "../../src/infra/runners/echo.ts";
import { buildApp } from "../../src/server/app.ts";
import { NOT_AVAILABLE_ROUTES } from "../../src/server/not-available.ts";

/**
 * The turn-based routes a duplex deployment does not serve (reference/fullduplex-design.md, "Deployment selects the
 * serving stack"; issue 35, part 4), in-process with fastify's `inject`: each is 400 `not_available` in the error
 * envelope, after the key check and before its body is read; a path that is none of them stays 404 `not_found`.
 */
const KEY = "sk-test-not-available";
let store: EventStore;
let engine: Engine;
let app: ReturnType<typeof buildApp>;

beforeAll(async () => {
  store = createSqliteEventStore({ path: ":memory:" });
  const log = pino({ level: "silent" });
  engine = createEngine({
    store,
    runner: createEchoRunner({ speedFactor: Number.POSITIVE_INFINITY }),
    vad: null,
    createResampler,
    createOutputResampler: createSpeexStreamResampler,
    model: "echo",
    log,
  });
  app = buildApp({ engine, store, log, model: "echo", apiKeys: [KEY] });
  await app.ready();
});
afterAll(async () => {
  await app?.close();
  await engine?.close();
  await store?.close();
});

const bearer = { authorization: `Bearer ${KEY}` };

describe("the routes a duplex deployment does not serve", () => {
  it.each(NOT_AVAILABLE_ROUTES.map(([method, url]) => [method, url.replace(":id", "resp_1")] as const))(
    "%s %s is 400 not_available, naming what is served",
    async (method, url) => {
      const reply = await app.inject({ method, url, headers: bearer, payload: method === "GET" ? undefined : {} });
      expect(reply.statusCode).toBe(400);
      const body = reply.json();
      expect(body).toMatchObject({
        type: "error",
        code: "not_available",
        error: { type: "invalid_request_error", code: "not_available" },
      });
      expect(body.error.message).toContain("is not available");
      expect(body.error.message).toContain("/v1/realtime");
    },
  );

  it("asks for the key first: without one it is 401, as every keyed route", async () => {
    const reply = await app.inject({ method: "POST", url: "/v1/embeddings", payload: { input: "x" } });
    expect(reply.statusCode).toBe(401);
    expect(reply.json()).toMatchObject({ error: { code: "unauthorized" } });
  });

  it("never reads the body: a multipart upload and a body that is not JSON are refused alike", async () => {
    const multipart = await app.inject({
      method: "POST",
      url: "/v1/audio/transcriptions",
      headers: { ...bearer, "content-type": "multipart/form-data; boundary=x" },
      payload: '--x\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF\r\n--x--\r\n',
    });
    expect(multipart.statusCode).toBe(400);
    expect(multipart.json()).toMatchObject({ error: { code: "not_available" } });
    const broken = await app.inject({
      method: "POST",
      url: "/v1/completions",
      headers: { ...bearer, "content-type": "application/json" },
      payload: "{not json",
    });
    expect(broken.statusCode).toBe(400);
    expect(broken.json()).toMatchObject({ error: { code: "not_available" } });
  });

  it("leaves any other path a 404 not_found, and the routes it serves served", async () => {
    const missing = await app.inject({ method: "POST", url: "/v1/nothing-here", headers: bearer, payload: {} });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ error: { code: "not_found" } });
    const models = await app.inject({ method: "GET", url: "/v1/models", headers: bearer });
    expect(models.statusCode).toBe(200);
    expect(models.json()).toMatchObject({ object: "list", data: [{ id: "echo" }] });
  });

  it("closes the connection after refusing an upload it never reads, with a key or without (no 2 GiB drained)", async () => {
    const address = await app.listen({ port: 0, host: "127.0.0.1" });
    const port = Number(new URL(address).port);
    /** Declares a 2 GiB body, sends 64 KiB of it, and reads what comes back until the server closes the socket. */
    const upload = (headers: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, "127.0.0.1");
        let answer = "";
        socket.on("data", (d) => {
          answer += d.toString("latin1");
        });
        socket.on("error", () => undefined);
        socket.on("close", () => resolve(answer));
        socket.setTimeout(15_000, () => {
          socket.destroy();
          reject(new Error(`the server kept the connection open; it answered: ${answer.slice(0, 200)}`));
        });
        socket.write(
          `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${headers}Content-Type: application/json\r\nContent-Length: 2147483648\r\n\r\n`,
        );
        socket.write(Buffer.alloc(64 * 1024, 0x20));
      });
    const keyed = await upload(`Authorization: Bearer ${KEY}\r\n`);
    expect(keyed).toMatch(/^HTTP\/1\.1 400 /);
    expect(keyed.toLowerCase()).toContain("connection: close");
    expect(keyed).toContain('"not_available"');
    const unkeyed = await upload("");
    expect(unkeyed).toMatch(/^HTTP\/1\.1 401 /);
    expect(unkeyed.toLowerCase()).toContain("connection: close");
  });
});
