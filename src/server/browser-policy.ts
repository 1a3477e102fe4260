import type { IncomingHttpHeaders } from "node:http";
import { isIP } from "node:net";

/** Why a browser's request is refused: 403 with a code of the error table. */
export interface BrowserRefusal {
  readonly status: 403;
  readonly code: "forbidden_host" | "forbidden_origin";
  readonly message: string;
}

/** What the browser policy is built from (`listen.*` and `auth.api_keys` of the deployment config). */
export interface BrowserPolicyOptions {
  /** Whether API keys are configured: without them the `Host` rule applies (DNS rebinding). */
  readonly keysConfigured: boolean;
  /** The host the server listens on (`listen.host`): a name there is accepted in `Host`. */
  readonly listenHost: string;
  /** `listen.allowed_hosts`: more names accepted in `Host` (lower case compared). */
  readonly allowedHosts: readonly string[];
  /** `listen.allowed_origins`: origins (`https://app.example.com`) besides the server's own; they get CORS answers. */
  readonly allowedOrigins: readonly string[];
}

/** Request headers a browser may send cross-origin to an allowed origin's routes (the SDKs' and the pages'). */
const CORS_ALLOWED_HEADERS = "authorization, content-type, api-key, openai-beta, openai-organization, last-event-id";
const CORS_ALLOWED_METHODS = "GET, POST, OPTIONS";
const STATE_CHANGING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** The host part of a `Host` header (`example.com:8099` -> `example.com`, `[::1]:80` -> `::1`), lower case. */
export const hostName = (host: string): string => {
  const lower = host.trim().toLowerCase();
  if (lower.startsWith("[")) return lower.slice(1, lower.indexOf("]") === -1 ? undefined : lower.indexOf("]"));
  const colon = lower.lastIndexOf(":");
  return colon === -1 ? lower : lower.slice(0, colon);
};

/** `localhost`, `*.localhost` (RFC 6761: always loopback). IP literals are judged apart. */
const isLoopbackName = (name: string): boolean => name === "localhost" || name.endsWith(".localhost");

/**
 * The rules for requests a web page may send (issue 32, part 3; BEHAVIOUR.md, "The edges", "Browsers"):
 *
 * - **Host** (only while no API keys are configured, the default): a page on another site can reach a server on
 *   loopback by DNS rebinding (its own name made to resolve to 127.0.0.1), and then its requests carry that name in
 *   `Host`. Accepted: IP literals (a rebinding page never has one), loopback names, the listening host and
 *   `listen.allowed_hosts`. Others: 403 `forbidden_host`.
 * - **Origin**, with or without keys: a WebSocket upgrade or a state-changing request (POST, PUT, PATCH, DELETE)
 *   whose `Origin` is not the server's own (its host equal to `Host`) nor one of `listen.allowed_origins` is refused
 *   with 403 `forbidden_origin` (`Origin: null` included). Requests without `Origin` (every non-browser client) pass.
 * - **CORS**: an allowed origin gets `Access-Control-Allow-Origin` naming it (never `*`), and its preflights
 *   (`OPTIONS` with `Access-Control-Request-Method`) are answered 204 before any key is asked for.
 */
export const createBrowserPolicy = (options: BrowserPolicyOptions) => {
  const hosts = new Set([hostName(options.listenHost), ...options.allowedHosts.map((h) => hostName(h))]);
  const origins = new Set(options.allowedOrigins.map((o) => o.toLowerCase()));

  const hostAllowed = (host: string | undefined): boolean => {
    if (!options.keysConfigured) {
      if (host === undefined) return false;
      const name = hostName(host);
      return isIP(name) !== 0 || isLoopbackName(name) || hosts.has(name);
    }
    return true;
  };

  const originAllowed = (origin: string, host: string | undefined): boolean => {
    const lower = origin.toLowerCase();
    if (origins.has(lower)) return true;
    try {
      const url = new URL(lower);
      return (
        (url.protocol === "http:" || url.protocol === "https:") && host !== undefined && url.host === host.toLowerCase()
      );
    } catch {
      return false; // "null" and anything else that is not an origin
    }
  };

  return {
    /**
     * Null when the request may go on, else why not: the Host rule for every request of a route that is not open,
     * the Origin rule for upgrades (`upgrade`) and state-changing methods.
     */
    check(method: string, headers: IncomingHttpHeaders, upgrade: boolean): BrowserRefusal | null {
      const host = headers.host;
      if (!hostAllowed(host)) {
        return {
          status: 403,
          code: "forbidden_host",
          message: `Host ${JSON.stringify(host ?? "")} is not a name this server answers to without API keys: use 127.0.0.1 or localhost, or add it to listen.allowed_hosts`,
        };
      }
      const origin = headers.origin;
      if (origin !== undefined && (upgrade || STATE_CHANGING.has(method)) && !originAllowed(origin, host)) {
        return {
          status: 403,
          code: "forbidden_origin",
          message: `Origin ${JSON.stringify(origin)} may not ${upgrade ? "open a socket" : `send ${method}`} here: add it to listen.allowed_origins`,
        };
      }
      return null;
    },
    /** CORS response headers for `origin` (none unless it is one of `listen.allowed_origins`). */
    corsHeaders(origin: string | undefined): Readonly<Record<string, string>> {
      if (origin === undefined || !origins.has(origin.toLowerCase())) return {};
      return { "access-control-allow-origin": origin, vary: "Origin", "access-control-expose-headers": "retry-after" };
    },
    /** The headers of a 204 preflight answer, or null when `method`/`headers` are not a preflight of an allowed origin. */
    preflight(method: string, headers: IncomingHttpHeaders): Readonly<Record<string, string>> | null {
      const origin = headers.origin;
      if (method !== "OPTIONS" || headers["access-control-request-method"] === undefined) return null;
      if (origin === undefined || !origins.has(origin.toLowerCase())) return null;
      return {
        "access-control-allow-origin": origin,
        vary: "Origin",
        "access-control-allow-methods": CORS_ALLOWED_METHODS,
        "access-control-allow-headers": CORS_ALLOWED_HEADERS,
        "access-control-max-age": "600",
      };
    },
  };
};

export type BrowserPolicy = ReturnType<typeof createBrowserPolicy>;
