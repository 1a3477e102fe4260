import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Fastify from "fastify";
import { type Engine, foldLog, type NewEntry, STREAM_PREFIX } from "../engine/index.ts";
import { createSqliteEventStore, readSessionFile } from "../infra/event-store/index.ts";
import { reportOf } from "../replay/index.ts";
import { sessionsApi } from "../server/sessions-api.ts";

/** Options of {@link benchList}. */
export interface BenchListOptions {
  /** Stored sessions the list runs over (default 10 000). */
  readonly sessions?: number;
  readonly print: (line: Record<string, unknown>) => void;
}

const median = (values: readonly number[]): number => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;

/**
 * `duplex bench --only list` (issue 32, part 2, "Lists and pages"): `GET /v1/sessions?error=...&limit=50` over
 * `sessions` stored sessions (copies of replays/turn-lane-text.jsonl, each under its own id, a second apart; one in 50
 * holds the error the filter asks for), in a sqlite file: answered from the store's summary rows (median of 21
 * requests, ms), against the list before them, which read and folded every log for each request (once, ms), and
 * the time to fold every summary again from the logs (`duplex reindex`, ms).
 */
export const benchList = async (o: BenchListOptions): Promise<void> => {
  const count = o.sessions ?? 10_000;
  const file = fileURLToPath(new URL("../../replays/turn-lane-text.jsonl", import.meta.url));
  const { entries: recorded } = await readSessionFile(file);
  const base = recorded[0]?.metadata.at ?? 0;
  const dir = await mkdtemp(join(tmpdir(), "duplex-bench-list-"));
  const store = createSqliteEventStore({ path: join(dir, "duplex.sqlite") });
  try {
    const copy = (i: number): NewEntry[] => {
      const sessionId = `sess_bench${String(i).padStart(6, "0")}`;
      const shift = Date.UTC(2026, 0, 1) + i * 1_000 - base;
      const entries: NewEntry[] = recorded.map((e) => ({
        type: e.type,
        data:
          e.type === "SessionOpened" || e.type === "SessionCreated"
            ? { ...(e.data as Record<string, unknown>), sessionId }
            : e.data,
        metadata: { ...e.metadata, at: e.metadata.at + shift },
      }));
      const last = entries.at(-1)?.metadata.at ?? 0;
      if (i % 50 === 0)
        entries.push({
          type: "RequestRejected",
          data: { code: "input_backpressure", message: "too many events" },
          metadata: { at: last, epoch: 0, turnId: 0 },
        });
      return entries;
    };
    for (let i = 0; i < count; i += 500)
      await Promise.all(
        Array.from({ length: Math.min(500, count - i) }, (_, k) =>
          store.append(`${STREAM_PREFIX}bench${String(i + k).padStart(6, "0")}`, copy(i + k), "no_stream"),
        ),
      );

    const engine = { get: () => undefined } as unknown as Engine;
    const api = sessionsApi({ engine, store });
    const app = Fastify();
    app.get("/v1/sessions", api.list);
    const url = "/v1/sessions?error=input_backpressure&limit=50";
    const times: number[] = [];
    let rows = 0;
    for (let run = 0; run < 22; run += 1) {
      const started = performance.now();
      const response = await app.inject({ method: "GET", url });
      if (run > 0) times.push(performance.now() - started);
      rows = (response.json() as { data: unknown[] }).data.length;
    }
    await app.close();

    // The list before the summaries: every stream's log read and folded, for one request.
    const started = performance.now();
    let oldRows = 0;
    let worstBlockMs = 0;
    for (const info of await store.listStreams(STREAM_PREFIX)) {
      const entries = await store.read(info.stream);
      const folded = performance.now();
      const report = reportOf(entries, foldLog(entries).state.attached);
      worstBlockMs = Math.max(worstBlockMs, performance.now() - folded);
      if (oldRows < 50 && report.errors.some((e) => e.code === "input_backpressure")) oldRows += 1;
    }
    const oldMs = performance.now() - started;

    const reindexStarted = performance.now();
    const reindexed = await store.rebuildSummaries();
    const reindexMs = performance.now() - reindexStarted;
    const newMs = median(times);
    o.print({
      bench: "list",
      meaning:
        "GET /v1/sessions with an error filter (a page of 50) over N stored sessions: ms from the summary rows (median of 21), old_ms the list that folded every log per request (once), ratio old/new higher is better; reindex_ms folds every summary again (duplex reindex)",
      sessions: count,
      rows,
      ms: Math.round(newMs * 100) / 100,
      old_ms: Math.round(oldMs),
      old_rows: oldRows,
      old_worst_fold_ms: Math.round(worstBlockMs * 10) / 10,
      ratio: Math.round(oldMs / newMs),
      reindexed,
      reindex_ms: Math.round(reindexMs),
    });
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
};
