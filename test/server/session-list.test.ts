import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Engine, EventStore, NewEntry } from "../../src/engine/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { sessionsApi } from "../../src/server/sessions-api.ts";
import { oldListPage, recordedSessions } from "../support/session-list-reference.ts";

/**
 * `GET /v1/sessions` and `/sessions` over the store's summary rows (issue 32, part 2, "Lists and pages"), through
 * fastify's inject: a filtered list over 10,000 sessions (values, order, pages whose `has_more` always has a next
 * match), and the rows of recorded sessions exactly as the list gave them when it folded every log.
 */

/** An engine that holds the sessions of `live` (the list asks it only whether a session is live). */
const engineHolding = (live: ReadonlySet<string>): Engine =>
  ({ get: (id: string) => (live.has(id) ? { isClosed: false } : undefined) }) as unknown as Engine;

const appOver = (store: EventStore, live: ReadonlySet<string>): FastifyInstance => {
  const api = sessionsApi({ engine: engineHolding(live), store });
  const app = Fastify();
  app.get("/v1/sessions", api.list);
  app.get("/sessions", api.pages);
  return app;
};

interface Page {
  readonly object: string;
  readonly data: { readonly id: string; readonly [key: string]: unknown }[];
  readonly has_more: boolean;
  readonly next_cursor: string | null;
}

const ENDINGS = [
  ["session_close", "closed"],
  ["client_closed", "closed (socket 1000)"],
  ["idle_ttl_expired", "expired (idle)"],
  ["disconnect_grace_expired", "expired (no resume)"],
  ["disconnect", "disconnected"],
  ["runner_failed", "failed (runner)"],
  ["unused", "unused"],
  [null, "open"],
  ["detach", "detached"],
] as const;

const T0 = Date.UTC(2026, 0, 1);
const N = 10_000;

/** Session `i` of the 10,000: its stream, its entries, and the row the list must show for it. */
const madeUp = (i: number, live: ReadonlySet<string>) => {
  // A permutation: names do not sort in the order the sessions opened; three sessions open in each second.
  const id = `s${String((i * 7919) % N).padStart(5, "0")}`;
  const at = T0 + Math.floor(i / 3) * 1_000;
  const model = (i * 5) % 7 < 2 ? "minicpm" : "echo";
  const [reason, state] = ENDINGS[i % ENDINGS.length] as (typeof ENDINGS)[number];
  const codes = [...(i % 11 === 0 ? ["item_not_found"] : []), ...(i % 13 === 0 ? ["input_backpressure"] : [])];
  const responses = i % 4;
  const meta = (ms: number) => ({ at: ms, epoch: 0, turnId: 0 });
  const entries: NewEntry[] = [
    { type: "SessionOpened", data: { sessionId: id }, metadata: meta(at) },
    { type: "SessionCreated", data: { sessionId: id, config: { model } }, metadata: meta(at) },
    ...Array.from({ length: responses }, (_, r) => ({
      type: "ResponseStarted",
      data: { responseId: `r${r}` },
      metadata: meta(at + 100 * (r + 1)),
    })),
    ...codes.map((code) => ({ type: "RequestRejected", data: { code, message: code }, metadata: meta(at + 500) })),
  ];
  const endAt = at + 600 + (i % 10) * 250;
  if (reason === "detach") entries.push({ type: "SessionDetached", data: {}, metadata: meta(endAt) });
  else if (reason !== null) entries.push({ type: "SessionClosed", data: { reason }, metadata: meta(endAt) });
  const lastAt = entries.at(-1)?.metadata.at ?? at;
  return {
    stream: `session-${id}`,
    at,
    entries,
    row: {
      id,
      object: "duplex.session",
      opened_at: new Date(at).toISOString(),
      duration_s: Math.round((lastAt - at) / 100) / 10,
      state,
      live: live.has(id),
      model,
      responses,
      revision: entries.length - 1,
      error_codes: codes,
    },
  };
};

