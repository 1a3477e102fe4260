import { map, type OperatorFunction, scan } from "rxjs";
import type { PlaybackLedger } from "../domain/index.ts";
import type { EventEnvelope } from "./envelope.ts";

/**
 * What was played and heard of each response's audio, in one place (BEHAVIOUR.md, "One story per session"; issue 33,
 * part 3): the history, the playback ledger, the turn ledger, the session API, the timeline and `duplex show` all read
 * it, so that every view of a session tells the same story.
 *
 * All positions are ms of the response's audio (whatever its output format). `source` says where they come from:
 * - `acked`: the client's `playback.ack` / `conversation.item.truncate` (`PlaybackAcknowledged`): played and heard
 *   are the acknowledged ledger's `played_ms` and `committed_ms`.
 * - `estimated`: a client that never acknowledges (stock OpenAI clients): heard is what history keeps
 *   (`HistoryCommitted.committedMs`, the server's playback clock `min(sent, time since the first delta)` capped by a
 *   truncation, or everything generated under `commit_all_on_done`); played is at least that, up to what was sent.
 * Either way, once history has settled an item (`HistoryCommitted`), `heardMs` is history's `audioMs` for it.
 * - `none`: nothing was played or heard yet (heard is null).
 */
export interface PlaybackTruth {
  readonly responseId: string;
  readonly itemId: string;
  readonly generatedMs: number;
  readonly sentMs: number;
  readonly playedMs: number;
  /** What history keeps as heard, ms; null before anything was committed. */
  readonly heardMs: number | null;
  readonly truncatedAtMs: number | null;
  readonly source: "acked" | "estimated" | "none";
  /** History has settled the item (`HistoryCommitted`): from then on only a settlement moves `heardMs`. */
  readonly settled: boolean;
}

/** The fold: every response's truth, in the order its audio item appeared. */
export interface PlaybackTruthState {
  readonly responses: readonly PlaybackTruth[];
}

export const initialPlaybackTruth: PlaybackTruthState = { responses: [] };

const blank = (responseId: string, itemId: string): PlaybackTruth => ({
  responseId,
  itemId,
  generatedMs: 0,
  sentMs: 0,
  playedMs: 0,
  heardMs: null,
  truncatedAtMs: null,
  source: "none",
  settled: false,
});

/** `state` with the entry that `find` selects replaced by `patch(entry)`; `state` itself when none matches. */
const update = (
  state: PlaybackTruthState,
  find: (t: PlaybackTruth) => boolean,
  patch: (t: PlaybackTruth) => Partial<PlaybackTruth>,
): PlaybackTruthState => {
  const i = state.responses.findLastIndex(find);
  const entry = state.responses[i];
  if (entry === undefined) return state;
  return { responses: state.responses.map((t, j) => (j === i ? { ...t, ...patch(t) } : t)) };
};

/**
 * The acknowledged ledger a `PlaybackAcknowledged` or `ResponseEnded` carries, applied to an entry: played moves on;
 * heard follows the client's `committed_ms` until history settles the item, then history's settlements are the story
 * (under `commit_all_on_done` history keeps all of a completed item whatever was acked).
 */
const acked =
  (ledger: PlaybackLedger) =>
  (t: PlaybackTruth): Partial<PlaybackTruth> => ({
    playedMs: Math.max(t.playedMs, ledger.playedMs),
    heardMs: t.settled ? t.heardMs : ledger.committedMs,
    source: "acked",
  });

/**
 * Folds one envelope. Pure: the same envelopes give the same truth, live or replayed. Events that do not touch
 * playback leave the state as it is (the same object).
 */
export const reducePlaybackTruth = (state: PlaybackTruthState, envelope: EventEnvelope): PlaybackTruthState => {
  const event = envelope.event;
  switch (event.type) {
    case "AudioDelivered": {
      const { responseId, itemId } = event.data;
      const known = state.responses.some((t) => t.responseId === responseId);
      const base = known ? state : { responses: [...state.responses, blank(responseId, itemId)] };
      return update(
        base,
        (t) => t.responseId === responseId,
        (t) => ({
          generatedMs: Math.max(t.generatedMs, event.data.playback.generatedMs),
          sentMs: Math.max(t.sentMs, event.data.playback.sentMs),
          playedMs: Math.max(t.playedMs, event.data.playback.playedMs),
        }),
      );
    }
    case "PlaybackAcknowledged":
      return update(state, (t) => t.responseId === event.data.responseId, acked(event.data.playback));
    case "ItemTruncated":
      return update(
        state,
        (t) => t.itemId === event.data.itemId,
        (t) => ({ truncatedAtMs: Math.min(t.truncatedAtMs ?? Number.POSITIVE_INFINITY, event.data.audioEndMs) }),
      );
    case "HistoryCommitted": {
      const committedMs = event.data.committedMs;
      if (committedMs === null) return state;
      return update(
        state,
        (t) => t.itemId === event.data.item.id,
        (t) => {
          const heardMs = Math.min(committedMs, t.generatedMs);
          return t.source === "acked"
            ? { heardMs, settled: true }
            : {
                heardMs,
                settled: true,
                playedMs: Math.max(t.playedMs, Math.min(heardMs, t.sentMs)),
                source: "estimated",
              };
        },
      );
    }
    case "ResponseEnded":
      // An acknowledging client's ledger at the end is the story; without acks the history's settlement is.
      return update(
        state,
        (t) => t.responseId === event.data.responseId && t.source === "acked",
        acked(event.data.playback),
      );
    default:
      return state;
  }
};

/** The playback truth as an RxJS operator: envelopes in, every response's truth after each envelope out. */
export const playbackTruth =
  (initial: PlaybackTruthState = initialPlaybackTruth): OperatorFunction<EventEnvelope, readonly PlaybackTruth[]> =>
  (source) =>
    source.pipe(
      scan(reducePlaybackTruth, initial),
      map((s) => s.responses),
    );

/** The truth of one response, or undefined when it delivered no audio. */
export const truthOf = (state: PlaybackTruthState, responseId: string): PlaybackTruth | undefined =>
  state.responses.find((t) => t.responseId === responseId);
