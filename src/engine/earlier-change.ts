import type { EarlierWireRules } from "../projections/index.ts";
import type { RecordedEntry } from "./ports/index.ts";

/** One change between releases that an old log may predate, and its parts (see earlier-releases.ts). */

/** A parsed JSON object of a log entry's data. */
export type Json = Record<string, unknown>;

/** One change between releases that an old log may predate. */
export interface EarlierChange {
  /** The commit that made the change, as `git log --format=%h` names it. */
  readonly commit: string;
  /** What changed, in a line. */
  readonly summary: string;
  /** Whether the log was written before the change: true or false when it shows it, null when it cannot tell. */
  readonly before: (entries: readonly RecordedEntry[]) => boolean | null;
  /** The entries of a log written before the change in today's shape (fills only what is absent). */
  readonly upcast?: (entries: readonly RecordedEntry[]) => RecordedEntry[];
  /** A server event (parsed JSON) as rendered today, as the release before the change rendered it. */
  readonly wire?: (event: Json) => Json;
  /** How the release before the change numbered server events. */
  readonly wireRules?: EarlierWireRules;
  /**
   * The log schema in force when the change was made (absent: 1). A change made after the hash chain came in (2) may
   * be predated by logs of that schema too, and is looked for in them as well (see `upcastEarlierReleases`).
   */
  readonly sinceSchema?: number;
  /**
   * What of the release before the change a replay does not reproduce (it would need that release's decider code):
   * said with a divergence of such a log, so that it reads as what it is.
   */
  readonly unreproduced?: string;
}

/** The metadata key, on upcast entries only, naming the changes (commits) whose wire the entry was rendered before. */
export const RENDERED_BEFORE = "renderedBefore";
