import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../src/infra/config.ts";
import { startTestServer } from "../support/server.ts";
import { type UpgradeAnswer, upgradeRequest } from "../support/upgrade-request.ts";

/**
 * Keys and tokens (issue 10, part 8): API keys are checked at the upgrade, in constant time (src/server/api-keys.ts),
 * and an address that fails the check `auth.max_failed_attempts` times within `auth.failed_attempts_window_s` is
 * refused with 429 for `auth.lockout_s`, even with a good key. Over real sockets, with raw upgrade requests.
 */

/** An upgrade of `url` (ws://) with `headers`; `?autostart=0` keeps a 101's socket from opening a session. */
const upgrade = (url: string, headers: Record<string, string> = {}): Promise<UpgradeAnswer> => {
  const target = new URL(url.replace(/^ws/, "http"));
  target.searchParams.set("autostart", "0");
  return upgradeRequest(Number(target.port), `${target.pathname}${target.search}`, headers);
};

const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

describe("API keys at the upgrade", () => {
  let stop: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await stop?.();
    stop = null;
  });

  it("accepts every configured key, by Bearer, api-key header or subprotocol, and nothing close to one", async () => {
    const server = await startTestServer({ auth: { api_keys: ["sk-first", "sk-second-and-longer"] } });
    stop = server.stop;
    const statuses = async (headers: Record<string, string>[]) => {
      const out: number[] = [];
      for (const h of headers) out.push((await upgrade(server.url, h)).status);
      return out;
    };
    expect(
      await statuses([
        bearer("sk-first"),
        bearer("sk-second-and-longer"),
        { "api-key": "sk-second-and-longer" },
        { "Sec-WebSocket-Protocol": "realtime, openai-insecure-api-key.sk-first" },
      ]),
    ).toEqual([101, 101, 101, 101]);
    expect(
      await statuses([
        {},
        bearer(""),
        bearer("sk-firs"),
        bearer("sk-firstx"),
        bearer("sk-second"),
        bearer("SK-FIRST"),
        { "api-key": "sk-first-and-longer" },
      ]),
    ).toEqual([401, 401, 401, 401, 401, 401, 401]);
  });

  it("answers a refused key with 401 and the error table's class in a JSON body", async () => {
    const server = await startTestServer({ auth: { api_keys: ["sk-right"] } });
    stop = server.stop;
    const refused = await upgrade(server.url, bearer("sk-wrong"));
    expect(refused).toEqual({
      status: 401,
      retryAfter: null,
      // The error envelope, with code repeated at the top level (BEHAVIOUR.md, "Errors", ours).
      body: {
        type: "error",
        code: "unauthorized",
        error: {
          type: "invalid_request_error",
          code: "unauthorized",
          message: "missing or invalid API key",
          param: null,
          event_id: null,
        },
      },
    });
  });
});