describe("the session list over 10,000 summary rows", () => {
  const live = new Set(
    Array.from({ length: N }, (_, i) => i).flatMap((i) => (i % 97 === 0 ? [madeUp(i, new Set()).row.id] : [])),
  );
  const sessions = Array.from({ length: N }, (_, i) => madeUp(i, live));
  let store: EventStore;
  let app: FastifyInstance;
  beforeAll(async () => {
    store = createSqliteEventStore({ path: ":memory:" });
    await Promise.all(sessions.map((s) => store.append(s.stream, s.entries, "no_stream")));
    app = appOver(store, live);
  });
  afterAll(async () => {
    await app.close();
    await store.close();
  });

  const get = async (url: string): Promise<{ page: Page; ms: number }> => {
    const started = performance.now();
    const response = await app.inject({ method: "GET", url });
    const ms = performance.now() - started;
    expect(response.statusCode, response.body).toBe(200);
    return { page: response.json() as Page, ms };
  };

  /** Every page of `query` in turn (following next_cursor); each page that says has_more is followed by a match. */
  const allPages = async (query: string): Promise<Page[]> => {
    const pages: Page[] = [];
    let url = `/v1/sessions?${query}`;
    for (;;) {
      const { page } = await get(url);
      pages.push(page);
      if (!page.has_more) {
        expect(page.next_cursor).toBeNull();
        return pages;
      }
      expect(page.next_cursor).not.toBeNull();
      url = `/v1/sessions?${query}&after=${page.next_cursor}`;
      expect(pages.length).toBeLessThan(N);
    }
  };

  /** The rows `filter` keeps, in the list's order. */
  const expected = (filter: (s: (typeof sessions)[number]) => boolean, order: "asc" | "desc" = "asc") => {
    const sign = order === "asc" ? 1 : -1;
    return sessions
      .filter(filter)
      .sort((a, b) => sign * (a.at - b.at || (a.stream < b.stream ? -1 : 1)))
      .map((s) => s.row);
  };

  it("answers a filtered page with the values, the order and a has_more that has a next match", async () => {
    const want = expected((s) => s.row.state.startsWith("expired") && s.row.model === "minicpm");
    expect(want.length).toBeGreaterThan(100);
    const timed = await get("/v1/sessions?state=expired&model=minicpm&limit=7");
    expect(timed.page.data).toEqual(want.slice(0, 7));
    expect(timed.page.has_more).toBe(true);
    // How fast the summary rows answer, against the fold of every log before them, is `duplex bench --only list`.

    const pages = await allPages("state=expired&model=minicpm&limit=7");
    expect(pages.flatMap((p) => p.data)).toEqual(want);
    // Every page is full but the last, and no page is empty: has_more always had a next match.
    expect(pages.slice(0, -1).every((p) => p.data.length === 7)).toBe(true);
    expect(pages.at(-1)?.data.length).toBeGreaterThan(0);
  });

  it("pages newest first by an error code within a time window, across sessions that open in the same second", async () => {
    const since = T0 + 600_000;
    const until = T0 + 2_400_000;
    const want = expected(
      (s) => s.at >= since && s.at <= until && s.row.error_codes.includes("item_not_found"),
      "desc",
    );
    expect(want.length).toBeGreaterThan(40);
    const window = `since=${new Date(since).toISOString()}&until=${new Date(until).toISOString()}`;
    const pages = await allPages(`order=desc&error=item_not_found&${window}&limit=13`);
    expect(pages.flatMap((p) => p.data)).toEqual(want);
    expect(pages.at(-1)?.data.length).toBeGreaterThan(0);
  });

  it("says has_more false when the page holds the last match, though more sessions follow it", async () => {
    const want = expected((s) => s.row.error_codes.includes("input_backpressure") && s.row.state === "unused");
    expect(want.length).toBeGreaterThan(5);
    const { page } = await get(`/v1/sessions?error=input_backpressure&state=unused&limit=${want.length}`);
    expect(page).toEqual({ object: "list", data: want, has_more: false, next_cursor: null });
    // Sessions opened after the last match: the release that folded every log answered has_more: true here (it had
    // streams left unread), and its next page was empty.
    const last = sessions.find((s) => s.row.id === want.at(-1)?.id);
    expect(sessions.some((s) => s.at > (last?.at ?? Number.POSITIVE_INFINITY))).toBe(true);
  });

  it("marks live the sessions this server's engine holds, at request time", async () => {
    const { page } = await get("/v1/sessions?state=open&limit=200");
    expect(page.data.length).toBe(200);
    expect(page.data.filter((s) => s.live).map((s) => s.id)).toEqual(
      page.data.filter((s) => live.has(s.id)).map((s) => s.id),
    );
    expect(page.data.some((s) => s.live)).toBe(true);
  });

  it("serves /sessions from the same rows: newest first, a link to each session and to the next page", async () => {
    const want = expected((s) => s.row.state === "failed (runner)", "desc").slice(0, 5);
    const response = await app.inject({ method: "GET", url: "/sessions?state=failed&limit=5" });
    expect(response.statusCode).toBe(200);
    const links = [...response.body.matchAll(/href="\/sessions\/([^"]+)"/g)].map((m) => m[1]);
    expect(links).toEqual(want.map((s) => s.id));
    expect(response.body).toContain('id="next"');
  });

  it("refuses a cursor it did not give and a filter it does not know, with 400", async () => {
    const cursor = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    for (const query of [
      "after=nonsense",
      `after=${cursor([T0, "session-a\u0000b"])}`,
      `after=${cursor([T0, "elsewhere"])}`,
      "state=sleeping",
      "limit=0",
      "since=yesterday",
      "model=a%00b",
      `after=${cursor([T0, "session-\ud800"])}`,
    ]) {
      const response = await app.inject({ method: "GET", url: `/v1/sessions?${query}` });
      expect(response.statusCode, query).toBe(400);
      expect(response.json(), query).toMatchObject({ error: { code: "bad_event" } });
    }
  });
});

