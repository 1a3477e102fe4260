import { readdirSync } from "node:fs";
import { join } from "node:path";
import { firstValueFrom, from, type Observable, toArray } from "rxjs";
import { describe, expect, it } from "vitest";
import { committedStepsOf, SessionHost, stepsOf, streamOf } from "../../src/engine/index.ts";
import { createResampler } from "../../src/infra/audio/index.ts";
import { createSqliteEventStore, readSessionFile } from "../../src/infra/event-store/index.ts";
import {
  type CommittedStep,
  committedHistory,
  committedView,
  envelopes,
  history,
  playbackLedger,
  sessionReportViews,
  sessionView,
  turnLedger,
  wire,
} from "../../src/projections/index.ts";

/**
 * The live path and the offline one are the same operators over the same steps (issue 34, part 2): a recorded
 * session's inputs decided live by a session host give, on its committed stream, the same views (session view,
 * playback ledger, history, turn ledger, wire, the session report's views read from each step's state) after every
 * event as the log read back offline, and as the recording.
 */
const dir = join(process.cwd(), "replays");
const files = readdirSync(dir).filter((f) => f.endsWith(".jsonl"));

/** Every value of each view over a stream of committed steps, in order. */
const viewsOf = async (steps: Observable<CommittedStep>) => {
  const all = <T>(o: Observable<T>): Promise<T[]> => firstValueFrom(o.pipe(toArray()));
  const [view, playback, heard, turns, sent, report] = await Promise.all([
    all(steps.pipe(envelopes(), sessionView())),
    all(steps.pipe(envelopes(), playbackLedger())),
    all(steps.pipe(envelopes(), history())),
    all(steps.pipe(envelopes(), turnLedger())),
    all(steps.pipe(wire())),
    all(steps.pipe(sessionReportViews())),
  ]);
  // The views read from each step's state (no second fold) end where the envelope folds end.
  const [stateView, stateHistory] = await Promise.all([
    all(steps.pipe(committedView())),
    all(steps.pipe(committedHistory())),
  ]);
  expect(report).toHaveLength(1);
  expect(stateView.at(-1)).toEqual(view.at(-1));
  expect(stateHistory.at(-1)).toEqual(heard.at(-1));
  expect(report[0]?.view).toEqual(view.at(-1));
  expect(report[0]?.history).toEqual(heard.at(-1));
  expect(report[0]?.playback).toEqual(playback.at(-1));
  expect(report[0]?.turns).toEqual(turns.at(-1));
  return { view, playback, heard, turns, sent, report, revisions: (await all(steps)).map((s) => s.revision) };
};

describe("live equals offline", () => {
  it("covers every kind of recorded session", () => {
    expect(files.length).toBeGreaterThanOrEqual(10);
  });

  for (const file of files) {
    it(`${file}: the committed stream's views equal the log's and the recording's, at every event`, async () => {
      const { entries: recorded } = await readSessionFile(join(dir, file));
      const store = createSqliteEventStore({ path: ":memory:" });
      const opened = stepsOf(recorded)[0]?.input;
      if (opened?.type !== "SessionOpened") throw new Error(`${file} does not open a session`);
      const host = new SessionHost(opened.data.sessionId, null, {
        store,
        vad: null,
        createResampler,
        openRunner: () => ({ submit: () => {}, abort: () => {}, configure: () => {}, close: async () => {} }),
        now: () => 0,
        onClosed: () => {},
        onAppendFailed: (_host, error) => {
          throw error;
        },
      });
      const live: CommittedStep[] = [];
      host.committed$.subscribe((step) => live.push(step));
      // Each recorded input decided live, one drain each, as it arrived.
      for (const step of stepsOf(recorded)) await host.enqueue(step.input);
      await host.settled();
      const logged = await store.read(streamOf(opened.data.sessionId));
      const liveViews = await viewsOf(from(live));
      const offline = await viewsOf(from(committedStepsOf(logged)));
      const recording = await viewsOf(from(committedStepsOf(recorded)));
      expect(liveViews.sent.length).toBeGreaterThan(0);
      expect(liveViews).toEqual(offline);
      expect(liveViews).toEqual(recording);
      await store.close();
    });
  }
});
