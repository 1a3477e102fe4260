import { z } from "zod";
import { type EventStore, STREAM_PREFIX } from "../engine/index.ts";
import type { SessionSummaryRow } from "../projections/index.ts";

/** One row of `GET /v1/sessions`. */
export interface SessionSummary {
  readonly id: string;
  readonly object: "duplex.session";
  readonly opened_at: string;
  readonly duration_s: number;
  readonly state: string;
  /** Held by this server's engine now (attached or detached), not only recorded. */
  readonly live: boolean;
  readonly model: string | null;
  readonly responses: number;
  readonly revision: number;
  readonly error_codes: readonly string[];
}

/** A page of `GET /v1/sessions`. */
export interface SessionPage {
  readonly object: "list";
  readonly data: readonly SessionSummary[];
  readonly has_more: boolean;
  readonly next_cursor: string | null;
}

/** Text a store can compare: no NUL (PostgreSQL's text refuses it) and no lone surrogate; at most 200 characters. */
const isStoreText = (value: string): boolean => !value.includes("\u0000") && !/\p{Cs}/u.test(value);
const storeText = z.string().max(200).refine(isStoreText, "expected text without NUL or lone surrogates");

const listQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  after: z.string().optional(),
  state: z.enum(["open", "detached", "closed", "expired", "failed", "unused", "disconnected"]).optional(),
  since: z.iso.datetime({ offset: true }).optional(),
  until: z.iso.datetime({ offset: true }).optional(),
  model: storeText.optional(),
  error: storeText.optional(),
  order: z.enum(["asc", "desc"]).default("asc"),
});

/** The cursor of a page: where the session after which the next page starts opened, and its stream. */
const cursorOf = (firstAt: number, stream: string): string =>
  Buffer.from(JSON.stringify([firstAt, stream])).toString("base64url");

const readCursor = (cursor: string): [number, string] | null => {
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString()) as unknown;
    return Array.isArray(value) &&
      value.length === 2 &&
      Number.isFinite(value[0]) &&
      typeof value[1] === "string" &&
      value[1].startsWith(STREAM_PREFIX) &&
      isStoreText(value[1])
      ? [value[0], value[1]]
      : null;
  } catch {
    return null;
  }
};

/** A row of the list from the store's summary of the session (src/projections/session-summary.ts). */
const summaryOf = (row: SessionSummaryRow, live: boolean): SessionSummary => ({
  id: row.id,
  object: "duplex.session",
  opened_at: row.opened_at,
  duration_s: row.duration_s,
  state: row.state,
  live,
  model: row.model,
  responses: row.responses,
  revision: row.revision,
  error_codes: row.error_codes,
});

/**
 * A page of `GET /v1/sessions` for `query` (see sessions-api.ts), or the message of a 400: read from the store's
 * summary rows, `live` asked of `isLive` per row.
 */
export const sessionList =
  (store: EventStore, isLive: (id: string) => boolean) =>
  async (query: unknown): Promise<SessionPage | { readonly error: string }> => {
    const parsed = listQuery.safeParse(query);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return { error: `${issue?.path.join(".")}: ${issue?.message}` };
    }
    const q = parsed.data;
    const after = q.after === undefined ? null : readCursor(q.after);
    if (q.after !== undefined && after === null) return { error: "after: not a cursor this server gave" };
    // Filtered, ordered and cut by the store over its summary rows (no log is read): `has_more` says that a next
    // row passes the same filters.
    const page = await store.listSummaries({
      prefix: STREAM_PREFIX,
      ...(q.state === undefined ? {} : { state: q.state }),
      ...(q.model === undefined ? {} : { model: q.model }),
      ...(q.error === undefined ? {} : { error: q.error }),
      ...(q.since === undefined ? {} : { since: Date.parse(q.since) }),
      ...(q.until === undefined ? {} : { until: Date.parse(q.until) }),
      order: q.order,
      ...(after === null ? {} : { after: { firstAt: after[0], stream: after[1] } }),
      limit: q.limit,
    });
    const last = page.summaries.at(-1);
    return {
      object: "list",
      data: page.summaries.map((s) => summaryOf(s.summary, isLive(s.summary.id))),
      has_more: page.hasMore,
      next_cursor: page.hasMore && last !== undefined ? cursorOf(last.firstAt, last.stream) : null,
    };
  };
