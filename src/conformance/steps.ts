import { setTimeout as sleep } from "node:timers/promises";
import type { ServerEvent } from "../client/index.ts";
import { type AudioChunk, audioChunks } from "./audio.ts";
import type { Connection, Observed } from "./connection.ts";
import { type ScenarioContext, connect, connectionOf } from "./context.ts";
import { capturesOf, elide, fill, matches, mismatch, valueAt } from "./pattern.ts";
import type { AudioStream, Pattern, Step } from "./scenario.ts";

/** An event as a failure report shows it: its index on the connection, type, seq, time and maybe its JSON. */
export interface ObservedSummary {
  readonly index: number;
  readonly type: string;
  readonly seq: number | null;
  readonly at_ms: number;
  readonly json?: unknown;
}

/** Why a step failed: what it expected and what the connection observed. */
export interface StepFailureInfo {
  /** The step's position, `4` or `3.2` inside a repeat. */
  readonly step: string;
  readonly kind: string;
  readonly conn: string;
  readonly message: string;
  readonly expected: readonly unknown[];
  readonly observed: readonly ObservedSummary[];
}

/** Thrown by a step that failed. */
export class StepFailure extends Error {
  constructor(
    message: string,
    readonly expected: readonly unknown[] = [],
    readonly observed: readonly ObservedSummary[] = [],
  ) {
    super(message);
    this.name = "StepFailure";
  }
}

/** How many events a report lists in full JSON at most. */
const MAX_JSON = 6;

/**
 * Summaries of `events` (from index `from`); those for which `relevant` holds carry their JSON (long strings
 * elided), at most {@link MAX_JSON} of them.
 */
export const summarize = (
  events: readonly Observed[],
  from: number,
  relevant: (event: ServerEvent) => boolean = () => false,
): ObservedSummary[] => {
  let withJson = 0;
  return events.slice(from).map((o, i) => {
    const seq = typeof o.event.server_event_seq === "number" ? o.event.server_event_seq : null;
    const base = { index: from + i, type: o.event.type, seq, at_ms: Math.round(o.atMs) };
    if (!relevant(o.event) || withJson >= MAX_JSON) return base;
    withJson += 1;
    return { ...base, json: elide(o.event) };
  });
};

const typeOfPattern = (pattern: unknown): string | null =>
  typeof (pattern as { type?: unknown }).type === "string" ? (pattern as { type: string }).type : null;

/** Events of the same type as a pattern, and why the first of them does not match it. */
const closest = (events: readonly Observed[], from: number, pattern: unknown): string => {
  const type = typeOfPattern(pattern);
  const candidates = events.slice(from).filter((o) => type === null || o.event.type === type);
  if (candidates.length === 0) return type === null ? "no event at all" : `no ${type} at all`;
  const first = candidates[0] as Observed;
  return `${candidates.length} ${type ?? "event"}(s), the first differs: ${mismatch(pattern, first.event)}`;
};

const audioCache = new Map<string, Promise<AudioChunk[]>>();

/** Runs steps one after the other. @throws StepFailure (with `stepLine` set by the caller's catch). */
export const executeSteps = async (
  ctx: ScenarioContext,
  steps: readonly Step[],
  onStep: (step: Step) => void,
): Promise<void> => {
  for (const step of steps) {
    if (ctx.aborted) return;
    onStep(step);
    await executeStep(ctx, step, onStep);
  }
};

