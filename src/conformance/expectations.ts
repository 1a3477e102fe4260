import type { ServerEvent } from "../client/index.ts";
import type { Connection, Observed } from "./connection.ts";
import { pause, type ScenarioContext } from "./context.ts";
import { closest, StepFailure, summarize, typeOfPattern } from "./failure.ts";
import { capturesOf, fill, matches, mismatch, valueAt } from "./pattern.ts";
import type { Pattern } from "./scenario.ts";

/**
 * The checks of a scenario (conformance/README.md, "Steps"): `expect`, `expect_absent`, `expect_seq` and
 * `expect_cycle`, over the events a connection received. Each waits on the scenario's waiter and throws a
 * StepFailure naming what it expected and what it observed.
 */

/** Why an expectation can no longer be met: the socket closed, nothing more will come. */
const SOCKET_GONE = "the socket closed";

type Outcome =
  | { readonly ok: true; readonly indices: readonly number[]; readonly captured: ReadonlyMap<string, unknown> }
  | { readonly ok: false; readonly why: string };

/**
 * Matches the expected patterns against the events after the cursor; undefined while more events may still make
 * it pass. In order (the default, and `strict`), a pattern may use what an earlier pattern of the same step
 * captured: `fillAt(i, captured)` fills pattern `i` with the captures so far.
 */
const matchExpected = (
  conn: Connection,
  count: number,
  fillAt: (i: number, captured: ReadonlyMap<string, unknown>) => Pattern,
  mode: { strict: boolean; anyOrder: boolean },
): Outcome | undefined => {
  const events = conn.events;
  const indices: number[] = [];
  const captured = new Map<string, unknown>();
  const keep = (pattern: Pattern, index: number) => {
    indices.push(index);
    const event = (events[index] as Observed).event;
    for (const [name, path] of Object.entries(capturesOf(pattern))) captured.set(name, valueAt(event, path));
  };
  let from = conn.cursor;
  for (let i = 0; i < count; i++) {
    const pattern = fillAt(i, captured);
    if (mode.strict) {
      const o = events[conn.cursor + i];
      if (o === undefined) return conn.open ? undefined : { ok: false, why: SOCKET_GONE };
      const why = mismatch(pattern, o.event);
      if (why !== null)
        return { ok: false, why: `event #${conn.cursor + i} (${o.event.type}) is not expected #${i + 1}: ${why}` };
      keep(pattern, conn.cursor + i);
      continue;
    }
    const index = events.findIndex(
      (o, j) => j >= (mode.anyOrder ? conn.cursor : from) && !indices.includes(j) && matches(pattern, o.event),
    );
    if (index < 0) return conn.open ? undefined : { ok: false, why: SOCKET_GONE };
    keep(pattern, index);
    from = index + 1;
  }
  return { ok: true, indices, captured };
};

/**
 * `expect`: waits until the events after the cursor match `raw` (in order, `strict`ly next, or in any order), none
 * of `absent` coming between, then saves the captures and moves the cursor past the last one.
 */
