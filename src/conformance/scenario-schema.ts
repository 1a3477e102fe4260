import { z } from "zod";
import { unknownOperators } from "./pattern.ts";
import type { Step } from "./scenario-types.ts";

/** The zod schema of scenario files (conformance/README.md) and its translation into steps. */

const DEFAULT_WITHIN_MS = 5000;
const name = z.string().regex(/^[a-z0-9][a-z0-9_.-]*$/, "expected lower-case letters, digits, '_', '.' or '-'");
const ms = z.number().int().min(0);
const pattern = z.record(z.string(), z.unknown()).superRefine((value, ctx) => {
  for (const path of unknownOperators(value)) {
    ctx.addIssue({ code: "custom", path, message: 'unknown operator (see conformance/README.md, "Patterns")' });
  }
});
const patterns = z.array(pattern).min(1);
const query = z.string().regex(/^\?/, "a query string starts with '?'");

const streamSchema = z
  .object({
    file: z.string().min(1),
    chunk_ms: z.number().int().positive().default(100),
    pace: z.enum(["realtime", "fast"]).default("fast"),
    rate: z.number().int().positive().optional(),
    format: z.enum(["pcm16", "g711_ulaw", "g711_alaw", "pcm_f32le"]).default("pcm16"),
    silence_before_ms: ms.default(0),
    silence_after_ms: ms.default(0),
    max_ms: z.number().int().positive().optional(),
    fields: z.record(z.string(), z.unknown()).default({}),
  })
  .strict();

/** `expect: [patterns]` is short for `expect: {events: [patterns]}`. */
const expectSchema = z.preprocess(
  (value) => (Array.isArray(value) ? { events: value } : value),
  z
    .object({
      events: patterns,
      within_ms: ms.default(DEFAULT_WITHIN_MS),
      strict: z.boolean().default(false),
      any_order: z.boolean().default(false),
      absent: z.array(pattern).default([]),
    })
    .strict()
    .refine((e) => !(e.strict && e.any_order), "strict and any_order exclude each other"),
);

const STEP_KEYS = [
  "connect",
  "send",
  "send_raw",
  "stream_audio",
  "expect",
  "expect_absent",
  "expect_seq",
  "expect_cycle",
  "capture",
  "set",
  "wait_ms",
  "drop_socket",
  "reconnect",
  "repeat",
] as const;

/** A step as the schema gives it. */
export type RawStep = z.output<typeof stepObject> & { repeat?: { times: unknown; as: string; steps: RawStep[] } };

const stepObject = z
  .object({
    conn: z.string().min(1).optional(),
    note: z.string().optional(),
    connect: z.union([z.literal(true), z.object({ query }).strict()]).optional(),
    send: pattern.refine((e) => typeof e.type === "string", "a client event needs a string `type`").optional(),
    send_raw: z
      .union([
        z.string(),
        z
          .object({
            repeat: z.string().min(1),
            bytes: z.number().int().positive(),
            prefix: z.string().default(""),
            suffix: z.string().default(""),
          })
          .strict(),
      ])
      .optional(),
    stream_audio: streamSchema.optional(),
    expect: expectSchema.optional(),
    expect_absent: z
      .object({
        events: patterns,
        for_ms: ms.optional(),
        until: pattern.optional(),
        within_ms: ms.default(DEFAULT_WITHIN_MS),
      })
      .strict()
      .refine((e) => (e.for_ms === undefined) !== (e.until === undefined), "give exactly one of for_ms and until")
      .optional(),
    expect_seq: z
      .object({
        after: z.union([z.number().int().min(0), z.string()]),
        until: pattern,
        within_ms: ms.default(DEFAULT_WITHIN_MS),
        unordered: z.array(pattern).default([]),
      })
      .strict()
      .optional(),
    expect_cycle: z
      .object({
        events: patterns,
        until: pattern.optional(),
        within_ms: ms.default(DEFAULT_WITHIN_MS),
        min_cycles: z.number().int().positive().default(1),
      })
      .strict()
      .optional(),
    capture: z
      .object({ from: pattern, vars: z.record(z.string().regex(/^[A-Za-z_]\w*$/), z.string()) })
      .strict()
      .optional(),
    set: z.record(z.string().regex(/^[A-Za-z_]\w*$/), z.unknown()).optional(),
    wait_ms: ms.optional(),
    drop_socket: z.literal(true).optional(),
    reconnect: z.union([z.literal(true), z.object({ query }).strict()]).optional(),
    repeat: z
      .object({
        times: z.union([z.number().int().min(0), z.string()]),
        as: z.string().regex(/^[A-Za-z_]\w*$/),
        steps: z.array(z.lazy((): z.ZodType => stepSchema)).min(1),
      })
      .strict()
      .optional(),
  })
  .strict();

