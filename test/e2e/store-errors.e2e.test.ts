import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer } from "../support/server.ts";

/**
 * A database's error never reaches a client (issue 32, part 4; BEHAVIOUR.md, "The edges", "Store errors stay
 * inside"): ids that no session can have and revisions no store holds are 400/404 in the error envelope before any
 * query, and an unexpected store error is 500 `internal_error` with a fixed message.
 */

const get = (port: number, path: string, headers: Record<string, string> = {}) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, headers, agent: false }, (res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => {
        body += chunk.toString();
      });
      res.once("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.once("error", reject);
    req.end();
  });

describe("store errors stay inside", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it.each([
    ["a NUL", "/v1/sessions/sess_%00abc"],
    ["a lone surrogate", "/v1/sessions/sess_%ED%A0%80"],
    ["an id of 10 KB", `/v1/sessions/${"a".repeat(10_000)}`],
    ["a quote", "/v1/sessions/sess_'%20OR%201=1"],
    ["a NUL in a page's id", "/sessions/%00"],
    ["a NUL in a file name", "/v1/sessions/sess_0/responses/%00.wav"],
  ])("answers an id with %s with 400, 404 or 414 in the envelope, never the store's message", async (_what, path) => {
    const answer = await get(server.port, path);
    expect([400, 404, 414]).toContain(answer.status);
    const body = JSON.parse(answer.body) as { error: { code: string; message: string } };
    expect(["bad_event", "unknown_session"]).toContain(body.error.code);
    expect(body.error.message).not.toMatch(/sqlite|SQL|syntax|postgres|invalid byte sequence/i);
  });

  it.each([["99999999999999999999"], ["1e9"], ["-1"]])(
    "answers Last-Event-ID %s with 400 before any read",
    async (lastEventId) => {
      const answer = await get(server.port, "/v1/sessions/sess_00000000000000000000000000000000/events", {
        "Last-Event-ID": lastEventId,
      });
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.body)).toMatchObject({ error: { code: "bad_event" } });
    },
  );

  it("answers an unexpected store error with 500 internal_error and a fixed message", async () => {
    const store = server.store as { read: (...args: unknown[]) => Promise<unknown> };
    const read = store.read;
    store.read = async () => {
      throw new Error("SQLITE_CORRUPT: database disk image is malformed at page 7");
    };
    try {
      const answer = await get(server.port, "/v1/sessions/sess_00000000000000000000000000000000");
      expect(answer.status).toBe(500);
      const body = JSON.parse(answer.body) as { error: { code: string; message: string; type: string } };
      expect(body.error).toMatchObject({ code: "internal_error", type: "server_error" });
      expect(answer.body).not.toContain("SQLITE");
      expect(answer.body).not.toContain("page 7");
    } finally {
      store.read = read;
    }
  });
});
