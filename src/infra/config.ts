import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import { dirname, isAbsolute, resolve } from "node:path";
import { parse } from "yaml";
import { z } from "zod";
import { parseDurationMs } from "../engine/duration.ts";
import { type ProfileConfig, runnerSchema } from "./config-runner.ts";

/**
 * The deployment configuration (DESIGN.md, "Configuration"), read from `deploy/*.yaml` and validated at start.
 * An unknown key is an error; every key has a default, so no file at all runs the embedded single node on
 * 127.0.0.1:8099 with the sqlite store under ./data and the echo runner.
 */
const durationS = z.number().positive();

const PROXY_LIST =
  "expected the proxies' addresses or subnets (127.0.0.1, 10.0.0.0/8, 10.0.0.0/255.0.0.0, ::1, or loopback, linklocal, uniquelocal), not true or a hop count: with those any client could name the address the lockout counts";

/** proxy-addr's names for the loopback, link-local and unique-local ranges. */
const PROXY_RANGE_NAMES = new Set(["loopback", "linklocal", "uniquelocal"]);

/**
 * Whether every entry of `value` (a comma-separated string or a list) is an IP address, a subnet (CIDR prefix or an
 * IPv4 netmask) or one of proxy-addr's range names.
 */
const isProxyList = (value: string | readonly string[]): boolean =>
  (typeof value === "string" ? value.split(",") : value).every((entry) => {
    const trimmed = entry.trim();
    if (PROXY_RANGE_NAMES.has(trimmed)) return true;
    const [address, bits, extra] = trimmed.split("/");
    const family = isIP(address ?? "");
    if (family === 0 || extra !== undefined) return false;
    if (bits === undefined) return true;
    if (family === 4 && isIP(bits) === 4) return true;
    return /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
  });

export type { ProfileConfig };

