import { type RecordedEntry, streamOf } from "../../engine/index.ts";
import type { ClientCase } from "./cases.ts";
import { type Grade, gradeCase, type PeerAction } from "./graders.ts";

/**
 * The runs of the client conformance peer (issue 23): each connection that starts a case starts a run, which notes
 * the case's session (from `session.created`), what the peer did to the connection (`PeerAction`s), and whether the
 * session's log has ended. Once the client is done, each case is graded from its last run's session log.
 */

/** One run of a case: its session, what the peer did, and how far its log has been read. */
export interface CaseRun {
  readonly case: ClientCase;
  sessionId: string | null;
  readonly actions: PeerAction[];
  /** Counts of the server events sent so far, by type (the actions' `nth`). */
  readonly sent: Map<string, number>;
  readonly done: Set<number>;
  connections: number;
  ended: boolean;
  /** The revision (0-based) from which the session's log is read next, to see it end. */
  readFrom: number;
}

/** A graded case, as the report and `duplex conform --grade` read it. */
export interface CaseResult {
  readonly id: string;
  readonly rule: string;
  readonly profile: ClientCase["profile"];
  readonly required: ClientCase["required"];
  readonly session_id: string | null;
  readonly grade: Grade;
  /** The peer's actions and the session's log, for re-grading offline (`duplex conform --grade`). */
  readonly actions: readonly PeerAction[];
}

/** What the runs read of the server's event store: a stream's entries from a revision (inclusive) on. */
export interface LogReader {
  read(stream: string, from?: number): Promise<RecordedEntry[]>;
}

/** The runs of one peer, by case and by session. */
export interface CaseRuns {
  /** Every run so far, in start order. */
  readonly runs: CaseRun[];
  /** The run of each session id seen (the run a `session.resume` of it belongs to). */
  readonly bySession: Map<string, CaseRun>;
  /** Resolves once every case has a run whose session ended. */
  readonly allEnded: Promise<void>;
  /** Starts a run of the case `caseId` names, or of the next case in turn (null: no such case). */
  start(caseId: string | null): CaseRun | null;
  /** Notes `sessionId` as `run`'s session. */
  bindSession(run: CaseRun, sessionId: string): void;
  /** Reads each running session's new entries every second, to see it end; returns what stops the watch. */
  watch(store: LogReader): () => void;
  /** Grades every case (one never run is harness-broken), in case order, with the logs read. */
  grade(
    store: LogReader,
    unsupported: readonly string[],
  ): Promise<{ results: CaseResult[]; logs: Map<string, RecordedEntry[]> }>;
}

/**
 * A case stopped before its session ended (Ctrl-C mid-case) cannot say the client failed: what it failed to do may
 * still have been coming. Such a `fail` is reported harness-broken.
 */
const stoppedEarly = (grade: Grade, entries: readonly RecordedEntry[]): Grade =>
  grade.verdict === "fail" && !entries.some((e) => e.type === "SessionClosed")
    ? {
        ...grade,
        verdict: "harness-broken",
        message: `the case was stopped before its session ended (${grade.message})`,
        reason: "the case was stopped before its session ended",
      }
    : grade;

/** The grade of a case no connection ran. */
const neverRan = (): Grade => ({
  verdict: "harness-broken",
  message: "no connection of the client ran this case",
  reason: "no connection of the client ran this case",
  evidence: [],
  exercised: [],
});

/** The runs of `cases`; `log` gets a progress line when a case starts or ends. */
export const createCaseRuns = (cases: readonly ClientCase[], log?: (line: string) => void): CaseRuns => {
  const runs: CaseRun[] = [];
  const bySession = new Map<string, CaseRun>();
  let next = 0;
  let endedAll: () => void = () => undefined;
  const allEnded = new Promise<void>((resolve) => {
    endedAll = resolve;
  });
  const checkEnded = (): void => {
    if (cases.every((c) => runs.some((r) => r.case.id === c.id && r.ended))) endedAll();
  };

  // A case ends when its session's log does (closed, expired: however the client left), read every second. One look
  // at a time: a look that outlasts the second (a loaded machine) is not overlapped by the next, which would read
  // from the same revision and skip the end.
  const look = async (store: LogReader): Promise<void> => {
    for (const run of runs) {
      if (run.ended || run.sessionId === null) continue;
      // Only the entries since the last look: the whole log is not read again every second.
      const fresh = await store.read(streamOf(run.sessionId), run.readFrom);
      const last = fresh.at(-1);
      if (last === undefined) continue;
      run.readFrom = last.revision + 1;
      if (fresh.some((e) => e.type === "SessionClosed")) {
        run.ended = true;
        log?.(`case ${run.case.id} ended (session ${run.sessionId})\n`);
      }
    }
    checkEnded();
  };

  return {
    runs,
    bySession,
    allEnded,
    start(caseId) {
      const chosen = caseId === null ? cases[next++ % Math.max(1, cases.length)] : cases.find((c) => c.id === caseId);
      if (chosen === undefined) return null;
      const run: CaseRun = {
        case: chosen,
        sessionId: null,
        actions: [],
        sent: new Map(),
        done: new Set(),
        connections: 0,
        ended: false,
        readFrom: 0,
      };
      runs.push(run);
      log?.(`case ${chosen.id} started\n`);
      return run;
    },
    bindSession(run, sessionId) {
      run.sessionId = sessionId;
      bySession.set(sessionId, run);
    },
    watch(store) {
      let looking = false;
      const timer = setInterval(() => {
        if (looking) return;
        looking = true;
        void look(store)
          .catch(() => undefined)
          .finally(() => {
            looking = false;
          });
      }, 1000);
      timer.unref();
      return () => clearInterval(timer);
    },
    async grade(store, unsupported) {
      const logs = new Map<string, RecordedEntry[]>();
      const results: CaseResult[] = [];
      for (const c of cases) {
        // The case's last run with a session (a client may have tried it more than once).
        const run = runs.filter((r) => r.case.id === c.id && r.sessionId !== null).at(-1) ?? null;
        const entries = run?.sessionId == null ? [] : await store.read(streamOf(run.sessionId));
        if (run?.sessionId != null) logs.set(run.sessionId, entries);
        const grade: Grade =
          run === null
            ? neverRan()
            : stoppedEarly(gradeCase(c, { entries, actions: run.actions, unsupported }), entries);
        results.push({
          id: c.id,
          rule: c.rule,
          profile: c.profile,
          required: c.required,
          session_id: run?.sessionId ?? null,
          grade,
          actions: run?.actions ?? [],
        });
      }
      return { results, logs };
    },
  };
};