export const expectEvents = async (
  ctx: ScenarioContext,
  conn: Connection,
  raw: readonly Pattern[],
  absent: readonly Pattern[],
  lookup: (name: string) => unknown,
  step: { withinMs: number; strict: boolean; anyOrder: boolean },
): Promise<void> => {
  const fillAt = (i: number, captured: ReadonlyMap<string, unknown>): Pattern =>
    fill(raw[i], (name) => (captured.has(name) ? captured.get(name) : lookup(name)));
  if (conn.client === null) throw new StepFailure(`connection ${conn.name} was never opened`, raw);
  const outcome = await ctx.waiter.until(() => matchExpected(conn, raw.length, fillAt, step), step.withinMs);
  if (outcome?.ok === true) {
    const end = Math.max(...outcome.indices) + 1;
    failOnAbsent(conn, absent, end, outcome.indices);
    for (const [name, value] of outcome.captured) {
      if (value === undefined) throw new StepFailure(`capture of ${name}: the matched event has no such field`, raw);
      ctx.vars.set(name, value);
    }
    conn.cursor = end;
    return;
  }
  // Which expected event is the first one missing (in order), and what came instead.
  const captured = new Map<string, unknown>();
  const patterns: Pattern[] = [];
  let from = conn.cursor;
  let missing = -1;
  for (let i = 0; i < raw.length; i++) {
    const pattern = fill(raw[i], (name) => (captured.has(name) ? captured.get(name) : (lookup(name) ?? `\${${name}}`)));
    patterns.push(pattern);
    if (missing >= 0) continue;
    const index = conn.events.findIndex(
      (o, j) => j >= (step.anyOrder ? conn.cursor : from) && matches(pattern, o.event),
    );
    if (index < 0) {
      missing = i;
      continue;
    }
    for (const [name, path] of Object.entries(capturesOf(pattern)))
      captured.set(name, valueAt((conn.events[index] as Observed).event, path));
    from = index + 1;
  }
  const pattern = patterns[Math.max(0, missing)];
  const type = typeOfPattern(pattern);
  const notSeen = `expected #${Math.max(0, missing) + 1} not seen`;
  const why =
    outcome === undefined
      ? `${notSeen} within ${step.withinMs} ms: ${closest(conn.events, conn.cursor, pattern)}`
      : outcome.why === SOCKET_GONE
        ? `${notSeen} before the socket closed: ${closest(conn.events, conn.cursor, pattern)}`
        : outcome.why;
  throw new StepFailure(
    why,
    patterns,
    summarize(conn.events, conn.cursor, (e) => e.type === type || e.type === "error"),
  );
};

/**
 * Fails when an event between the cursor and `end` (exclusive), other than those at the `expected` indices,
 * matches one of `absent`.
 */
const failOnAbsent = (
  conn: Connection,
  absent: readonly Pattern[],
  end: number,
  expected: readonly number[] = [],
): void => {
  if (absent.length === 0) return;
  const offending = conn.events
    .slice(conn.cursor, end)
    .filter((o, i) => !expected.includes(conn.cursor + i) && absent.some((p) => matches(p, o.event)));
  if (offending.length === 0) return;
  const first = offending[0] as Observed;
  throw new StepFailure(
    `${offending.length} event(s) that must not come did, the first: ${first.event.type}`,
    absent.map((p) => ({ $not: p })),
    summarize(conn.events, conn.cursor, (e) => offending.some((o) => o.event === e)).slice(0, end - conn.cursor),
  );
};

/**
 * Waits for the first event at or after index `from` (default: the cursor) that matches `marker`; its index, or a
 * failure.
 */
const awaitMarker = async (
  ctx: ScenarioContext,
  conn: Connection,
  marker: Pattern,
  withinMs: number,
  from = conn.cursor,
): Promise<number> => {
  const find = (): number | undefined => {
    const index = conn.events.findIndex((o, i) => i >= from && matches(marker, o.event));
    return index >= 0 ? index : conn.open ? undefined : -1;
  };
  const index = (await ctx.waiter.until(find, withinMs)) ?? -1;
  if (index < 0) {
    throw new StepFailure(
      `the marker ${JSON.stringify(marker)} did not come within ${withinMs} ms`,
      [marker],
      summarize(conn.events, conn.cursor),
    );
  }
  return index;
};

/**
 * `expect_absent`: no event after the cursor matches `patterns`, for `forMs` or until the marker `until` (the cursor
 * then moves past it).
 */
