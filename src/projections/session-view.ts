import { map, type OperatorFunction, scan } from "rxjs";
import { evolve, type HistoryItem, initialState, type PlaybackLedger, type SessionState } from "../domain/index.ts";
import type { EventEnvelope } from "./envelope.ts";
import { type PlaybackTruth, playbackTruth } from "./playback-truth.ts";

/** The session state folded from its domain events with the decider's own `evolve`. */
export const sessionState =
  (initial: SessionState = initialState): OperatorFunction<EventEnvelope, SessionState> =>
  (source) =>
    source.pipe(scan((state, envelope) => evolve(state, envelope.event), initial));

/** What a status page or `duplex sessions` shows of a session. Times in ms. */
export interface SessionView {
  readonly sessionId: string;
  readonly phase: SessionState["phase"];
  readonly turnState: SessionState["turnState"];
  readonly epoch: number;
  readonly turnId: number;
  readonly responses: number;
  readonly activeResponseId: string | null;
  readonly inputClockMs: number;
}

export const toSessionView = (s: SessionState): SessionView => ({
  sessionId: s.sessionId,
  phase: s.phase,
  turnState: s.turnState,
  epoch: s.epoch,
  turnId: s.turnId,
  responses: s.responseCount,
  activeResponseId: s.response?.id ?? null,
  inputClockMs: s.input.clockMs,
});

/** The session view projection. */
export const sessionView = (): OperatorFunction<EventEnvelope, SessionView> => (source) =>
  source.pipe(sessionState(), map(toSessionView));

/**
 * One response's playback ledger (BEHAVIOUR.md, "Playback truth"), as every view tells it: read from the playback
 * truth (playback-truth.ts), so `committedMs` is what history keeps as heard, from acks or the server's estimate.
 */
export interface PlaybackEntry {
  readonly responseId: string;
  readonly itemId: string;
  readonly ledger: PlaybackLedger;
  readonly truncatedAtMs: number | null;
  /** Where played and heard come from: the client's acks, the server's estimate, or nothing yet. */
  readonly source: PlaybackTruth["source"];
}

export const toPlaybackEntry = (t: PlaybackTruth): PlaybackEntry => ({
  responseId: t.responseId,
  itemId: t.itemId,
  ledger: { generatedMs: t.generatedMs, sentMs: t.sentMs, playedMs: t.playedMs, committedMs: t.heardMs ?? 0 },
  truncatedAtMs: t.truncatedAtMs,
  source: t.source,
});

/** The playback ledger projection: every response's ledger after each event. */
export const playbackLedger = (): OperatorFunction<EventEnvelope, PlaybackEntry[]> => (source) =>
  source.pipe(
    playbackTruth(),
    map((truths) => truths.map(toPlaybackEntry)),
  );

/** History as a listener would tell it: assistant items that were not heard at all are dropped. */
export const toHistory = (s: SessionState): HistoryItem[] =>
  s.history.filter((item) => item.role === "user" || item.text.length > 0);

/** The history projection: the conversation history after each event. */
export const history = (): OperatorFunction<EventEnvelope, HistoryItem[]> => (source) =>
  source.pipe(sessionState(), map(toHistory));
