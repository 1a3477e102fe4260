import { map, type OperatorFunction, scan } from "rxjs";
import type { EventEnvelope } from "./envelope.ts";
import { initialPlaybackTruth, type PlaybackTruthState, reducePlaybackTruth } from "./playback-truth.ts";

/**
 * The turn ledger (issue 20, part 3): for each user turn, when each step of answering it happened, from the
 * session's domain events alone, so a live session and a replay of its log give the same numbers. Times are the
 * engine clock of the decision (`metadata.at`, ms since the epoch); audio lengths are ms of audio.
 *
 * A turn opens at the user's speech start (`SpeechStarted`), or at a commit or response with no speech before it
 * (text input, `response.create`); the first response started after it answers it. The spans people read
 * (`TURN_SPANS`) are differences of these times.
 */
export interface Turn {
  /** 1, 2, ...: the turn's place in the session. */
  readonly index: number;
  /** The user item the turn's speech or commit made; null for a response asked with no user input. */
  readonly itemId: string | null;
  readonly speechStartedAt: number | null;
  readonly speechStoppedAt: number | null;
  /** Input audio clock of the speech, ms: where in the session's input it starts and ends. */
  readonly audioStartMs: number | null;
  readonly audioEndMs: number | null;
  readonly committedAt: number | null;
  readonly responseId: string | null;
  /** The response's assistant message item (the one a truncation names). */
  readonly responseItemId: string | null;
  /** When `response.created` was decided (and sent). */
  readonly responseCreatedAt: number | null;
  /** When the first audio delta of the response was decided (and sent). */
  readonly firstAudioAt: number | null;
  /** When the client first acknowledged playing some of it (`playback.ack`, `conversation.item.truncate`). */
  readonly firstAckAt: number | null;
  readonly responseEndedAt: number | null;
  /** `completed`, `cancelled`, `failed`, `incomplete`; null while the response runs (or none started). */
  readonly status: string | null;
  /** Why a response ended other than completed (`barge_in`, `turn_detected`, `client_cancelled`, ...). */
  readonly endReason: string | null;
  /** A cut response: when the barge-in was decided (the overlap that cut it, or the epoch moving on). */
  readonly bargeInAt: number | null;
  /**
   * ms of audio the model generated for the response, and ms of it heard: what history keeps as heard (the
   * playback ledger's committed ms, from the client's acks or the server's estimate, as the session's
   * playback_commit_policy says); null before anything was committed.
   */
  readonly generatedMs: number;
  readonly heardMs: number | null;
  /** Where the response's audio was truncated, ms into it; null when it was not. */
  readonly truncatedAtMs: number | null;
}

/** The spans of a turn, ms: [name, from, to]. A span is measured only when both ends are known. */
export const TURN_SPANS = [
  ["speech_stop_to_commit", "speechStoppedAt", "committedAt"],
  ["speech_stop_to_response_created", "speechStoppedAt", "responseCreatedAt"],
  ["response_created_to_first_audio", "responseCreatedAt", "firstAudioAt"],
  ["speech_stop_to_first_audio", "speechStoppedAt", "firstAudioAt"],
  ["first_audio_to_first_ack", "firstAudioAt", "firstAckAt"],
  ["barge_in_to_response_ended", "bargeInAt", "responseEndedAt"],
] as const satisfies readonly (readonly [string, keyof Turn, keyof Turn])[];

export type TurnSpanName = (typeof TURN_SPANS)[number][0];

/** The turns, and the playback truth their `heardMs` is read from (the one story of what was heard). */
export interface TurnLedgerState {
  readonly turns: readonly Turn[];
  readonly playback: PlaybackTruthState;
}

export const initialTurnLedger: TurnLedgerState = { turns: [], playback: initialPlaybackTruth };

interface Turns {
  readonly turns: readonly Turn[];
}