export const expectAbsent = async (
  ctx: ScenarioContext,
  conn: Connection,
  patterns: readonly Pattern[],
  until: Pattern | null,
  step: { forMs: number | null; withinMs: number },
): Promise<void> => {
  if (conn.client === null) throw new StepFailure(`connection ${conn.name} was never opened`, patterns);
  let end: number;
  if (until !== null) end = await awaitMarker(ctx, conn, until, step.withinMs);
  else {
    await pause(ctx, step.forMs ?? 0);
    end = conn.events.length;
  }
  failOnAbsent(conn, patterns, end);
  if (until !== null) conn.cursor = end + 1;
};

/**
 * `expect_seq`: the events of the socket up to the marker carry `server_event_seq` after+1, after+2, ..., each once,
 * in increasing order except those matching `unordered`.
 */
export const expectSeq = async (
  ctx: ScenarioContext,
  conn: Connection,
  after: number,
  until: Pattern,
  unordered: readonly Pattern[],
  step: { withinMs: number },
): Promise<void> => {
  if (!Number.isInteger(after)) throw new StepFailure(`expect_seq: after is not a number: ${after}`);
  const end = await awaitMarker(ctx, conn, until, step.withinMs, 0);
  const stamped = conn.events.slice(0, end + 1).filter((o) => typeof o.event.server_event_seq === "number");
  const seqs = stamped.map((o) => o.event.server_event_seq as number);
  const fail = (why: string): never => {
    throw new StepFailure(
      `${why}; seqs in arrival order: ${seqs.join(", ")}`,
      [{ server_event_seq: `${after + 1}, ${after + 2}, ... each once` }],
      summarize(conn.events, 0).slice(0, end + 1),
    );
  };
  const duplicate = seqs.find((s, i) => seqs.indexOf(s) !== i);
  if (duplicate !== undefined) fail(`server_event_seq ${duplicate} arrived twice`);
  const sorted = [...seqs].sort((a, b) => a - b);
  const gap = sorted.findIndex((s, i) => s !== after + 1 + i);
  if (gap >= 0) fail(`expected server_event_seq ${after + 1 + gap}, the next one is ${sorted[gap]}`);
  const ordered = stamped
    .filter((o) => !unordered.some((p) => matches(p, o.event)))
    .map((o) => o.event.server_event_seq as number);
  const back = ordered.findIndex((s, i) => i > 0 && s < (ordered[i - 1] as number));
  if (back >= 0) fail(`server_event_seq ${ordered[back]} arrived after ${ordered[back - 1]}`);
};

/**
 * `expect_cycle`: the events of the socket (up to the marker) that match `patterns` come in their cycle and end on
 * a complete one, at least `minCycles` times.
 */
export const expectCycle = async (
  ctx: ScenarioContext,
  conn: Connection,
  patterns: readonly Pattern[],
  until: Pattern | null,
  step: { withinMs: number; minCycles: number },
): Promise<void> => {
  const end = until === null ? conn.events.length : await awaitMarker(ctx, conn, until, step.withinMs, 0);
  const classes: { index: number; cls: number }[] = [];
  for (const [index, o] of conn.events.slice(0, end).entries()) {
    const cls = patterns.findIndex((p) => matches(p, o.event));
    if (cls >= 0) classes.push({ index, cls });
  }
  const n = patterns.length;
  const relevant = (e: ServerEvent) => patterns.some((p) => matches(p, e));
  const wrong = classes.findIndex((c, i) => c.cls !== i % n);
  if (wrong >= 0) {
    const at = classes[wrong] as { index: number; cls: number };
    throw new StepFailure(
      `event #${at.index} breaks the cycle: expected #${(wrong % n) + 1} of the cycle, got #${at.cls + 1}`,
      patterns,
      summarize(conn.events, 0, relevant).slice(Math.max(0, at.index - 8), at.index + 2),
    );
  }
  if (classes.length % n !== 0 || classes.length / n < step.minCycles) {
    throw new StepFailure(
      `expected at least ${step.minCycles} complete cycle(s) of ${n} events, got ${classes.length} event(s)`,
      patterns,
      summarize(conn.events, 0, relevant).slice(0, end),
    );
  }
};
