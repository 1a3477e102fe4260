import { map, type OperatorFunction, scan } from "rxjs";

/**
 * The session summary (issue 32, part 2, "Lists and pages"): the row `GET /v1/sessions` and `/sessions` read of a
 * session, folded from its log entry by entry, so a store keeps it up to date as entries land (one fold step per
 * appended entry) instead of reading and folding every log on each request. The values are those of `reportOf`
 * (src/replay/inspect.ts) over the same entries; a test checks them equal over every recorded session.
 *
 * Times are the engine clock (`metadata.at`, ms since the Unix epoch); `duration_s` is seconds, rounded to 0.1 s.
 */

/**
 * A log entry as the summary reads it: a `RecordedEntry` fits. `data` is read only for the types in
 * {@link SUMMARY_DATA_TYPES}; a store may pass `null` for the others (audio appends need not be decoded).
 */
export interface SummaryEntry {
  readonly type: string;
  readonly data: unknown;
  /** 0-based, contiguous from the stream's first entry. */
  readonly revision: number;
  readonly metadata: { readonly at: number };
}

/** The entry types whose `data` the fold reads; for every other type only its type, revision and time count. */
export const SUMMARY_DATA_TYPES: ReadonlySet<string> = new Set([
  "SessionOpened",
  "SessionCreated",
  "SessionConfigured",
  "RequestRejected",
  "RunnerFailed",
  "ResponseEnded",
  "SessionClosed",
]);

/** Entries that follow a server restart: the time since the entry before each is downtime, not the session's. */
export const RESTART_TYPES: ReadonlySet<string> = new Set(["SessionRecovered", "SessionOwned"]);

/**
 * Whether the fold reads the time (`metadata.at`) of an entry of `type` followed by one of `nextType` (null: the
 * log's last entry so far): the first and the last entry, a restart and the entry before one. A store folding a
 * long log may give the others `NaN` (their texts left packed) and get the same summary.
 */
export const summaryReadsTime = (revision: number, type: string, nextType: string | null): boolean =>
  revision === 0 || nextType === null || RESTART_TYPES.has(type) || RESTART_TYPES.has(nextType);

/**
 * What the fold keeps between entries: plain JSON, so a store persists it beside the log and goes on from it.
 * `entries` is 0 before the first entry.
 */
export interface SessionSummaryState {
  readonly entries: number;
  /** The first `SessionOpened`'s `sessionId` (null: none yet, or it named none). */
  readonly openedId: string | null;
  /** Whether a `SessionOpened` was met (only the first one names the session). */
  readonly opened: boolean;
  /** The last `SessionCreated`'s `sessionId`: the session view's, the id when `SessionOpened` names none. */
  readonly createdId: string | null;
  /** `metadata.at` of the first and the last entry, ms. */
  readonly firstAt: number;
  readonly lastAt: number;
  /** Server restarts' downtime, ms: before each `SessionRecovered` or `SessionOwned`, the gap since the entry before. */
  readonly downtimeMs: number;
  /** The last entry's revision (-1 before the first). */
  readonly revision: number;
  /** Whether a socket holds the session as its log tells (`SessionCreated`, `SessionResumed`: yes; `SessionDetached`: no). */
  readonly attached: boolean;
  /** How the last `SessionClosed` says it ended, in words (`closed`, `expired (idle)`, ...); null while it has not. */
  readonly ending: string | null;
  /** The model of the last `SessionCreated` or `SessionConfigured`. */
  readonly model: string | null;
  /** `ResponseStarted` decisions. */
  readonly responses: number;
  /** Codes of every refusal and failure (`RequestRejected`, `RunnerFailed`, `ResponseEnded` with an error), once each, in the order first met. */
  readonly errorCodes: readonly string[];
}

/** The state before any entry. */
export const initialSessionSummary: SessionSummaryState = {
  entries: 0,
  openedId: null,
  opened: false,
  createdId: null,
  firstAt: 0,
  lastAt: 0,
  downtimeMs: 0,
  revision: -1,
  attached: false,
  ending: null,
  model: null,
  responses: 0,
  errorCodes: [],
};

/** How a session ended, in words, from its `SessionClosed` reason (`reportOf`'s `state`; `String(reason)` otherwise). */
export const endingOfReason = (reason: unknown): string => {
  const words: Record<string, string> = {
    session_close: "closed",
    client_closed: "closed (socket 1000)",
    idle_ttl_expired: "expired (idle)",
    disconnect_grace_expired: "expired (no resume)",
    max_lifetime_expired: "expired (max lifetime)",
    disconnect: "disconnected",
    runner_failed: "failed (runner)",
    model_busy: "failed (model at capacity)",
    resource_exhausted: "closed (disk full)",
    unused: "unused",
  };
  const key = typeof reason === "string" ? reason : "";
  return Object.hasOwn(words, key) ? (words[key] as string) : String(reason);
};

