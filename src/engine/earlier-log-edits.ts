import { createHash } from "node:crypto";
import {
  type DomainEvent,
  type EarlierRules,
  evolve,
  INPUT_TYPES,
  initialState,
  type SessionState,
} from "../domain/index.ts";
import { initialWireState, reduceWire } from "../projections/index.ts";
import type { EarlierChange, Json } from "./earlier-change.ts";
import type { RecordedEntry } from "./ports/index.ts";

/**
 * The reading and editing of old logs that the earlier changes are written with (earlier-changes.ts): where a
 * field is absent, an object with a key inserted or removed in today's key order, the rules a session keeps, and
 * the scans over a log's steps that tell an old decision rule from today's. Pure.
 */

export const isInput = (type: string): boolean => (INPUT_TYPES as readonly string[]).includes(type);

export const withData = (entry: RecordedEntry, data: unknown): RecordedEntry => ({ ...entry, data });

/** `o` with `key: value` right after `after` (at the end when `after` is absent); `o` itself when `key` is there. */
export const insertAfter = (o: Json, after: string, key: string, value: unknown): Json => {
  if (key in o) return o;
  if (!(after in o)) return { ...o, [key]: value };
  const out: Json = {};
  for (const [k, v] of Object.entries(o)) {
    out[k] = v;
    if (k === after) out[key] = value;
  }
  return out;
};

/** `o` without the key at `path` (the objects along it copied, key order kept); `o` itself when it is absent. */
export const withoutKey = (o: Json, path: readonly string[]): Json => {
  const [head, ...rest] = path;
  if (head === undefined || !(head in o)) return o;
  if (rest.length === 0) {
    const { [head]: _dropped, ...kept } = o;
    return kept;
  }
  const inner = o[head];
  if (inner === null || typeof inner !== "object" || Array.isArray(inner)) return o;
  const changed = withoutKey(inner as Json, rest);
  return changed === inner ? o : { ...o, [head]: changed };
};

export const withoutKeys =
  (...paths: readonly (readonly string[])[]) =>
  (event: Json): Json =>
    paths.reduce(withoutKey, event);

export const first = (entries: readonly RecordedEntry[], type: string): Json | undefined =>
  entries.find((e) => e.type === type)?.data as Json | undefined;

/** Whether the first entry of `type` lacks `key` (null: there is none). */
export const firstLacks = (entries: readonly RecordedEntry[], type: string, key: string): boolean | null => {
  const data = first(entries, type);
  return data === undefined ? null : !(key in data);
};

export const configOf = (entries: readonly RecordedEntry[]): Json | undefined =>
  (first(entries, "SessionCreated") as { config?: Json } | undefined)?.config;

export const configLacks = (key: string) => (entries: readonly RecordedEntry[]) => {
  const config = configOf(entries);
  return config === undefined ? null : !(key in config);
};

/** The first verdict that is not null, in order. */
export const either = (...verdicts: readonly (() => boolean | null)[]): boolean | null => {
  for (const verdict of verdicts) {
    const v = verdict();
    if (v !== null) return v;
  }
  return null;
};

/** `rule` set in the session's `SessionOpened.rules` and `SessionCreated.rules`. */
export const withRule =
  (rule: keyof EarlierRules) =>
  (entries: readonly RecordedEntry[]): RecordedEntry[] =>
    entries.map((e) => {
      if (e.type !== "SessionOpened" && e.type !== "SessionCreated") return e;
      const data = e.data as Json & { rules?: Json };
      return withData(e, { ...data, rules: { ...data.rules, [rule]: true } });
    });

/**
 * The configuration of `SessionCreated` and `SessionConfigured` with `fields` where absent: after `after` (in
 * order), or at the end.
 */
export const fillConfig =
  (fields: Json, after?: string) =>
  (entries: readonly RecordedEntry[]): RecordedEntry[] =>
    entries.map((e) => {
      if (e.type !== "SessionCreated" && e.type !== "SessionConfigured") return e;
      const data = e.data as Json & { config: Json };
      let config = data.config;
      let at = after;
      for (const [key, value] of Object.entries(fields)) {
        if (at === undefined) config = key in config ? config : { ...config, [key]: value };
        else {
          config = insertAfter(config, at, key, value);
          at = key;
        }
      }
      return config === data.config ? e : withData(e, { ...data, config });
    });

/** Each entry of `type` passed through `change` (`data` in, data out). */
export const mapData =
  (type: string, change: (data: Json) => Json) =>
  (entries: readonly RecordedEntry[]): RecordedEntry[] =>
    entries.map((e) => (e.type === type ? withData(e, change(e.data as Json)) : e));

export const pipe =
  (...steps: readonly ((entries: readonly RecordedEntry[]) => RecordedEntry[])[]) =>
  (entries: readonly RecordedEntry[]): RecordedEntry[] =>
    steps.reduce<RecordedEntry[]>((out, step) => step(out), [...entries]);

