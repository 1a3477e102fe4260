import type { ServerEvent } from "../client/index.ts";
import type { Observed } from "./connection.ts";
import { elide, mismatch } from "./pattern.ts";

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

/** The literal `type` a pattern names, or null. */
export const typeOfPattern = (pattern: unknown): string | null =>
  typeof (pattern as { type?: unknown }).type === "string" ? (pattern as { type: string }).type : null;

/** Events of the same type as a pattern, and why the first of them does not match it. */
export const closest = (events: readonly Observed[], from: number, pattern: unknown): string => {
  const type = typeOfPattern(pattern);
  const candidates = events.slice(from).filter((o) => type === null || o.event.type === type);
  if (candidates.length === 0) return type === null ? "no event at all" : `no ${type} at all`;
  const first = candidates[0] as Observed;
  return `${candidates.length} ${type ?? "event"}(s), the first differs: ${mismatch(pattern, first.event)}`;
};
