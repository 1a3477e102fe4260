import { from, lastValueFrom } from "rxjs";
import { beforeAll, describe, expect, it } from "vitest";
import type { RecordedEntry } from "../../src/engine/index.ts";
import {
  foldSessionSummary,
  initialSessionSummary,
  reduceSessionSummary,
  SUMMARY_DATA_TYPES,
  sessionSummary,
  summaryRowOf,
} from "../../src/projections/index.ts";
import { recordedSessions, reportRowOf } from "../support/session-list-reference.ts";

/** Up to `count` cut points of a log of `length` entries (every one for a short log), always the whole log. */
const cuts = (length: number, count: number): number[] => {
  if (length <= count) return Array.from({ length }, (_, i) => i + 1);
  return [...new Set([...Array.from({ length: count }, (_, i) => Math.ceil(((i + 1) * length) / count)), length])];
};

/** A recorded entry of a made-up session: revision `revision`, at `at` ms. */
const entry = (revision: number, type: string, data: unknown, at: number): RecordedEntry => ({
  stream: "session-made-up",
  revision,
  position: revision + 1,
  type,
  data,
  metadata: { at, epoch: 0, turnId: 0 },
});

describe("session summary", () => {
  let sessions: Awaited<ReturnType<typeof recordedSessions>>;
  beforeAll(async () => {
    sessions = await recordedSessions();
  });

  it("gives reportOf's row over every recorded session and every prefix of it (open, detached, ended)", () => {
    expect(sessions.length).toBeGreaterThanOrEqual(11);
    const states = new Set<string>();
    for (const { file, entries } of sessions) {
      for (const cut of cuts(entries.length, 60)) {
        const prefix = entries.slice(0, cut);
        const row = summaryRowOf(foldSessionSummary(prefix));
        expect(row, `${file} up to revision ${cut - 1}`).toEqual(reportRowOf(prefix));
        states.add(row.state);
      }
    }
    // The prefixes cover a session still open, one whose socket dropped, and ended ones.
    expect(states).toContain("open");
    expect(states).toContain("detached");
    expect([...states].some((s) => s.startsWith("closed"))).toBe(true);
  });

  it("reads no data outside SUMMARY_DATA_TYPES: a store may pass null for the others and get the same row", () => {
    for (const { file, entries } of sessions) {
      const lean = entries.map((e) => ({ ...e, data: SUMMARY_DATA_TYPES.has(e.type) ? e.data : null }));
      expect(summaryRowOf(foldSessionSummary(lean)), file).toEqual(summaryRowOf(foldSessionSummary(entries)));
    }
  });

  it("goes on from a stored state: folding a log in two parts, through JSON, equals folding it whole", () => {
    for (const { file, entries } of sessions) {
      const half = Math.floor(entries.length / 2);
      const stored = JSON.parse(JSON.stringify(foldSessionSummary(entries.slice(0, half))));
      expect(foldSessionSummary(entries.slice(half), stored), file).toEqual(foldSessionSummary(entries));
    }
  });

  it("is the last value of the sessionSummary operator over the log as an Observable", async () => {
    for (const { file, entries } of sessions) {
      expect(await lastValueFrom(from(entries).pipe(sessionSummary())), file).toEqual(
        summaryRowOf(foldSessionSummary(entries)),
      );
    }
  });

  it("takes a restart's downtime out of the duration, keeps each error code once in the order met, and names the ending", () => {
    const log = [
      entry(0, "SessionOpened", { sessionId: "made-up" }, 10_000),
      entry(1, "SessionCreated", { sessionId: "made-up", config: { model: "echo" } }, 10_000),
      entry(2, "RequestRejected", { code: "item_not_found", message: "no" }, 11_000),
      entry(3, "ResponseStarted", {}, 12_000),
      entry(4, "ResponseEnded", { error: { code: "response_timeout", message: "slow" } }, 13_000),
      // The server was down from 13 s to 73 s: a minute that is not the session's.
      entry(5, "SessionRecovered", { reason: "server_restart" }, 73_000),
      entry(6, "SessionConfigured", { config: { model: "other" } }, 74_000),
      entry(7, "RequestRejected", { code: "item_not_found", message: "again" }, 75_000),
      entry(8, "SessionClosed", { reason: "idle_ttl_expired" }, 76_250),
    ];
    expect(summaryRowOf(foldSessionSummary(log))).toEqual({
      id: "made-up",
      opened_at: new Date(10_000).toISOString(),
      duration_s: 6.3,
      state: "expired (idle)",
      model: "other",
      responses: 1,
      revision: 8,
      error_codes: ["item_not_found", "response_timeout"],
    });
  });

  it("is open while attached, detached after the socket drops, and open again on a resume", () => {
    const opened = [
      entry(0, "SessionOpened", {}, 0),
      entry(1, "SessionCreated", { sessionId: "from-created", config: { model: "echo" } }, 0),
    ];
    const detached = reduceSessionSummary(foldSessionSummary(opened), entry(2, "SessionDetached", {}, 5));
    const resumed = reduceSessionSummary(detached, entry(3, "SessionResumed", {}, 9));
    expect(summaryRowOf(foldSessionSummary(opened))).toMatchObject({ id: "from-created", state: "open" });
    expect(summaryRowOf(detached).state).toBe("detached");
    expect(summaryRowOf(resumed).state).toBe("open");
    expect(summaryRowOf(initialSessionSummary)).toMatchObject({ id: "", revision: -1, state: "detached" });
  });
});