export const configSchema = z
  .object({
    session_mode: z.enum(["duplex", "turn"]).default("duplex"),
    duplex_session: z
      .object({
        max_sessions: z.number().int().positive().default(4),
        idle_ttl_s: durationS.nullable().default(300),
        disconnect_grace_s: durationS.default(30),
        max_pending_input_bytes_per_session: z
          .number()
          .int()
          .positive()
          .default(16 * 1024 * 1024),
        max_pending_turns_per_session: z.number().int().positive().default(4),
        /** Live output a socket may leave unread (bytes of JSON text, events); beyond it `output_backpressure`. */
        max_output_buffer_bytes: z
          .number()
          .int()
          .positive()
          .default(2 * 1024 * 1024),
        max_output_buffer_events: z.number().int().positive().default(512),
        /** A resume replays missed events while the session has been detached at most this long (null: always). */
        resume_replay_ttl_s: durationS.nullable().default(60),
        /** Bytes of JSON text one resume may replay; beyond: `session.resync_required{journal_overflow}`. */
        resume_replay_max_bytes: z.number().int().positive().nullable().default(null),
        /** ms a response may go without model output before it ends failed (`response_timeout`). */
        response_timeout_ms: z.number().int().min(100).default(30_000),
        /**
         * Seconds a session may live from its opening, however active (null: no limit, the default); at it the
         * session ends with `session.expired{reason: max_lifetime_expired}`.
         */
        max_session_lifetime_s: z.number().min(1).nullable().default(null),
      })
      .strict()
      .prefault({}),
    /**
     * Retention of finished sessions: the server removes, at start and then hourly, every session that ended
     * (closed or expired) longer ago than `older_than` (7d, 12h, 30m: a number other than 0 needs its unit), after writing it to
     * `export_dir` as a session file when given. Absent: every log is kept.
     */
    retention: z
      .object({
        older_than: z
          .union([z.string(), z.number()])
          .transform(String)
          .refine(
            (v) => parseDurationMs(v) !== null,
            "expected a duration with its unit, such as 7d, 12h, 30m or 45s (a bare number other than 0 has none)",
          )
          .transform((v) => parseDurationMs(v) ?? 0),
        export_dir: z.string().optional(),
      })
      .strict()
      .optional(),
    /**
     * This node among those sharing one PostgreSQL store (issue 22, part 4): its id (default: host name and process
     * id) and its lease, renewed every third of it on the database's clock; a node whose lease runs out loses its
     * sessions to the others. Unused with a sqlite store (one node).
     */
    node: z
      .object({
        id: z
          .string()
          .regex(/^[A-Za-z0-9._:-]{1,64}$/, "letters, digits, . _ : - (at most 64)")
          .optional(),
        lease_s: z.number().positive().max(3600).default(10),
      })
      .strict()
      .default({ lease_s: 10 }),
    event_store: z
      // The embedded sqlite file (the default), or a store several nodes share: PostgreSQL, KurrentDB (the
      // design card's EventStoreDB). src/infra/event-store/open.ts opens them.
      .discriminatedUnion("kind", [
        z.object({ kind: z.literal("sqlite"), path: z.string().default("./data/duplex.sqlite") }).strict(),
        z
          .object({
            kind: z.literal("postgres"),
            /** postgres://user:password@host:port/database */
            url: z.string().regex(/^postgres(ql)?:\/\//, "a postgres:// URL"),
            /** How often live tails look for other nodes' appends, ms. */
            poll_ms: z.number().int().positive().default(100),
          })
          .strict(),
        z
          .object({
            kind: z.literal("kurrentdb"),
            /** kurrentdb://host:port?tls=false (the client's connection string; esdb:// works too). */
            url: z.string().regex(/^(kurrentdb|kdb|esdb)(\+discover)?:\/\//, "a kurrentdb:// connection string"),
          })
          .strict(),
      ])
      .default({ kind: "sqlite", path: "./data/duplex.sqlite" }),
    runner: runnerSchema,
    /**
     * API keys (none: no authentication), compared in constant time; and the lockout of an address after repeated
     * failed checks: `max_failed_attempts` failures within `failed_attempts_window_s` of the first one refuse that
     * address with HTTP 429 for `lockout_s`, even with a good key (null: no lockout).
     */
    auth: z
      .object({
        api_keys: z.array(z.string().min(1)).default([]),
        max_failed_attempts: z.number().int().positive().nullable().default(10),
        failed_attempts_window_s: durationS.default(60),
        lockout_s: durationS.default(300),
      })
      .strict()
      .prefault({}),
    listen: z
      .object({
        host: z.string().default("127.0.0.1"),
        port: z.number().int().min(0).max(65535).default(8099),
        /**
         * Serve HTTPS and `wss:` with this PEM certificate and private key (file paths, relative to the working
         * directory). Absent: plain HTTP and `ws:`. The `openai` SDK's Node client always dials `wss:`.
         */
        tls: z
          .object({ cert: z.string().min(1), key: z.string().min(1) })
          .strict()
          .optional(),
        /**
         * The proxies in front of the server whose `X-Forwarded-For` names the client (for the auth lockout, the
         * per-address limits and the logs): addresses or subnets (`127.0.0.1`, `10.0.0.0/8`, `::1`; comma-separated or
         * a list), read right to left and only from these peers. False (default): the client is the socket's peer.
         * `true` and hop counts are refused: with them any client could name the address the lockout counts.
         */
        trust_proxy: z
          .union([z.literal(false), z.string().min(1), z.array(z.string().min(1))], { error: PROXY_LIST })
          .refine((value) => value === false || isProxyList(value), PROXY_LIST)
          .default(false),
        /**
         * Host names (besides loopback names and the listening address) a request's `Host` may name while no API
         * keys are configured; others get 403 `forbidden_host` (DNS rebinding, issue 32 part 3).
         */
        allowed_hosts: z.array(z.string().min(1)).default([]),
        /**
         * Origins (`https://app.example.com`) besides the server's own whose browsers may upgrade a socket or send
         * a state-changing request; they get CORS answers. Others get 403 `forbidden_origin`. Never `*`.
         */
        allowed_origins: z.array(z.string().regex(/^https?:\/\/[^/]+$/, "an origin: scheme://host[:port]")).default([]),
        /** Open sockets (HTTP and WebSocket) in all; one more is refused before its upgrade (503). */
        max_connections: z.number().int().positive().default(2048),
        /** Open sockets from one client address; one more is refused before its upgrade (429). */
        max_connections_per_address: z.number().int().positive().default(512),
        /** s: a request's headers and body must have arrived within this long (408 and closed otherwise). */
        request_timeout_s: durationS.default(25),
      })
      .strict()
      .prefault({}),
    /**
     * `GET /metrics` (Prometheus): `access: open` (default, as scrapers expect), or `api_keys` (a key as for `/v1`);
     * `listen: {host, port}` serves it on an address of its own instead (a private interface), and not on the main one.
     */
    metrics: z
      .object({
        access: z.enum(["open", "api_keys"]).default("open"),
        listen: z
          .object({ host: z.string().default("127.0.0.1"), port: z.number().int().min(0).max(65535) })
          .strict()
          .optional(),
      })
      .strict()
      .prefault({}),
    /**
     * Bounds on what one request may cost (docs/deploy.md, "Limits"): refused before any work is done for it.
     */
    limits: z
      .object({
        /** Bytes of one HTTP request body; beyond it 413 `request_too_large`. */
        http_body_bytes: z
          .number()
          .int()
          .positive()
          .default(16 * 1024 * 1024),
        /** s of audio one HTTP request (a chat completion's `input_audio`) may carry; beyond it `bad_audio`. */
        request_audio_s: z.number().positive().default(300),
        /** Client events other than audio appends one session may send per second (token bucket refill). */
        events_per_s: z.number().positive().default(100),
        /** The token bucket's size: a burst of that many events passes at once. */
        event_burst: z.number().int().positive().default(200),
        /**
         * Audio appends one session may send per second (a bucket of their own: each is a log entry, whatever audio
         * it carries, so a flood of one-sample appends is bounded as other events are).
         */
        appends_per_s: z.number().positive().default(1000),
        /** The appends' bucket size. */
        append_burst: z.number().int().positive().default(4000),
        /** MB free on the store's disk below which new sessions are refused with `resource_exhausted`. */
        disk_free_floor_mb: z.number().nonnegative().default(256),
        /** MB free below which open sessions end cleanly (`resource_exhausted`), their logs intact. */
        disk_hard_floor_mb: z.number().nonnegative().default(64),
      })
      .strict()
      .prefault({}),
    log_level: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  })
  .strict();

export type DeployConfig = z.infer<typeof configSchema>;

/** Thrown when a configuration file cannot be read or does not validate; `message` names every bad key. */
export class ConfigError extends Error {
  readonly code = "config_invalid";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ConfigError";
  }
}

/** Validates a parsed configuration object. @throws ConfigError */
export const parseConfig = (value: unknown, source = "configuration"): DeployConfig => {
  const parsed = configSchema.safeParse(value ?? {});
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
    throw new ConfigError(`${source} is invalid: ${problems}`);
  }
  return parsed.data;
};

