import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { type EventStore, foldLog, type RecordedEntry, STREAM_PREFIX } from "../../src/engine/index.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import type { SessionSummaryRow } from "../../src/projections/index.ts";
import { reportOf } from "../../src/replay/index.ts";

/**
 * What the session list showed before the store kept summaries (issue 32): each row from `reportOf` over the whole
 * log, and the page of `GET /v1/sessions` as that release made it, by reading and folding every log. The tests hold
 * the summaries and the new list to it.
 */

/** A row of the list as `reportOf` tells it (the release before summaries: sessions-api.ts `summaryOf`). */
export const reportRowOf = (entries: readonly RecordedEntry[]): SessionSummaryRow => {
  const report = reportOf(entries, foldLog(entries).state.attached);
  return {
    id: report.session_id,
    opened_at: report.opened_at,
    duration_s: report.duration_s,
    state: report.state,
    model: report.model,
    responses: report.responses,
    revision: report.revision,
    error_codes: [...new Set(report.errors.map((e) => e.code))],
  };
};

/** The query of the old list, already parsed (times in ms). */
export interface OldListQuery {
  readonly limit: number;
  readonly order: "asc" | "desc";
  readonly after?: readonly [number, string];
  readonly state?: string;
  readonly model?: string;
  readonly error?: string;
  readonly since?: number;
  readonly until?: number;
}

/**
 * `GET /v1/sessions` as the release before summaries answered it: the streams sorted and cut by the cursor, each
 * log read and folded, rows filtered until `limit` of them; `has_more` when any stream was left unread (matching or
 * not: the defect issue 32 names).
 */
export const oldListPage = async (store: EventStore, q: OldListQuery, isLive: (id: string) => boolean) => {
  const since = q.since ?? Number.NEGATIVE_INFINITY;
  const until = q.until ?? Number.POSITIVE_INFINITY;
  const sign = q.order === "asc" ? 1 : -1;
  const compare = (a: { firstAt: number; stream: string }, b: { firstAt: number; stream: string }) =>
    sign * (a.firstAt - b.firstAt || (a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : 0));
  const after = q.after;
  const streams = (await store.listStreams(STREAM_PREFIX))
    .filter((s) => s.firstAt >= since && s.firstAt <= until)
    .sort(compare)
    .filter((s) => after === undefined || compare(s, { firstAt: after[0], stream: after[1] }) > 0);
  const data: unknown[] = [];
  let last: (typeof streams)[number] | null = null;
  let more = false;
  for (const info of streams) {
    if (data.length === q.limit) {
      more = true;
      break;
    }
    last = info;
    const row = reportRowOf(await store.read(info.stream));
    if (q.state !== undefined && row.state.split(" ")[0] !== q.state) continue;
    if (q.model !== undefined && row.model !== q.model) continue;
    if (q.error !== undefined && !row.error_codes.includes(q.error)) continue;
    const { id, opened_at, duration_s, state, model, responses, revision, error_codes } = row;
    data.push({
      id,
      object: "duplex.session",
      opened_at,
      duration_s,
      state,
      live: isLive(id),
      model,
      responses,
      revision,
      error_codes,
    });
  }
  return {
    object: "list",
    data,
    has_more: more,
    next_cursor:
      more && last !== null ? Buffer.from(JSON.stringify([last.firstAt, last.stream])).toString("base64url") : null,
  };
};

/** Every recorded session of replays/ and replays/frozen/ (read only: frozen files are never written). */
export const recordedSessions = async (): Promise<{ file: string; stream: string; entries: RecordedEntry[] }[]> => {
  const folders = [resolve("replays"), resolve("replays/frozen")];
  const files = folders.flatMap((folder) =>
    readdirSync(folder)
      .filter((name) => name.endsWith(".jsonl"))
      .map((name) => join(folder, name)),
  );
  return Promise.all(
    files.map(async (file) => {
      const { header, entries } = await readSessionFile(file);
      return { file, stream: header.stream, entries };
    }),
  );
};