describe("API keys on the HTTP routes", () => {
  let stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const stop of stops) await stop();
    stops = [];
  });
  const start = async (overrides: Record<string, unknown>) => {
    const server = await startTestServer(overrides);
    stops.push(server.stop);
    return { server, http: (path: string) => `http://127.0.0.1:${server.port}${path}` };
  };

  it("require a key on every /v1 route when keys are configured; /health stays open, /metrics too by default", async () => {
    const { http } = await start({ auth: { api_keys: ["sk-right"] } });
    for (const path of ["/v1/models", "/v1/models/echo", "/v1/nothing-here"]) {
      const refused = await fetch(http(path));
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({
        type: "error",
        code: "unauthorized",
        error: { code: "unauthorized" },
      });
    }
    const models = await fetch(http("/v1/models"), { headers: bearer("sk-right") });
    expect(models.status).toBe(200);
    expect((await fetch(http("/health"))).status).toBe(200);
    expect((await fetch(http("/metrics"))).status).toBe(200);
  });

  it("serve /metrics to a key only with metrics.access: api_keys", async () => {
    const { http } = await start({ auth: { api_keys: ["sk-right"] }, metrics: { access: "api_keys" } });
    expect((await fetch(http("/metrics"))).status).toBe(401);
    expect((await fetch(http("/metrics"), { headers: bearer("sk-right") })).status).toBe(200);
  });

  it("serve /metrics on its own address with metrics.listen, and not on the main one", async () => {
    const { freePort } = await import("../../src/cli/server-process.ts");
    const port = await freePort();
    const { http } = await start({ metrics: { listen: { host: "127.0.0.1", port } } });
    expect((await fetch(http("/metrics"))).status).toBe(404);
    const scraped = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain("duplex_");
  });

  it("count failures by the socket's address, or by X-Forwarded-For only with trust_proxy", async () => {
    const auth = { api_keys: ["sk-right"], max_failed_attempts: 2, lockout_s: 60 };
    const forwarded = (address: string) => ({ ...bearer("sk-wrong"), "X-Forwarded-For": address });
    // Without trust_proxy, a client cannot dodge the lockout by naming another address.
    const plain = await start({ auth });
    for (const address of ["10.0.0.1", "10.0.0.2"])
      await fetch(plain.http("/v1/models"), { headers: forwarded(address) });
    expect((await fetch(plain.http("/v1/models"), { headers: bearer("sk-right") })).status).toBe(429);
    // Behind a trusted proxy, each forwarded client counts on its own: 10.0.0.3 is not locked out by 10.0.0.1.
    const proxied = await start({ auth, listen: { host: "127.0.0.1", port: 0, trust_proxy: "127.0.0.1" } });
    for (let i = 0; i < 2; i++) await fetch(proxied.http("/v1/models"), { headers: forwarded("10.0.0.1") });
    const locked = await fetch(proxied.http("/v1/models"), {
      headers: { ...bearer("sk-right"), "X-Forwarded-For": "10.0.0.1" },
    });
    expect(locked.status).toBe(429);
    expect(locked.headers.get("retry-after")).toMatch(/^\d+$/);
    const other = await fetch(proxied.http("/v1/models"), {
      headers: { ...bearer("sk-right"), "X-Forwarded-For": "10.0.0.3" },
    });
    expect(other.status).toBe(200);
  });

  it("reads X-Forwarded-For right to left from trusted proxies only: a client cannot name the address that is counted", async () => {
    const auth = { api_keys: ["sk-right"], max_failed_attempts: 2, lockout_s: 60 };
    // The proxy (127.0.0.1) appends the address it saw (10.0.0.9); whatever the client wrote before it is not read.
    const proxied = await start({ auth, listen: { host: "127.0.0.1", port: 0, trust_proxy: ["127.0.0.0/8"] } });
    for (const spoofed of ["10.0.0.1", "10.0.0.2"])
      await fetch(proxied.http("/v1/models"), {
        headers: { ...bearer("sk-wrong"), "X-Forwarded-For": `${spoofed}, 10.0.0.9` },
      });
    const locked = await fetch(proxied.http("/v1/models"), {
      headers: { ...bearer("sk-right"), "X-Forwarded-For": "10.0.0.1, 10.0.0.9" },
    });
    expect(locked.status).toBe(429);
    const other = await fetch(proxied.http("/v1/models"), {
      headers: { ...bearer("sk-right"), "X-Forwarded-For": "10.0.0.9, 10.0.0.10" },
    });
    expect(other.status).toBe(200);
  });
});

