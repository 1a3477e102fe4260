import type { ServerEvent } from "../client/index.ts";
import { type AudioChunk, audioChunks } from "./audio.ts";
import type { Connection } from "./connection.ts";
import { connect, connectionOf, pause, type ScenarioContext } from "./context.ts";
import { expectAbsent, expectCycle, expectEvents, expectSeq } from "./expectations.ts";
import { StepFailure, summarize } from "./failure.ts";
import { elide, fill, matches, valueAt } from "./pattern.ts";
import type { AudioStream, Step } from "./scenario.ts";

/**
 * Plays the steps of a scenario (conformance/README.md, "Steps"): opening, dropping and reconnecting sockets,
 * sending events, raw frames and audio, variables, repeats; the checks are in expectations.ts.
 */

const audioCache = new Map<string, Promise<AudioChunk[]>>();

/**
 * Runs steps one after the other, calling `onStep` before each (the caller keeps the current step for its report).
 * @throws StepFailure when a step fails; PatternError for a variable no step set; the socket's error when a
 *   connection cannot be opened.
 */
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
      await expectEvents(ctx, conn, step.events, step.absent.map(filled), lookup, step);
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
        throw new StepFailure(
          `no event on ${connName} matches ${JSON.stringify(from)}`,
          [from],
          summarize(conn.events, 0),
        );
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
      throw new StepFailure(
        `capture of ${name}: ${event.type} has no ${path}`,
        [],
        [{ index: -1, type: event.type, seq: null, at_ms: 0, json: elide(event) }],
      );
    }
    ctx.vars.set(name, value);
  }
};
