import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

/** The subprotocol prefix a browser client (which cannot set headers) puts its key behind, as OpenAI's SDKs do. */
const INSECURE_KEY_PROTOCOL = "openai-insecure-api-key.";

/**
 * The API key an upgrade request offers, in this order: `Authorization: Bearer KEY`, the `api-key` header (Azure
 * OpenAI style), or a `Sec-WebSocket-Protocol` entry `openai-insecure-api-key.KEY`. Undefined when none is there.
 */
export const offeredApiKey = (headers: IncomingHttpHeaders): string | undefined => {
  const bearer = headers.authorization?.replace(/^Bearer\s+/i, "");
  const header = headers["api-key"];
  const offered = (headers["sec-websocket-protocol"] ?? "")
    .split(",")
    .map((p) => p.trim())
    .find((p) => p.startsWith(INSECURE_KEY_PROTOCOL))
    ?.slice(INSECURE_KEY_PROTOCOL.length);
  return bearer ?? (typeof header === "string" ? header : undefined) ?? offered;
};

const sha256 = (text: string): Buffer => createHash("sha256").update(text).digest();

/**
 * Makes the check of offered keys against the configured `keys` (`auth.api_keys`), in constant time: keys are
 * compared as SHA-256 digests (32 bytes whatever the key's length) with `crypto.timingSafeEqual`, and every
 * configured key is compared, with no early exit, so the time taken says neither which key matched nor how much of
 * one did. A missing key (undefined) is refused after the same work.
 */
export const createApiKeyCheck = (keys: readonly string[]): ((offered: string | undefined) => boolean) => {
  const digests = keys.map(sha256);
  return (offered) => {
    const digest = sha256(offered ?? "");
    let matched = 0;
    for (const known of digests) matched |= timingSafeEqual(digest, known) ? 1 : 0;
    return offered !== undefined && matched === 1;
  };
};
