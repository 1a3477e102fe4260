import { describe, expect, it } from "vitest";
import type { ServerEvent } from "../../src/client/index.ts";
import { type Connection, createWaiter } from "../../src/conformance/connection.ts";
import type { ScenarioContext } from "../../src/conformance/context.ts";
import { expectAbsent, expectCycle, expectEvents, expectSeq } from "../../src/conformance/expectations.ts";
import { StepFailure } from "../../src/conformance/failure.ts";

/** A scenario context with one connection `main` that already received `events` (its socket closed after them). */
const given = (events: ServerEvent[]): { ctx: ScenarioContext; conn: Connection } => {
  const conn: Connection = {
    name: "main",
    client: {} as Connection["client"],
    events: events.map((event, i) => ({ event, atMs: i })),
    cursor: 0,
    maxSeq: 0,
    open: false,
  };
  const ctx: ScenarioContext = {
    url: "ws://unused",
    audioDir: "",
    headers: {},
    vars: new Map(),
    connections: new Map([["main", conn]]),
    sessions: new Map(),
    waiter: createWaiter(),
    startedAt: 0,
    observedTypes: new Set(),
    sentTypes: new Set(),
    recording: true,
    aborted: false,
  };
  return { ctx, conn };
};

const failureOf = async (promise: Promise<void>): Promise<StepFailure> => {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(StepFailure);
    return error as StepFailure;
  }
  throw new Error("the check passed");
};

const seq = (type: string, n: number): ServerEvent => ({ type, server_event_seq: n });
const step = { withinMs: 50, strict: false, anyOrder: false };

describe("conformance expectations", () => {
  it("expect matches in order, captures for later patterns, and moves the cursor past the last match", async () => {
    const { ctx, conn } = given([
      { type: "response.created", response: { id: "r1" } },
      { type: "noise" },
      { type: "response.done", response: { id: "r1" } },
      { type: "after" },
    ]);
    const patterns = [
      { type: "response.created", $capture: { rid: "response.id" } },
      { type: "response.done", response: { id: "$" + "{rid}" } },
    ];
    await expectEvents(ctx, conn, patterns, [], () => undefined, step);
    expect(ctx.vars.get("rid")).toBe("r1");
    expect(conn.cursor).toBe(3);
  });

  it("expect fails on events out of order, on a strict gap and on an absent event between, saying which", async () => {
    const events = [{ type: "b" }, { type: "x" }, { type: "a" }];
    const out = await failureOf(
      expectEvents(given(events).ctx, given(events).conn, [{ type: "a" }, { type: "b" }], [], () => undefined, step),
    );
    expect(out.message).toContain("expected #2");
    const g = given(events);
    const strict = await failureOf(
      expectEvents(g.ctx, g.conn, [{ type: "b" }, { type: "a" }], [], () => undefined, { ...step, strict: true }),
    );
    expect(strict.message).toContain('event #1 (x) is not expected #2: type: expected "a", got "x"');
    const h = given(events);
    const absent = await failureOf(
      expectEvents(h.ctx, h.conn, [{ type: "a" }], [{ type: "x" }], () => undefined, step),
    );
    expect(absent.message).toContain("the first: x");
    expect(absent.observed.find((o) => o.type === "x")?.json).toEqual({ type: "x" });
  });

  it("expect_absent looks after the cursor, up to a marker or for a while", async () => {
    const { ctx, conn } = given([{ type: "error" }, { type: "ack" }, { type: "ok" }]);
    conn.cursor = 1;
    await expectAbsent(ctx, conn, [{ type: "error" }], { type: "ack" }, { forMs: null, withinMs: 50 });
    expect(conn.cursor).toBe(2);
    conn.cursor = 0;
    const out = await failureOf(expectAbsent(ctx, conn, [{ type: "error" }], null, { forMs: 1, withinMs: 50 }));
    expect(out.expected).toEqual([{ $not: { type: "error" } }]);
  });

  it("expect_seq wants each seq after `after` once, and in order but for the unordered ones", async () => {
    const resumed = [seq("session.resumed", 8), seq("a", 6), seq("b", 7), seq("done", 9)];
    const ok = given(resumed);
    await expectSeq(ok.ctx, ok.conn, 5, { type: "done" }, [{ type: "session.resumed" }], { withinMs: 50 });
    const disordered = given(resumed);
    const order = await failureOf(
      expectSeq(disordered.ctx, disordered.conn, 5, { type: "done" }, [], { withinMs: 50 }),
    );
    expect(order.message).toContain("server_event_seq 6 arrived after 8");
    const twice = given([seq("a", 6), seq("a", 6), seq("done", 7)]);
    expect(
      (await failureOf(expectSeq(twice.ctx, twice.conn, 5, { type: "done" }, [], { withinMs: 50 }))).message,
    ).toContain("server_event_seq 6 arrived twice");
    const gap = given([seq("a", 6), seq("done", 8)]);
    expect(
      (await failureOf(expectSeq(gap.ctx, gap.conn, 5, { type: "done" }, [], { withinMs: 50 }))).message,
    ).toContain("expected server_event_seq 7, the next one is 8");
  });

  it("expect_cycle wants the events in their cycle, ending on a complete one", async () => {
    const a = { type: "audio" };
    const t = { type: "transcript" };
    const cycle = [{ type: "audio" }, { type: "transcript" }];
    const ok = given([a, t, { type: "other" }, a, t, { type: "done" }]);
    await expectCycle(ok.ctx, ok.conn, cycle, { type: "done" }, { withinMs: 50, minCycles: 2 });
    const broken = given([a, t, a, a, t, { type: "done" }]);
    const out = await failureOf(
      expectCycle(broken.ctx, broken.conn, cycle, { type: "done" }, { withinMs: 50, minCycles: 1 }),
    );
    expect(out.message).toContain("event #3 breaks the cycle: expected #2 of the cycle, got #1");
    const unfinished = given([a, t, a, { type: "done" }]);
    expect(
      (
        await failureOf(
          expectCycle(unfinished.ctx, unfinished.conn, cycle, { type: "done" }, { withinMs: 50, minCycles: 1 }),
        )
      ).message,
    ).toContain("complete cycle");
  });
});