describe("the session list over recorded sessions", () => {
  let store: EventStore;
  let app: FastifyInstance;
  let live: Set<string>;
  beforeAll(async () => {
    store = createSqliteEventStore({ path: ":memory:" });
    const recorded = await recordedSessions();
    for (const { stream, entries } of recorded) {
      await store.append(stream, entries, "no_stream");
      // Cut short too: the session as the list showed it while it ran (open; detached, just after a socket dropped)
      // under a stream of its own.
      const detached = entries.findIndex((e) => e.type === "SessionDetached");
      const cut = detached >= 0 ? detached + 1 : Math.ceil(entries.length / 3);
      await store.append(`${stream}-cut`, entries.slice(0, cut), "no_stream");
    }
    const first = recorded[0]?.entries[0]?.data as { sessionId?: string } | undefined;
    live = new Set([String(first?.sessionId)]);
    app = appOver(store, live);
  });
  afterAll(async () => {
    await app.close();
    await store.close();
  });

  it("gives the rows, has_more and cursors the list gave when it folded every log", async () => {
    const isLive = (id: string) => live.has(id);
    for (const order of ["asc", "desc"] as const) {
      const whole = await app.inject({ method: "GET", url: `/v1/sessions?order=${order}` });
      expect(whole.json()).toEqual(await oldListPage(store, { limit: 50, order }, isLive));
      // Pages of 3, each cursor the one the old list gave.
      let after: readonly [number, string] | undefined;
      let url = `/v1/sessions?order=${order}&limit=3`;
      for (let n = 0; n < 20; n += 1) {
        const page = (await app.inject({ method: "GET", url })).json() as Page;
        const old = await oldListPage(store, { limit: 3, order, ...(after === undefined ? {} : { after }) }, isLive);
        expect(page).toEqual(old);
        if (page.next_cursor === null) break;
        after = JSON.parse(Buffer.from(page.next_cursor, "base64url").toString()) as [number, string];
        url = `/v1/sessions?order=${order}&limit=3&after=${page.next_cursor}`;
      }
    }
    const states = ((await app.inject({ method: "GET", url: "/v1/sessions" })).json() as Page).data.map((s) => s.state);
    expect(states).toContain("detached");
    expect(states).toContain("closed");
  });

  it("filters to the rows the old fold kept", async () => {
    const isLive = (id: string) => live.has(id);
    for (const [query, q] of [
      ["state=detached", { state: "detached" }],
      ["state=closed", { state: "closed" }],
      ["error=item_not_found", { error: "item_not_found" }],
      ["model=echo", { model: "echo" }],
    ] as const) {
      const page = (await app.inject({ method: "GET", url: `/v1/sessions?${query}&limit=200` })).json() as Page;
      const old = await oldListPage(store, { limit: 200, order: "asc", ...q }, isLive);
      expect(page.data, query).toEqual(old.data);
      expect(page.data.length, query).toBeGreaterThan(0);
    }
  });
});
