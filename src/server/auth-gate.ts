import type { IncomingMessage } from "node:http";
import proxyAddr from "@fastify/proxy-addr";
import type { Logger } from "pino";
import { addressKey } from "./address-key.ts";
import { createApiKeyCheck, offeredApiKey } from "./api-keys.ts";
import { type AuthLockoutOptions, createAuthLockout } from "./auth-lockout.ts";

/** Why a request is refused: the HTTP status line, the error code, a message, and headers to add. */
export interface AuthRefusal {
  readonly status: 401 | 429;
  readonly code: "unauthorized" | "too_many_auth_failures";
  readonly message: string;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * `listen.trust_proxy`: false (default: the client's address is the socket's peer), or the addresses and subnets of
 * the proxies in front (`"127.0.0.1, 10.0.0.0/8"` or a list). `X-Forwarded-For` is read only when the peer is one of
 * them, right to left, up to the first address that is not a trusted proxy.
 */
export type TrustProxy = false | string | readonly string[];

/**
 * The key check of every request that needs one (BEHAVIOUR.md, "Errors"; docs/deploy.md, "Configuration"): the WebSocket
 * upgrade of the realtime paths and every `/v1/*` route. With `auth.api_keys` set, a request must offer one
 * (`offeredApiKey`); failures are counted per client address (the peer, or the address a trusted proxy forwards),
 * and an address past `auth.max_failed_attempts` is refused with 429 for `lockout_s`, whatever key it offers.
 * Neither the offered key nor anything derived from it is logged.
 */
export interface AuthGate {
  /** Whether keys are configured at all (none: every request passes). */
  readonly required: boolean;
  /** Null when `request` may pass, else why it is refused. */
  check(request: IncomingMessage): Promise<AuthRefusal | null>;
  /** The client's address of `request`, as the lockout counts it. */
  addressOf(request: IncomingMessage): string;
  /** Whether a socket's peer `address` is one of `trust_proxy`'s proxies (it speaks for many clients). */
  isTrustedProxy(address: string): boolean;
}

export const createAuthGate = (options: {
  readonly apiKeys: readonly string[];
  readonly lockout: AuthLockoutOptions | null;
  readonly trustProxy: TrustProxy;
  readonly log: Logger;
}): AuthGate => {
  const checkKey = options.apiKeys.length === 0 ? null : createApiKeyCheck(options.apiKeys);
  const lockout = checkKey === null || options.lockout === null ? null : createAuthLockout(options.lockout);
  const setting = options.trustProxy;
  const trust: (address: string, hop: number) => boolean =
    setting === false
      ? () => false
      : proxyAddr.compile(typeof setting === "string" ? setting.split(",").map((s) => s.trim()) : [...setting]);
  const addressOf = (request: IncomingMessage): string => proxyAddr(request, trust) ?? "unknown";
  return {
    required: checkKey !== null,
    addressOf,
    isTrustedProxy: (address) => trust(address, 0),
    async check(request) {
      if (checkKey === null) return null;
      const address = addressOf(request);
      const path = new URL(request.url ?? "/", "http://localhost").pathname;
      const refused = request.headers.upgrade === undefined ? "request refused" : "upgrade refused";
      // Counted by address, an IPv6 client by its /64 (address-key.ts).
      const key = addressKey(address);
      const waitMs = (await lockout?.lockedFor(key)) ?? 0;
      if (waitMs > 0) {
        const retryAfterS = Math.ceil(waitMs / 1000);
        options.log.info(
          { code: "too_many_auth_failures", path, address, retryAfterS },
          `${refused}: address locked out after failed API key checks`,
        );
        return {
          status: 429,
          code: "too_many_auth_failures",
          message: `too many failed API key checks from this address; retry after ${retryAfterS} s`,
          headers: { "Retry-After": String(retryAfterS) },
        };
      }
      if (checkKey(offeredApiKey(request.headers))) return null;
      options.log.info({ code: "unauthorized", path, address }, `${refused}: missing or invalid API key`);
      if ((await lockout?.failed(key)) === true) {
        options.log.info(
          { code: "too_many_auth_failures", address, lockoutS: options.lockout?.lockoutS },
          "address locked out after repeated failed API key checks",
        );
      }
      const refusal: AuthRefusal = {
        status: 401,
        code: "unauthorized",
        message: "missing or invalid API key",
        headers: {},
      };
      return refusal;
    },
  };
};
