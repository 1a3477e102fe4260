import type { FastifyReply, FastifyRequest } from "fastify";
import { handshakeErrorBody } from "../protocol/index.ts";
import { closeUnreadBody } from "./json-body.ts";

/**
 * The turn-based routes of an OpenAI-compatible model server (vLLM's and vLLM-Omni's) that a duplex deployment does
 * not serve (reference/fullduplex-design.md, "Deployment selects the serving stack": in duplex mode the server
 * exposes the realtime routes, `POST /v1/chat/completions`, `/v1/models` and `/health`, and every other turn-based
 * route reports "not available"). Each answers 400 `not_available` (invalid_request_error, vLLM's status for an API
 * its model does not support, which no SDK retries) in the error envelope, naming what this server does serve; a
 * path that is none of these stays a 404 `not_found`. The key check comes first, as on every keyed route, so a
 * client without a key learns nothing of the table.
 */
export const NOT_AVAILABLE_ROUTES: readonly (readonly ["GET" | "POST" | "DELETE", string])[] = [
  ["POST", "/v1/completions"],
  ["POST", "/v1/embeddings"],
  ["POST", "/v1/responses"],
  ["GET", "/v1/responses/:id"],
  ["DELETE", "/v1/responses/:id"],
  ["POST", "/v1/audio/speech"],
  ["POST", "/v1/audio/transcriptions"],
  ["POST", "/v1/audio/translations"],
  ["POST", "/v1/images/generations"],
  ["POST", "/v1/images/edits"],
  ["POST", "/tokenize"],
  ["POST", "/detokenize"],
  ["POST", "/pooling"],
  ["POST", "/classify"],
  ["POST", "/score"],
  ["POST", "/v1/score"],
  ["POST", "/rerank"],
  ["POST", "/v1/rerank"],
  ["POST", "/v2/rerank"],
];

/** What a duplex deployment serves, as the refusal says it. */
const SERVED = "/v1/realtime (alias /v1/duplex), POST /v1/chat/completions, /v1/models and /health";

/**
 * The refusal of a request to one of `NOT_AVAILABLE_ROUTES`: 400 `not_available`, the envelope naming its method and
 * path and what this server serves. app.ts registers each route of the table with `access: "api_keys"` and this as
 * its `onRequest` hook (and handler): after the key check and before any body is read or parsed, so a multipart
 * upload of `/v1/audio/transcriptions` is refused as a JSON one is, and costs nothing.
 */
export const refuseNotAvailable = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
  const path = request.url.split("?")[0];
  // A body is never read: the connection closes after the answer, so what is left of an upload is not drained.
  return closeUnreadBody(request, reply)
    .code(400)
    .send(
      handshakeErrorBody(
        "not_available",
        `${request.method} ${path} is not available: this server runs a full-duplex session model and serves ${SERVED}`,
      ),
    );
};
