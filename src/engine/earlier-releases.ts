import type { EarlierWireRules } from "../projections/index.ts";
import { type EarlierChange, RENDERED_BEFORE } from "./earlier-change.ts";
import { EARLIER_CHANGES } from "./earlier-changes.ts";
import { wireJsonBefore } from "./earlier-log-edits.ts";
import type { RecordedEntry } from "./ports/index.ts";

/**
 * Logs of earlier releases (issue 33, part 1; docs/log-format.md, "Logs of earlier releases"). Every log written
 * before the schema had a version claims schema 1, yet the releases that wrote them differ: fields were added to
 * the entries, decision rules changed, and the server rendered other bytes for the same decisions. Each such change
 * is one {@link EarlierChange}, named by its commit, in the order they were made. A log predates a change when it
 * shows it (a field the change added is absent, a decision only the old rule makes, the recorded digest of its
 * `session.created`); since history is a line, a log that predates one change predates every later one. Reading
 * such a log applies each change it predates, oldest first:
 *
 * - `upcast` fills what the change added with the value that release used, in the place today's decider puts it
 *   (key order is part of the bytes a replay compares), and names the old decision rules in
 *   `SessionOpened.rules` and `SessionCreated.rules` (`EarlierRules`): the session keeps them, in a replay and
 *   after an upgrade alike, as it keeps the configuration it was created with;
 * - `wire` turns a server event as rendered today into the bytes that release sent, and `wireRules` numbers the
 *   events as it did, so that the recorded SHA-256 of each server event still compares equal. Only entries written
 *   without a hash chain get them (`metadata.renderedBefore`); an entry of the chain's era was rendered by the
 *   release that appended it, and a replay compares its digests with today's rendering, then with the rendering
 *   before each wire change of that era in turn (`chainEraWireJson`).
 *
 * Nothing is written back; every function here is pure.
 */

export type { EarlierChange } from "./earlier-change.ts";
export { RENDERED_BEFORE } from "./earlier-change.ts";
export { EARLIER_CHANGES } from "./earlier-changes.ts";
export { speechInProgressBefore } from "./earlier-log-edits.ts";

/**
 * The changes a log was written before, oldest first: from the oldest one it shows it predates, every later one
 * (history is a line). Empty for a log of today's shape. A log of `schema` is looked at only for the changes made
 * while that schema was in force (`sinceSchema`): those before it are behind any log of it.
 */
export const earlierChangesOf = (entries: readonly RecordedEntry[], schema = 1): readonly EarlierChange[] => {
  const changes = EARLIER_CHANGES.filter((c) => (c.sinceSchema ?? 1) >= schema);
  const at = changes.findIndex((c) => c.before(entries) === true);
  return at < 0 ? [] : changes.slice(at);
};

/**
 * A log of schema 1 (or of `schema`, for the changes made since it came in) in today's shape: each change it predates
 * applied in turn (see the module comment), and each entry written without a hash chain marked with the changes
 * whose wire it was rendered before (`metadata.renderedBefore`, read by `earlierWireJson` and `earlierWireRulesOf`).
 * A log of today's shape comes back as it is. Pure.
 */
export const upcastEarlierReleases = (entries: readonly RecordedEntry[], schema = 1): RecordedEntry[] => {
  const changes = earlierChangesOf(entries, schema);
  if (changes.length === 0) return [...entries];
  const upcast = changes.reduce<RecordedEntry[]>(
    (out, c) => (c.upcast === undefined ? out : c.upcast(out)),
    [...entries],
  );
  const rendered = changes.filter((c) => c.wire !== undefined || c.wireRules !== undefined).map((c) => c.commit);
  if (rendered.length === 0) return upcast;
  return upcast.map((e) =>
    typeof e.metadata.chain === "string" ? e : { ...e, metadata: { ...e.metadata, [RENDERED_BEFORE]: rendered } },
  );
};

/**
 * A server event's JSON text as the release before `commits` sent it: today's text turned by each change's `wire`,
 * newest first. `json` itself when `commits` is empty or absent. @throws SyntaxError when `json` is not JSON.
 */
export const earlierWireJson = (json: string, commits: readonly string[] | undefined): string =>
  wireJsonBefore(EARLIER_CHANGES, json, commits);

/** How the release before `commits` numbered its server events (undefined: as today). */
export const earlierWireRulesOf = (commits: readonly string[] | undefined): EarlierWireRules | undefined => {
  let rules: EarlierWireRules | undefined;
  for (const change of EARLIER_CHANGES) {
    if (change.wireRules !== undefined && commits?.includes(change.commit) === true)
      rules = { ...rules, ...change.wireRules };
  }
  return rules;
};

/**
 * The changes of the wire made since the hash chain came in (`sinceSchema: 2` with a `wire`), oldest first. An entry
 * of the chain's era was rendered by the release that appended it, which no field of it names (a session spans an
 * upgrade: its early entries were rendered before a change, its later ones after), so a replay that finds a
 * recorded digest other than today's rendering compares it with each earlier release's in turn (`chainEraWireJson`).
 */
export const CHAIN_ERA_WIRE_COMMITS: readonly string[] = EARLIER_CHANGES.filter(
  (c) => (c.sinceSchema ?? 1) >= 2 && c.wire !== undefined,
).map((c) => c.commit);

/**
 * A server event's JSON text as each release of the chain's era before today rendered it, newest first: before the
 * newest wire change, before the two newest, ..., before all of them (history is a line). Empty while the chain's
 * era has no wire change. @throws SyntaxError when `json` is not JSON.
 */
export const chainEraWireJson = (json: string): string[] =>
  CHAIN_ERA_WIRE_COMMITS.map((_c, i) =>
    earlierWireJson(json, CHAIN_ERA_WIRE_COMMITS.slice(CHAIN_ERA_WIRE_COMMITS.length - 1 - i)),
  );