/**
 * The environment variable whose URL replaces the configured `event_store` (docs/deploy.md, "Several nodes"), so a
 * node's database and its password stay out of the file: `postgres://` or `postgresql://` makes a PostgreSQL store,
 * `kurrentdb://` (`kdb://`, `esdb://`, `+discover`) a KurrentDB one. The configured store's other keys (`poll_ms`)
 * are kept when it is of the same kind; unset or empty: the file's store.
 */
export const EVENT_STORE_URL_ENV = "DUPLEX_EVENT_STORE_URL";

/**
 * `raw` (a parsed config file, or `{}`) with `event_store` taken from {@link EVENT_STORE_URL_ENV} when `env` sets it.
 * @throws ConfigError naming the variable when its URL is of no store's kind (the message shows its scheme only,
 *   never the URL, which may hold a password).
 */
const withStoreUrlFromEnv = (raw: unknown, env: NodeJS.ProcessEnv): unknown => {
  const url = env[EVENT_STORE_URL_ENV];
  if (url === undefined || url === "") return raw;
  const kind = /^postgres(ql)?:\/\//.test(url)
    ? "postgres"
    : /^(kurrentdb|kdb|esdb)(\+discover)?:\/\//.test(url)
      ? "kurrentdb"
      : null;
  if (kind === null) {
    const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:/.exec(url)?.[0] ?? "no scheme";
    throw new ConfigError(
      `${EVENT_STORE_URL_ENV}: expected a postgres:// URL or a kurrentdb:// connection string, got ${scheme}`,
    );
  }
  const config = typeof raw === "object" && raw !== null ? { ...(raw as Record<string, unknown>) } : {};
  const configured = config.event_store as { kind?: unknown } | undefined;
  config.event_store = { ...(configured?.kind === kind ? configured : { kind }), url };
  return config;
};

/**
 * Reads and validates a YAML file; no path gives the defaults. `DUPLEX_EVENT_STORE_URL` in `env` replaces the store
 * (see {@link EVENT_STORE_URL_ENV}). @throws ConfigError
 */
export const loadConfig = async (path?: string, env: NodeJS.ProcessEnv = process.env): Promise<DeployConfig> => {
  if (path === undefined) return parseConfig(withStoreUrlFromEnv({}, env), EVENT_STORE_URL_ENV);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new ConfigError(`cannot read ${path}: ${(error as Error).message}`, { cause: error });
  }
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (error) {
    const where = (error as { linePos?: { line: number; col: number }[] }).linePos?.[0];
    const first = ((error as Error).message.split("\n")[0] ?? "").replace(/ at line \d+, column \d+:?$/, "");
    throw new ConfigError(
      `${path}${where === undefined ? "" : `:${where.line}:${where.col}`}: YAML syntax error: ${first}`,
      { cause: error },
    );
  }
  return parseConfig(withStoreUrlFromEnv(resolveRelativePaths(raw, dirname(path)), env), path);
};

/**
 * The files a deployment file names (`runner.script`, `runner.ca_file`, `listen.tls.cert` and `.key`), resolved
 * against the folder of that file when relative, so a config works from any working folder. `event_store.path` is
 * where data goes, and stays relative to the working folder (as `--data`).
 */
const resolveRelativePaths = (raw: unknown, base: string): unknown => {
  if (typeof raw !== "object" || raw === null) return raw;
  const at = (v: unknown) => (typeof v === "string" && v !== "" && !isAbsolute(v) ? resolve(base, v) : v);
  const config = { ...(raw as Record<string, unknown>) };
  const runner = config.runner;
  if (typeof runner === "object" && runner !== null) {
    const r = { ...(runner as Record<string, unknown>) };
    if ("script" in r) r.script = at(r.script);
    if ("ca_file" in r) r.ca_file = at(r.ca_file);
    config.runner = r;
  }
  const tls = (config.listen as { tls?: unknown } | undefined)?.tls;
  if (typeof tls === "object" && tls !== null) {
    const t = { ...(tls as Record<string, unknown>) };
    t.cert = at(t.cert);
    t.key = at(t.key);
    config.listen = { ...(config.listen as Record<string, unknown>), tls: t };
  }
  return config;
};

export { sqlitePathIn } from "./event-store/paths.ts";
