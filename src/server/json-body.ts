import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerBase,
} from "fastify";
import type { ErrorCode } from "../domain/index.ts";
import {
  handshakeErrorBody,
  jsonDepthExceededAt,
  jsonValuesExceededAt,
  MAX_JSON_DEPTH,
  MAX_JSON_VALUES,
} from "../protocol/index.ts";

/**
 * JSON request bodies on every HTTP route, bounded before any work is done for them (issue 32, part 2; docs/deploy.md,
 * "Limits"): at most `limits.http_body_bytes` bytes (413 beyond, the rest of the body left unread) and at most
 * {@link MAX_JSON_DEPTH} levels of nesting, as client frames on the WebSocket (400 beyond), checked by a scan over
 * the bytes before JSON.parse sees them (src/protocol/json-depth.ts), so no depth reaches a recursive walk. A refused
 * body never reaches a route's handler: no session is opened for it (a chat completion's `max_sessions` slot).
 */

/** `limits.http_body_bytes`' default (src/infra/config.ts): 16 MiB. */
export const DEFAULT_HTTP_BODY_BYTES = 16 * 1024 * 1024;

/** Options of {@link registerBoundedJsonParser}. */
export interface BoundedJsonOptions {
  /** Bytes of one body, at most (`limits.http_body_bytes`). */
  readonly bodyLimitBytes: number;
  /** Levels of nesting of objects and arrays, at most (default {@link MAX_JSON_DEPTH}, the WebSocket's). */
  readonly maxDepth?: number;
}

/** A body the parser refused: what the route's preValidation hook answers instead of running the route. */
class RefusedBody {
  constructor(
    readonly status: 400 | 413,
    readonly code: ErrorCode,
    readonly message: string,
  ) {}
}

/**
 * Replaces fastify's `application/json` parser on `app` (call it before any route is added) with one that reads at
 * most `bodyLimitBytes` (a `content-length` over it is refused without reading), refuses nesting deeper than
 * `maxDepth` before parsing, then parses with fastify's own JSON parser (`__proto__` and `constructor.prototype`
 * keys refused, as by default). Refusals are answered by a `preValidation` hook (the parser hands the hook a
 * refusal as the body, so the answer does not depend on the app's error handler) in the handshake envelope
 * (`handshakeErrorBody`): 413 `request_too_large` for a body over the limit (with `connection: close`, as what is
 * left of it is not read), 400 `invalid_json` for a body too deep, empty, or not JSON; the message says which
 * limit and where. Other content types are left to fastify: `text/plain` within its `bodyLimit` (app.ts sets it to
 * the same limit), any other 415.
 *
 * @param app the fastify instance, before its routes.
 * @param options the body limit (bytes) and depth limit (levels).
 */
export const registerBoundedJsonParser = <Server extends RawServerBase, Logger extends FastifyBaseLogger>(
  app: FastifyInstance<Server, RawRequestDefaultExpression<Server>, RawReplyDefaultExpression<Server>, Logger>,
  options: BoundedJsonOptions,
): void => {
  const limit = options.bodyLimitBytes;
  const maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser(
    "application/json",
    async (request: { readonly headers: IncomingHttpHeaders }, payload: unknown) => {
      const declared = Number(request.headers["content-length"]);
      if (declared > limit) return tooLarge(limit, `its content-length is ${declared}`);
      const bytes = await readAtMost(payload as IncomingMessage, limit);
      if (bytes === null) return tooLarge(limit, "more arrived");
      return parseBounded(bytes, maxDepth, (text, done) =>
        parseJson(request as Parameters<typeof parseJson>[0], text, done),
      );
    },
  );
  app.addHook("preValidation", async (request, reply) => {
    const body: unknown = request.body;
    if (!(body instanceof RefusedBody)) return;
    if (body.status === 413) reply.header("connection", "close");
    return reply.code(body.status).send(handshakeErrorBody(body.code, body.message));
  });
};

const tooLarge = (limit: number, what: string): RefusedBody =>
  new RefusedBody(
    413,
    "request_too_large",
    `the request body is over ${limit} bytes (limits.http_body_bytes): ${what}`,
  );

/**
 * The body's bytes, or null as soon as more than `limit` have arrived (what follows is not kept: the listeners are
 * removed, and the connection is closed after the answer).
 * @throws the stream's error when the client goes away mid-body.
 */
const readAtMost = (payload: IncomingMessage, limit: number): Promise<Buffer | null> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const stop = (): void => {
      payload.off("data", onData);
      payload.off("end", onEnd);
      payload.off("error", onError);
      payload.off("close", onClose);
    };
    const onData = (chunk: Buffer | string): void => {
      const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      received += bytes.length;
      if (received > limit) {
        stop();
        resolve(null);
        return;
      }
      chunks.push(bytes);
    };
    const onEnd = (): void => {
      stop();
      resolve(Buffer.concat(chunks, received));
    };
    const onError = (error: Error): void => {
      stop();
      reject(Object.assign(error, { statusCode: 400 }));
    };
    const onClose = (): void => onError(new Error("the client closed the request before its body ended"));
    payload.on("data", onData);
    payload.on("end", onEnd);
    payload.on("error", onError);
    payload.on("close", onClose);
    payload.resume();
  });

/**
 * `bytes` parsed by `parse` (fastify's JSON parser, which calls back at once), or the refusal: nesting deeper
 * than `maxDepth` (found before parsing), an empty body, or text that does not parse.
 */
const parseBounded = (
  bytes: Buffer,
  maxDepth: number,
  parse: (text: string, done: (error: Error | null, value?: unknown) => void) => void,
): unknown => {
  const at = jsonDepthExceededAt(bytes, maxDepth);
  if (at >= 0)
    return new RefusedBody(
      400,
      "invalid_json",
      `the JSON body nests objects and arrays deeper than ${maxDepth} levels (level ${maxDepth + 1} opens at byte ${at}); it was not parsed`,
    );
  if (bytes.length === 0) return new RefusedBody(400, "invalid_json", "the body is empty; expected a JSON value");
  const text = bytes.toString("utf8");
  const past = jsonValuesExceededAt(text, MAX_JSON_VALUES);
  if (past >= 0)
    return new RefusedBody(
      400,
      "invalid_json",
      `the JSON body holds more than ${MAX_JSON_VALUES} values (commas outside strings; the one past it at character ${past}); it was not parsed`,
    );
  const result: { settled?: { readonly value: unknown } } = {};
  parse(text, (error, value) => {
    result.settled = { value: error === null ? value : new RefusedBody(400, "invalid_json", whyNotJson(text)) };
  });
  if (result.settled === undefined) throw new Error("fastify's JSON parser did not answer synchronously");
  return result.settled.value;
};

/** Why fastify's parser refused `text`: JSON.parse's own message, or the prototype keys it refuses. */
const whyNotJson = (text: string): string => {
  try {
    JSON.parse(text);
    return "the JSON body has a __proto__ or constructor.prototype key, which is refused";
  } catch (error) {
    return `the body is not JSON: ${(error as Error).message}`;
  }
};

/**
 * For an answer sent before the request's body is read (a refusal from an `onRequest` hook): `connection: close`
 * when the request has a body (a `content-length` other than 0, or `transfer-encoding`), so that node does not read
 * and discard the rest of an upload of any size on a connection kept alive. Returns `reply`.
 */
export const closeUnreadBody = (request: FastifyRequest, reply: FastifyReply): FastifyReply => {
  const length = request.headers["content-length"];
  if (request.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0"))
    reply.header("connection", "close");
  return reply;
};