/** `ResponseEnded` with `key` taken from the `ResponseStarted` of the same response (`pick` of its data). */
export const fromResponseStart = (key: string, after: string | null, pick: (started: Json | undefined) => unknown) => {
  return (entries: readonly RecordedEntry[]): RecordedEntry[] => {
    const started = new Map<unknown, Json>();
    return entries.map((e) => {
      const data = e.data as Json;
      if (e.type === "ResponseStarted") started.set(data.responseId, data);
      if (e.type !== "ResponseEnded" || key in data) return e;
      const value = pick(started.get(data.responseId));
      return withData(e, after === null ? { ...data, [key]: value } : insertAfter(data, after, key, value));
    });
  };
};

/**
 * Folds the recorded decisions and calls `visit` with each input and its decisions, and the state before them;
 * returns the first verdict `visit` gives that is not null, or null when it says `stop` (no later input can show
 * anything: the fold ends there) or the log ends.
 */
export const foldSteps = (
  entries: readonly RecordedEntry[],
  visit: (input: RecordedEntry, decisions: readonly RecordedEntry[], before: SessionState) => boolean | null | "stop",
): boolean | null => {
  let state = initialState;
  let i = 0;
  while (i < entries.length) {
    const input = entries[i] as RecordedEntry;
    let j = i + 1;
    while (j < entries.length && !isInput((entries[j] as RecordedEntry).type)) j += 1;
    const decisions = entries.slice(i + 1, j);
    const verdict = isInput(input.type) ? visit(input, decisions, state) : null;
    if (verdict === "stop") return null;
    if (verdict !== null) return verdict;
    for (const d of decisions) state = evolve(state, { type: d.type, data: d.data } as DomainEvent);
    i = j;
  }
  return null;
};

export const commandOf = (input: RecordedEntry | undefined): string | undefined =>
  input?.type === "CommandReceived" ? (input.data as { command?: { type?: string } }).command?.type : undefined;

/**
 * Whether the log's `session.created` was sent by a release before `commit`: its recorded SHA-256 against today's
 * rendering of the recorded `SessionCreated` turned into the bytes of the releases before (`commit` and the changes
 * after it) and after it (only those after it), `changes` being the table of earlier changes (earlier-changes.ts).
 * For a change of the wire alone, which no field of the log shows.
 */
export const sentBefore =
  (commit: string, changes: () => readonly EarlierChange[]) =>
  (entries: readonly RecordedEntry[]): boolean | null => {
    const created = entries.find((e) => e.type === "SessionCreated");
    const recorded = (created?.metadata.wire as { sha256?: string }[] | undefined)?.[0]?.sha256;
    if (created === undefined || recorded === undefined) return null;
    const json = reduceWire(initialWireState, {
      event: { type: "SessionCreated", data: created.data } as DomainEvent,
      metadata: { at: created.metadata.at, epoch: created.metadata.epoch, turnId: created.metadata.turnId },
    }).emitted[0]?.json;
    if (json === undefined) return null;
    const all = changes();
    const at = all.findIndex((c) => c.commit === commit);
    const commits = all.slice(at).map((c) => c.commit);
    const sha = (of: readonly string[]) =>
      createHash("sha256")
        .update(wireJsonBefore(all, json, of))
        .digest("hex");
    if (sha(commits) === recorded) return true;
    if (sha(commits.slice(1)) === recorded) return false;
    return null;
  };

/**
 * Whether speech was in progress (`speechInProgress` of domain/input-flow.ts) in the state the entries before `end`
 * fold to, read back from the last decisions that set it instead of folding them all (domain/evolve.ts): the
 * endpointer is in the phase the last `AudioBuffered` recorded unless an `InputCleared`, or an `InputCommitted` that
 * reset it, came after; the speech started at the last `SpeechStarted` unless a `SpeechStopped` came after it. Costs
 * the entries back to the last append, not the whole log. test/engine/earlier-detection.test.ts holds it equal to the
 * fold at every entry of the recorded logs.
 */
export const speechInProgressBefore = (entries: readonly RecordedEntry[], end: number): boolean => {
  let speaking: boolean | null = null;
  let started: boolean | null = null;
  for (let i = end - 1; i >= 0 && (speaking === null || started === null); i -= 1) {
    const e = entries[i] as RecordedEntry;
    if (speaking === null) {
      if (e.type === "AudioBuffered")
        speaking = (e.data as { endpointer?: { phase?: string } }).endpointer?.phase === "speech";
      else if (e.type === "InputCleared" || (e.type === "InputCommitted" && (e.data as Json).resetEndpointer === true))
        speaking = false;
      if (speaking === false) return false;
    }
    if (started === null) {
      if (e.type === "SpeechStarted") started = true;
      else if (e.type === "SpeechStopped") started = false;
      if (started === false) return false;
    }
  }
  return speaking === true && started === true;
};

/**
 * A server event's JSON text as the release before `commits` sent it: today's text turned by the `wire` of each of
 * `changes` named in `commits`, newest first. `json` itself when none is. @throws SyntaxError when `json` is not JSON.
 */
export const wireJsonBefore = (
  changes: readonly EarlierChange[],
  json: string,
  commits: readonly string[] | undefined,
): string => {
  const turning = changes.filter((c) => c.wire !== undefined && commits?.includes(c.commit) === true);
  if (turning.length === 0) return json;
  let event = JSON.parse(json) as Json;
  for (const change of [...turning].reverse()) event = (change.wire as (e: Json) => Json)(event);
  return JSON.stringify(event);
};