const newTurn = (index: number, patch: Partial<Turn>): Turn => ({
  index,
  itemId: null,
  speechStartedAt: null,
  speechStoppedAt: null,
  audioStartMs: null,
  audioEndMs: null,
  committedAt: null,
  responseId: null,
  responseItemId: null,
  responseCreatedAt: null,
  firstAudioAt: null,
  firstAckAt: null,
  responseEndedAt: null,
  status: null,
  endReason: null,
  bargeInAt: null,
  generatedMs: 0,
  heardMs: null,
  truncatedAtMs: null,
  ...patch,
});

/** Replaces the turn at `i` with `patch` applied. */
const patched = (turns: readonly Turn[], i: number, patch: Partial<Turn>): Turn[] =>
  turns.map((t, j) => (j === i ? { ...t, ...patch } : t));

/** The last turn that has no response yet (the one a starting response answers), or -1. */
const waitingTurn = (turns: readonly Turn[]): number => {
  const i = turns.length - 1;
  return i >= 0 && turns[i]?.responseId === null ? i : -1;
};

const turnOfResponse = (turns: readonly Turn[], responseId: string): number =>
  turns.findLastIndex((t) => t.responseId === responseId);

/** The response a barge-in cuts: the last one started and not ended. */
const runningTurn = (turns: readonly Turn[]): number =>
  turns.findLastIndex((t) => t.responseId !== null && t.responseEndedAt === null);

/**
 * Folds one envelope into the ledger. Pure: the same envelopes give the same ledger, live or replayed. Events of
 * out-of-band responses (`conversation: "none"`) answer no user turn and are left out. `heardMs` is the playback
 * truth's (playback-truth.ts), the value history keeps, so the turn ledger never tells another story.
 */
export const reduceTurns = (state: TurnLedgerState, envelope: EventEnvelope): TurnLedgerState => {
  const stepped = stepTurns(state, envelope);
  const playback = reducePlaybackTruth(state.playback, envelope);
  if (playback === state.playback) return stepped === state ? state : { turns: stepped.turns, playback };
  // One response's truth changed (an update replaces one entry; new audio appends one).
  const changed = playback.responses.findLast((t, i) => t !== state.playback.responses[i]);
  const i = changed === undefined ? -1 : turnOfResponse(stepped.turns, changed.responseId);
  const turn = stepped.turns[i];
  if (changed === undefined || turn === undefined || turn.heardMs === changed.heardMs)
    return { turns: stepped.turns, playback };
  return { turns: patched(stepped.turns, i, { heardMs: changed.heardMs }), playback };
};