describe("lockout after failed API key checks", () => {
  let stop: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await stop?.();
    stop = null;
  });

  it("refuses the address with 429 and Retry-After, even with a good key, once max_failed_attempts fail; successes do not count and the lockout lifts", async () => {
    const server = await startTestServer({
      auth: { api_keys: ["sk-right"], max_failed_attempts: 3, failed_attempts_window_s: 60, lockout_s: 2 },
    });
    stop = server.stop;
    const good = () => upgrade(server.url, bearer("sk-right"));
    const wrong = () => upgrade(server.url, bearer("sk-wrong"));

    // Successes are not counted: more of them than the limit lock nothing out.
    for (let i = 0; i < 5; i += 1) expect((await good()).status).toBe(101);
    expect((await wrong()).status).toBe(401);
    expect((await wrong()).status).toBe(401);
    // Nor do they clear earlier failures: the third failure locks the address out.
    expect((await good()).status).toBe(101);
    expect((await wrong()).status).toBe(401);

    const locked = await good();
    expect(locked.status).toBe(429);
    expect(Number(locked.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(locked.retryAfter)).toBeLessThanOrEqual(2);
    expect(locked.body).toEqual({
      type: "error",
      code: "too_many_auth_failures",
      error: {
        type: "rate_limit_error",
        code: "too_many_auth_failures",
        message: `too many failed API key checks from this address; retry after ${locked.retryAfter} s`,
        param: null,
        event_id: null,
      },
    });
    // A wrong key while locked out is refused the same way (and is not checked).
    expect((await wrong()).status).toBe(429);
    expect((await upgrade(server.url)).status).toBe(429);

    await sleep(Number(locked.retryAfter) * 1000 + 200);
    expect((await good()).status).toBe(101);
    // The count starts again from nothing.
    expect((await wrong()).status).toBe(401);
    expect((await good()).status).toBe(101);
  });

  it("counts failures within the window of the first one only", async () => {
    const server = await startTestServer({
      auth: { api_keys: ["sk-right"], max_failed_attempts: 3, failed_attempts_window_s: 1, lockout_s: 60 },
    });
    stop = server.stop;
    const good = () => upgrade(server.url, bearer("sk-right"));
    const wrong = () => upgrade(server.url, bearer("sk-wrong"));

    expect((await wrong()).status).toBe(401);
    expect((await wrong()).status).toBe(401);
    await sleep(1200);
    // The window passed: this is the first failure of a new one, not the third.
    expect((await wrong()).status).toBe(401);
    expect((await good()).status).toBe(101);
    expect((await wrong()).status).toBe(401);
    expect((await wrong()).status).toBe(401);
    expect((await good()).status).toBe(429);
  });

  it("never locks out with max_failed_attempts: null", async () => {
    const server = await startTestServer({ auth: { api_keys: ["sk-right"], max_failed_attempts: null } });
    stop = server.stop;
    for (let i = 0; i < 12; i += 1) expect((await upgrade(server.url, bearer("sk-wrong"))).status).toBe(401);
    expect((await upgrade(server.url, bearer("sk-right"))).status).toBe(101);
  });

  it("does not apply without api_keys: every upgrade is accepted", async () => {
    const server = await startTestServer({ auth: { max_failed_attempts: 1 } });
    stop = server.stop;
    for (let i = 0; i < 3; i += 1) expect((await upgrade(server.url, bearer("anything"))).status).toBe(101);
  });
});

describe("auth configuration", () => {
  it("defaults to no keys and a lockout after 10 failures within 60 s, for 300 s", () => {
    expect(parseConfig({}).auth).toEqual({
      api_keys: [],
      max_failed_attempts: 10,
      failed_attempts_window_s: 60,
      lockout_s: 300,
    });
  });

  it.each([
    [{ max_failed_attempts: 0 }, "auth.max_failed_attempts"],
    [{ max_failed_attempts: 2.5 }, "auth.max_failed_attempts"],
    [{ failed_attempts_window_s: 0 }, "auth.failed_attempts_window_s"],
    [{ lockout_s: -1 }, "auth.lockout_s"],
    [{ lockout: 60 }, "auth"],
  ])("refuses auth %j, naming %s", (auth, key) => {
    expect(() => parseConfig({ auth })).toThrow(ConfigError);
    expect(() => parseConfig({ auth })).toThrow(new RegExp(`${key.replace(/\./g, "\\.")}:`));
  });

  it.each([[true], [2], ["everyone"], ["10.0.0.0/33"], [["127.0.0.1", "proxy.example"]]])(
    "refuses listen.trust_proxy %j: only proxy addresses or subnets",
    (trust_proxy) => {
      expect(() => parseConfig({ listen: { trust_proxy } })).toThrow(/listen\.trust_proxy/);
    },
  );

  it("takes proxy addresses and subnets in listen.trust_proxy", () => {
    expect(parseConfig({ listen: { trust_proxy: "127.0.0.1, 10.0.0.0/8" } }).listen.trust_proxy).toBe(
      "127.0.0.1, 10.0.0.0/8",
    );
    expect(parseConfig({ listen: { trust_proxy: ["::1", "fd00::/8"] } }).listen.trust_proxy).toEqual([
      "::1",
      "fd00::/8",
    ]);
  });
});