const executeStep = async (ctx: ScenarioContext, step: Step, onStep: (step: Step) => void): Promise<void> => {
  const connName = String(fill(step.conn, (n) => ctx.vars.get(n)));
  const conn = connectionOf(ctx, connName);
  const lookup = (name: string): unknown => (name === "last_seq" ? conn.maxSeq : ctx.vars.get(name));
  const filled = (value: unknown): unknown => fill(value, lookup);
  switch (step.kind) {
    case "connect":
      if (conn.open) throw new StepFailure(`connection ${connName} is already open`);
      await connect(ctx, conn, step.query);
      return;
    case "send":
      await send(ctx, conn, filled(step.event) as Record<string, unknown> & { type: string });
      return;
    case "send_raw":
      (await socketOf(ctx, conn)).sendRaw(String(filled(step.text)));
      return;
    case "send_raw_generated": {
      const body = step.repeat.repeat(Math.ceil(step.bytes / step.repeat.length)).slice(0, step.bytes);
      (await socketOf(ctx, conn)).sendRaw(`${filled(step.prefix)}${body}${filled(step.suffix)}`);
      return;
    }
    case "stream_audio":
      await streamAudio(ctx, conn, step.audio, filled(step.audio.fields) as Record<string, unknown>);
      return;
    case "expect":
      await expectEvents(ctx, conn, step.events.map(filled), step);
      return;
    case "expect_absent":
      await expectAbsent(ctx, conn, step.events.map(filled), step.until === null ? null : filled(step.until), step);
      return;
    case "expect_seq":
      await expectSeq(ctx, conn, Number(filled(step.after)), filled(step.until), step.unordered.map(filled), step);
      return;
    case "expect_cycle":
      await expectCycle(ctx, conn, step.events.map(filled), step.until === null ? null : filled(step.until), step);
      return;
    case "capture": {
      const from = filled(step.from);
      const found = conn.events.findLast((o) => matches(from, o.event));
      if (found === undefined) {
        throw new StepFailure(`no event on ${connName} matches ${JSON.stringify(from)}`, [from], summarize(conn.events, 0));
      }
      saveCaptures(ctx, step.vars, found.event);
      return;
    }
    case "set":
      for (const [name, value] of Object.entries(step.vars)) ctx.vars.set(name, filled(value));
      return;
    case "wait":
      await pause(ctx, step.ms);
      return;
    case "drop_socket":
      if (!conn.open || conn.client === null) throw new StepFailure(`connection ${connName} is not open`);
      await conn.client.terminate();
      return;
    case "reconnect":
      if (conn.open && conn.client !== null) await conn.client.terminate();
      await connect(ctx, conn, step.query);
      return;
    case "repeat": {
      const times = Number(filled(step.times));
      if (!Number.isInteger(times) || times < 0) throw new StepFailure(`repeat: times is not a count: ${times}`);
      for (let i = 1; i <= times; i++) {
        ctx.vars.set(step.as, i);
        await executeSteps(ctx, step.steps, onStep);
      }
      return;
    }
    default: {
      const unhandled: never = step;
      throw new Error(`unhandled step ${JSON.stringify(unhandled)}`);
    }
  }
};

/** Sleeps `ms`, or less when the scenario is aborted. */
const pause = async (ctx: ScenarioContext, ms: number): Promise<void> => {
  await ctx.waiter.until(() => (ctx.aborted ? true : undefined), ms);
};

/** The open socket of a connection; a connection never opened is opened now. */
const socketOf = async (ctx: ScenarioContext, conn: Connection) => {
  if (conn.client === null) await connect(ctx, conn, null);
  if (!conn.open || conn.client === null) {
    throw new StepFailure(`the socket of ${conn.name} is closed`, [], summarize(conn.events, conn.cursor));
  }
  return conn.client;
};

const send = async (
  ctx: ScenarioContext,
  conn: Connection,
  event: Record<string, unknown> & { type: string },
): Promise<void> => {
  const client = await socketOf(ctx, conn);
  client.send(event);
  if (ctx.recording) ctx.sentTypes.add(event.type);
};

const streamAudio = async (
  ctx: ScenarioContext,
  conn: Connection,
  audio: AudioStream,
  fields: Record<string, unknown>,
): Promise<void> => {
  const key = JSON.stringify({ ...audio, fields: {} });
  let chunks = audioCache.get(key);
  if (chunks === undefined) {
    chunks = audioChunks(audio, ctx.audioDir);
    audioCache.set(key, chunks);
  }
  const started = performance.now();
  let sentMs = 0;
  for (const [i, chunk] of (await chunks).entries()) {
    if (ctx.aborted) return;
    await send(ctx, conn, {
      type: "input_audio_buffer.append",
      audio: Buffer.from(chunk.bytes).toString("base64"),
      ...fields,
    });
    sentMs += chunk.ms;
    if (audio.pace === "realtime") await pause(ctx, Math.max(0, started + sentMs - performance.now()));
    else if (i % 10 === 9) await new Promise((resolve) => setImmediate(resolve));
  }
};

const saveCaptures = (ctx: ScenarioContext, vars: Readonly<Record<string, string>>, event: ServerEvent): void => {
  for (const [name, path] of Object.entries(vars)) {
    const value = valueAt(event, path);
    if (value === undefined) {
      throw new StepFailure(`capture of ${name}: ${event.type} has no ${path}`, [], [
        { index: -1, type: event.type, seq: null, at_ms: 0, json: elide(event) },
      ]);
    }
    ctx.vars.set(name, value);
  }
};

type Outcome = { readonly ok: true; readonly indices: readonly number[] } | { readonly ok: false; readonly why: string };