const stepTurns = (state: Turns, envelope: EventEnvelope): Turns => {
  const { event, metadata } = envelope;
  const at = metadata.at;
  const turns = state.turns;
  switch (event.type) {
    case "SpeechStarted":
      return {
        turns: [
          ...turns,
          newTurn(turns.length + 1, {
            itemId: event.data.itemId,
            speechStartedAt: at,
            audioStartMs: event.data.audioStartMs,
          }),
        ],
      };
    case "SpeechStopped": {
      const i = turns.findLastIndex((t) => t.itemId === event.data.itemId && t.speechStoppedAt === null);
      if (i < 0) return state;
      return { turns: patched(turns, i, { speechStoppedAt: at, audioEndMs: event.data.audioEndMs }) };
    }
    case "InputCommitted": {
      const i = turns.findLastIndex((t) => t.itemId === event.data.itemId);
      if (i >= 0) return { turns: patched(turns, i, { committedAt: at }) };
      // A commit with no speech event before it (a client commit of audio the VAD did not end).
      return { turns: [...turns, newTurn(turns.length + 1, { itemId: event.data.itemId, committedAt: at })] };
    }
    case "ResponseStarted": {
      if (event.data.conversation === "none") return state;
      // The turn it answers: the one whose item it names (a commit's response), else the last one waiting.
      const named =
        event.data.inReplyTo === undefined
          ? -1
          : turns.findLastIndex((t) => t.itemId === event.data.inReplyTo && t.responseId === null);
      const i = named >= 0 ? named : waitingTurn(turns);
      const started = { responseId: event.data.responseId, responseItemId: event.data.itemId, responseCreatedAt: at };
      if (i >= 0) return { turns: patched(turns, i, started) };
      return { turns: [...turns, newTurn(turns.length + 1, started)] };
    }
    case "AudioDelivered": {
      const i = turnOfResponse(turns, event.data.responseId);
      const turn = turns[i];
      if (turn === undefined) return state;
      return {
        turns: patched(turns, i, {
          firstAudioAt: turn.firstAudioAt ?? at,
          generatedMs: turn.generatedMs + event.data.durationMs,
        }),
      };
    }
    case "PlaybackAcknowledged": {
      const i = turnOfResponse(turns, event.data.responseId);
      const turn = turns[i];
      if (turn === undefined) return state;
      return {
        turns: patched(turns, i, { firstAckAt: turn.firstAckAt ?? at }),
      };
    }
    case "MessageStarted": {
      const i = turnOfResponse(turns, event.data.responseId);
      if (i < 0) return state;
      return { turns: patched(turns, i, { responseItemId: event.data.itemId }) };
    }
    case "ItemTruncated": {
      const i = turns.findLastIndex((t) => t.responseItemId === event.data.itemId);
      if (i < 0) return state;
      return { turns: patched(turns, i, { truncatedAtMs: event.data.audioEndMs }) };
    }
    case "OverlapDecided": {
      if (event.data.action !== "barge_in") return state;
      const i = runningTurn(turns);
      if (i < 0 || turns[i]?.bargeInAt !== null) return state;
      return { turns: patched(turns, i, { bargeInAt: at }) };
    }
    case "ResponseEnded": {
      const i = turnOfResponse(turns, event.data.responseId);
      const turn = turns[i];
      if (turn === undefined) return state;
      const cutByUser = event.data.reason === "barge_in" || event.data.reason === "turn_detected";
      return {
        turns: patched(turns, i, {
          responseEndedAt: at,
          status: event.data.status,
          endReason: event.data.reason,
          bargeInAt: turn.bargeInAt ?? (cutByUser ? at : null),
        }),
      };
    }
    default:
      return state;
  }
};

/** The turn ledger as an RxJS operator: envelopes in, the turns after each envelope out. */
export const turnLedger =
  (initial: TurnLedgerState = initialTurnLedger): OperatorFunction<EventEnvelope, readonly Turn[]> =>
  (source) =>
    source.pipe(
      scan(reduceTurns, initial),
      map((s) => s.turns),
    );

/** A span's value for one turn, ms, or null when either end is unknown (or the end precedes the start). */
export const spanOf = (turn: Turn, name: TurnSpanName): number | null => {
  const span = TURN_SPANS.find(([n]) => n === name);
  if (span === undefined) return null;
  const from = turn[span[1]] as number | null;
  const to = turn[span[2]] as number | null;
  return from === null || to === null || to < from ? null : to - from;
};

/** p50, p95 and worst of a span over turns, ms (nearest rank); null without samples. */
export interface SpanSummary {
  readonly span: TurnSpanName;
  readonly samples: number;
  readonly p50: number | null;
  readonly p95: number | null;
  readonly worst: number | null;
}

const rank = (sorted: readonly number[], p: number): number | null =>
  sorted.length === 0 ? null : (sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? null);

/** Every span of `TURN_SPANS` summarised over `turns`. */
export const summariseTurns = (turns: readonly Turn[]): SpanSummary[] =>
  TURN_SPANS.map(([name]) => {
    const values = turns
      .map((t) => spanOf(t, name))
      .filter((v): v is number => v !== null)
      .sort((a, b) => a - b);
    return {
      span: name,
      samples: values.length,
      p50: rank(values, 50),
      p95: rank(values, 95),
      worst: rank(values, 100),
    };
  });