const stepSchema: z.ZodType = stepObject.superRefine((step, ctx) => {
  const keys = STEP_KEYS.filter((key) => step[key] !== undefined);
  if (keys.length !== 1) {
    ctx.addIssue({
      code: "custom",
      message: `a step has exactly one of ${STEP_KEYS.join(", ")}; got ${keys.length === 0 ? "none" : keys.join(", ")}`,
    });
  }
});

/**
 * The schema of a scenario file: strict objects (an unknown key is an error), a step with exactly one action,
 * patterns free of unknown operators.
 */
export const scenarioSchema = z
  .object({
    name,
    description: z.string().min(1),
    behaviour: z.string().min(1).optional(),
    requires: z.object({ capabilities: pattern.optional(), session: pattern.optional() }).strict().optional(),
    vars: z.record(z.string().regex(/^[A-Za-z_]\w*$/), z.unknown()).optional(),
    known_failure: z.string().min(1).optional(),
    timeout_ms: z.number().int().positive().default(30_000),
    steps: z.array(stepSchema).min(1),
  })
  .strict();

/** A validated raw step in our own spelling; `line` is its position (`3`, or `3.2` inside a repeat). */
export const toStep = (raw: RawStep, line: string): Step => {
  const conn = raw.conn ?? "main";
  const base = { conn, line };
  if (raw.connect !== undefined)
    return { ...base, kind: "connect", query: raw.connect === true ? null : raw.connect.query };
  if (raw.send !== undefined) return { ...base, kind: "send", event: raw.send };
  if (raw.send_raw !== undefined) {
    return typeof raw.send_raw === "string"
      ? { ...base, kind: "send_raw", text: raw.send_raw }
      : { ...base, kind: "send_raw_generated", ...raw.send_raw };
  }
  if (raw.stream_audio !== undefined) {
    const s = raw.stream_audio;
    return {
      ...base,
      kind: "stream_audio",
      audio: {
        file: s.file,
        chunkMs: s.chunk_ms,
        pace: s.pace,
        rate: s.rate ?? null,
        format: s.format,
        silenceBeforeMs: s.silence_before_ms,
        silenceAfterMs: s.silence_after_ms,
        maxMs: s.max_ms ?? null,
        fields: s.fields,
      },
    };
  }
  if (raw.expect !== undefined) {
    const e = raw.expect;
    return {
      ...base,
      kind: "expect",
      events: e.events,
      withinMs: e.within_ms,
      strict: e.strict,
      anyOrder: e.any_order,
      absent: e.absent,
    };
  }
  if (raw.expect_absent !== undefined) {
    const e = raw.expect_absent;
    return {
      ...base,
      kind: "expect_absent",
      events: e.events,
      forMs: e.for_ms ?? null,
      until: e.until ?? null,
      withinMs: e.within_ms,
    };
  }
  if (raw.expect_seq !== undefined) {
    const e = raw.expect_seq;
    return {
      ...base,
      kind: "expect_seq",
      after: e.after,
      until: e.until,
      withinMs: e.within_ms,
      unordered: e.unordered,
    };
  }
  if (raw.expect_cycle !== undefined) {
    const e = raw.expect_cycle;
    return {
      ...base,
      kind: "expect_cycle",
      events: e.events,
      until: e.until ?? null,
      withinMs: e.within_ms,
      minCycles: e.min_cycles,
    };
  }
  if (raw.capture !== undefined) return { ...base, kind: "capture", from: raw.capture.from, vars: raw.capture.vars };
  if (raw.set !== undefined) return { ...base, kind: "set", vars: raw.set };
  if (raw.wait_ms !== undefined) return { ...base, kind: "wait", ms: raw.wait_ms };
  if (raw.drop_socket !== undefined) return { ...base, kind: "drop_socket" };
  if (raw.reconnect !== undefined)
    return { ...base, kind: "reconnect", query: raw.reconnect === true ? null : raw.reconnect.query };
  if (raw.repeat !== undefined) {
    const r = raw.repeat;
    return {
      ...base,
      kind: "repeat",
      times: r.times,
      as: r.as,
      steps: (r.steps as RawStep[]).map((s, i) => toStep(s, `${line}.${i + 1}`)),
    };
  }
  throw new Error(`step ${line} has no action`);
};