const field = (data: unknown, key: string): unknown =>
  typeof data === "object" && data !== null ? (data as Record<string, unknown>)[key] : undefined;

const withCode = (state: SessionSummaryState, code: unknown): SessionSummaryState =>
  typeof code !== "string" || state.errorCodes.includes(code)
    ? state
    : { ...state, errorCodes: [...state.errorCodes, code] };

/** What one entry's type and data change, beyond times and revision. */
const foldData = (state: SessionSummaryState, type: string, data: unknown): SessionSummaryState => {
  switch (type) {
    case "SessionOpened": {
      if (state.opened) return state;
      const id = field(data, "sessionId");
      return { ...state, opened: true, openedId: typeof id === "string" ? id : null };
    }
    case "SessionCreated": {
      const id = field(data, "sessionId");
      const model = field(field(data, "config"), "model");
      return {
        ...state,
        createdId: typeof id === "string" ? id : state.createdId,
        attached: true,
        model: typeof model === "string" ? model : null,
      };
    }
    case "SessionConfigured": {
      const model = field(field(data, "config"), "model");
      return { ...state, model: typeof model === "string" ? model : null };
    }
    case "SessionResumed":
      return { ...state, attached: true };
    case "SessionDetached":
      return { ...state, attached: false };
    case "ResponseStarted":
      return { ...state, responses: state.responses + 1 };
    case "RequestRejected":
    case "RunnerFailed":
      return withCode(state, field(data, "code"));
    case "ResponseEnded": {
      const error = field(data, "error");
      return error === null || error === undefined ? state : withCode(state, field(error, "code"));
    }
    case "SessionClosed":
      return { ...state, ending: endingOfReason(field(data, "reason")) };
    default:
      return state;
  }
};

/**
 * One fold step: the summary after `entry`, given the summary of the entries before it. Pure.
 *
 * Duration as `durationOf`: from the first entry to the last, less each restart's gap (the time between a
 * `SessionRecovered` or `SessionOwned` and the entry before it). Only the times `summaryReadsTime` names count.
 */
export const reduceSessionSummary = (state: SessionSummaryState, entry: SummaryEntry): SessionSummaryState => {
  const at = entry.metadata.at;
  const restart = state.entries > 0 && RESTART_TYPES.has(entry.type);
  const timed: SessionSummaryState = {
    ...state,
    entries: state.entries + 1,
    firstAt: state.entries === 0 ? at : state.firstAt,
    lastAt: at,
    downtimeMs: restart ? state.downtimeMs + (at - state.lastAt) : state.downtimeMs,
    revision: entry.revision,
  };
  return foldData(timed, entry.type, entry.data);
};

/** The summary of `entries` (a whole log, or the entries after `from`'s). */
export const foldSessionSummary = (
  entries: Iterable<SummaryEntry>,
  from: SessionSummaryState = initialSessionSummary,
): SessionSummaryState => {
  let state = from;
  for (const entry of entries) state = reduceSessionSummary(state, entry);
  return state;
};

/**
 * The row of a session list, as `GET /v1/sessions` shows it (less `object` and `live`, which the server adds).
 * `opened_at` is ISO 8601; `state` is `open` or `detached` while the session has not ended, else how it ended.
 */
export interface SessionSummaryRow {
  readonly id: string;
  readonly opened_at: string;
  readonly duration_s: number;
  readonly state: string;
  readonly model: string | null;
  readonly responses: number;
  readonly revision: number;
  readonly error_codes: readonly string[];
}

/**
 * The row of a summary. @throws RangeError when the first entry's time is not a date (`toISOString`), as
 * `reportOf` would.
 */
export const summaryRowOf = (s: SessionSummaryState): SessionSummaryRow => ({
  id: s.openedId ?? s.createdId ?? "",
  opened_at: new Date(s.firstAt).toISOString(),
  duration_s: Math.round((s.lastAt - s.firstAt - s.downtimeMs) / 100) / 10,
  state: s.ending ?? (s.attached ? "open" : "detached"),
  model: s.model,
  responses: s.responses,
  revision: s.revision,
  error_codes: s.errorCodes,
});

/** The session summary projection: the row after each entry of a session's stream. */
export const sessionSummary = (): OperatorFunction<SummaryEntry, SessionSummaryRow> => (source) =>
  source.pipe(scan(reduceSessionSummary, initialSessionSummary), map(summaryRowOf));