/** Matches `patterns` against the events after the cursor; undefined while more events may still make it pass. */
const matchExpected = (
  conn: Connection,
  patterns: readonly Pattern[],
  mode: { strict: boolean; anyOrder: boolean },
): Outcome | undefined => {
  const events = conn.events;
  const indices: number[] = [];
  if (mode.strict) {
    for (const [i, pattern] of patterns.entries()) {
      const o = events[conn.cursor + i];
      if (o === undefined) return conn.open ? undefined : { ok: false, why: "the socket closed" };
      const why = mismatch(pattern, o.event);
      if (why !== null) return { ok: false, why: `event #${conn.cursor + i} (${o.event.type}) is not expected #${i + 1}: ${why}` };
      indices.push(conn.cursor + i);
    }
    return { ok: true, indices };
  }
  let from = conn.cursor;
  for (const pattern of patterns) {
    const index = events.findIndex(
      (o, i) => i >= (mode.anyOrder ? conn.cursor : from) && !indices.includes(i) && matches(pattern, o.event),
    );
    if (index < 0) return conn.open ? undefined : { ok: false, why: "the socket closed" };
    indices.push(index);
    from = index + 1;
  }
  return { ok: true, indices };
};

const expectEvents = async (
  ctx: ScenarioContext,
  conn: Connection,
  patterns: readonly Pattern[],
  step: { withinMs: number; strict: boolean; anyOrder: boolean },
): Promise<void> => {
  if (conn.client === null) throw new StepFailure(`connection ${conn.name} was never opened`, patterns);
  const outcome = await ctx.waiter.until(() => matchExpected(conn, patterns, step), step.withinMs);
  if (outcome?.ok === true) {
    for (const [i, pattern] of patterns.entries()) {
      const index = outcome.indices[i] as number;
      saveCaptures(ctx, capturesOf(pattern), (conn.events[index] as Observed).event);
    }
    conn.cursor = Math.max(...outcome.indices) + 1;
    return;
  }
  // Which expected event is the first one missing (in order), and what came instead.
  let from = conn.cursor;
  let missing = patterns.length - 1;
  for (const [i, pattern] of patterns.entries()) {
    const index = conn.events.findIndex((o, j) => j >= (step.anyOrder ? conn.cursor : from) && matches(pattern, o.event));
    if (index < 0) {
      missing = i;
      break;
    }
    from = index + 1;
  }
  const pattern = patterns[missing];
  const type = typeOfPattern(pattern);
  const why =
    outcome === undefined
      ? `expected #${missing + 1} not seen within ${step.withinMs} ms: ${closest(conn.events, conn.cursor, pattern)}`
      : outcome.why;
  throw new StepFailure(
    why,
    patterns,
    summarize(conn.events, conn.cursor, (e) => e.type === type || e.type === "error"),
  );
};

/** Waits for the first event after the cursor that matches `marker`; its index, or a failure. */
const awaitMarker = async (
  ctx: ScenarioContext,
  conn: Connection,
  marker: Pattern,
  withinMs: number,
): Promise<number> => {
  const find = (): number | undefined => {
    const index = conn.events.findIndex((o, i) => i >= conn.cursor && matches(marker, o.event));
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

const expectAbsent = async (
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
  const window = conn.events.slice(conn.cursor, end);
  const offending = window.filter((o) => patterns.some((p) => matches(p, o.event)));
  if (offending.length > 0) {
    const first = offending[0] as Observed;
    throw new StepFailure(
      `${offending.length} unexpected event(s), the first: ${first.event.type}`,
      patterns.map((p) => ({ $not: p })),
      summarize(conn.events, conn.cursor, (e) => offending.some((o) => o.event === e)).slice(0, end - conn.cursor),
    );
  }
  if (until !== null) conn.cursor = end + 1;
};

const expectSeq = async (
  ctx: ScenarioContext,
  conn: Connection,
  after: number,
  until: Pattern,
  unordered: readonly Pattern[],
  step: { withinMs: number },
): Promise<void> => {
  if (!Number.isInteger(after)) throw new StepFailure(`expect_seq: after is not a number: ${after}`);
  const end = await awaitMarker(ctx, conn, until, step.withinMs);
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
  const ordered = stamped.filter((o) => !unordered.some((p) => matches(p, o.event))).map((o) => o.event.server_event_seq as number);
  const back = ordered.findIndex((s, i) => i > 0 && s < (ordered[i - 1] as number));
  if (back >= 0) fail(`server_event_seq ${ordered[back]} arrived after ${ordered[back - 1]}`);
};

const expectCycle = async (
  ctx: ScenarioContext,
  conn: Connection,
  patterns: readonly Pattern[],
  until: Pattern | null,
  step: { withinMs: number; minCycles: number },
): Promise<void> => {
  const end = until === null ? conn.events.length : await awaitMarker(ctx, conn, until, step.withinMs);
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
