import { Readable } from "node:stream";
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { jsonDepthExceededAt, MAX_JSON_DEPTH, MAX_JSON_VALUES } from "../../src/protocol/index.ts";
import { registerBoundedJsonParser } from "../../src/server/json-body.ts";

/** A nesting of `depth` arrays, `[[...]]`, as bytes. */
const nested = (depth: number): Buffer => Buffer.from(`${"[".repeat(depth)}${"]".repeat(depth)}`);

describe("jsonDepthExceededAt", () => {
  it("finds where nesting passes the limit, counting the outermost value as level 1", () => {
    expect(jsonDepthExceededAt(nested(128), 128)).toBe(-1);
    expect(jsonDepthExceededAt(nested(129), 128)).toBe(128);
    expect(jsonDepthExceededAt(Buffer.from('{"a":[{"b":1}]}'), 3)).toBe(-1);
    expect(jsonDepthExceededAt(Buffer.from('{"a":[{"b":1}]}'), 2)).toBe(6);
    expect(jsonDepthExceededAt(Buffer.from("1"), 0)).toBe(-1);
  });

  it("does not count brackets and braces inside strings, escaped quotes and backslashes included", () => {
    const text = JSON.stringify({ s: `${"[{".repeat(500)}\\" ]]] \\\\`, t: '"[[[' });
    expect(jsonDepthExceededAt(Buffer.from(text), 1)).toBe(-1);
    expect(jsonDepthExceededAt(Buffer.from(JSON.stringify({ s: "é[ü{", a: [[1]] })), 2)).toBe(
      Buffer.from('{"s":"é[ü{","a":[').length,
    );
  });

  it("scans 200,000 levels in one pass, without recursion", () => {
    const deep = nested(200_000);
    expect(jsonDepthExceededAt(deep, MAX_JSON_DEPTH)).toBe(MAX_JSON_DEPTH);
    expect(jsonDepthExceededAt(deep, 1_000_000)).toBe(-1);
  });
});

describe("registerBoundedJsonParser", () => {
  let app: FastifyInstance;
  afterEach(async () => {
    await app.close();
  });

  /** A bare app with the parser and one route that echoes the body it got, and how often it ran. */
  const appWith = async (bodyLimitBytes: number) => {
    app = Fastify();
    registerBoundedJsonParser(app, { bodyLimitBytes });
    const seen: unknown[] = [];
    app.post("/any", async (request) => {
      seen.push(request.body);
      return { got: request.body };
    });
    await app.ready();
    return seen;
  };
  const post = (payload: string | Buffer | Readable, headers: Record<string, string> = {}) =>
    app.inject({ method: "POST", url: "/any", headers: { "content-type": "application/json", ...headers }, payload });

  it("parses a body within both limits and hands it to the route", async () => {
    const seen = await appWith(1024);
    const body = { a: [1, { b: "[[[" }], c: null };
    const reply = await post(JSON.stringify(body));
    expect(reply.statusCode).toBe(200);
    expect(reply.json()).toEqual({ got: body });
    expect(seen).toEqual([body]);
  });

  it("accepts 128 levels and refuses 129 with 400 invalid_json in the handshake envelope, before the route", async () => {
    const seen = await appWith(1024);
    expect((await post(nested(128))).statusCode).toBe(200);
    expect((await post(`${'{"a":'.repeat(127)}[]${"}".repeat(127)}`)).statusCode).toBe(200);
    const refused = await post(`${'{"a":'.repeat(129)}1${"}".repeat(129)}`);
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toEqual({
      type: "error",
      code: "invalid_json",
      error: {
        type: "invalid_request_error",
        code: "invalid_json",
        message: expect.stringMatching(/^the JSON body nests objects and arrays deeper than 128 levels/),
        event_id: null,
        param: null,
      },
    });
    expect(seen).toHaveLength(2);
  });

  it("refuses a body of more than 100,000 values before parsing it; commas inside strings do not count", async () => {
    const seen = await appWith(16 * 1024 * 1024);
    const wide = (n: number) => `[${Array(n).fill("0").join(",")}]`;
    expect((await post(wide(MAX_JSON_VALUES + 1))).statusCode).toBe(200);
    const refused = await post(wide(MAX_JSON_VALUES + 2));
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({
      code: "invalid_json",
      error: { message: expect.stringMatching(/^the JSON body holds more than 100000 values/) },
    });
    expect((await post(JSON.stringify({ s: ",".repeat(MAX_JSON_VALUES * 2) }))).statusCode).toBe(200);
    expect(seen).toHaveLength(2);
  });

  it("refuses a 200,000-deep body at once, without a stack overflow, and answers the next request", async () => {
    const seen = await appWith(1024 * 1024);
    const refused = await post(nested(200_000));
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({
      code: "invalid_json",
      error: {
        message:
          "the JSON body nests objects and arrays deeper than 128 levels (level 129 opens at byte 128); it was not parsed",
      },
    });
    expect(seen).toEqual([]);
    expect((await post('{"ok":true}')).json()).toEqual({ got: { ok: true } });
  });

  it("refuses a body over the limit with 413 request_too_large and connection: close, by content-length or as it streams", async () => {
    const seen = await appWith(1000);
    const body = JSON.stringify({ pad: "x".repeat(2000) });
    const declared = await post(body);
    expect(declared.statusCode).toBe(413);
    expect(declared.headers.connection).toBe("close");
    expect(declared.json()).toMatchObject({
      type: "error",
      code: "request_too_large",
      error: {
        type: "invalid_request_error",
        code: "request_too_large",
        message: "the request body is over 1000 bytes (limits.http_body_bytes): its content-length is 2010",
      },
    });
    // No content-length: chunked, cut once 1000 bytes have arrived.
    const streamed = await post(Readable.from([Buffer.from(body.slice(0, 900)), Buffer.from(body.slice(900))]));
    expect(streamed.statusCode).toBe(413);
    expect(streamed.json()).toMatchObject({
      code: "request_too_large",
      error: { message: "the request body is over 1000 bytes (limits.http_body_bytes): more arrived" },
    });
    expect(seen).toEqual([]);
    expect((await post(JSON.stringify({ pad: "x".repeat(900) }))).statusCode).toBe(200);
  });

  it.each([
    ["text that is not JSON", "{nope", /^the body is not JSON: /],
    ["an empty body", "", /^the body is empty; expected a JSON value$/],
    ["a __proto__ key", '{"__proto__":{"admin":true}}', /__proto__ or constructor\.prototype key, which is refused/],
  ])("refuses %s with 400 invalid_json in the envelope", async (_name, payload, message) => {
    const seen = await appWith(1024);
    const refused = await post(payload);
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ code: "invalid_json", error: { code: "invalid_json", message } });
    expect(seen).toEqual([]);
  });

  it("reads application/json with a charset the same way", async () => {
    await appWith(16);
    const reply = await post(nested(200), { "content-type": "application/json; charset=utf-8" });
    expect(reply.statusCode).toBe(413);
  });
});
