/**
 * What one load session saw, counted as it arrives (the load client's bookkeeping). Each stop is an utterance that
 * expects a response: in the turn lane an `input_audio_buffer.speech_stopped`, in the model-native lane (which sends
 * no speech events) the append that completes an utterance's stop as server VAD hears it, known from the client's
 * own input. Responses are matched to utterances in order (the next `response.created` answers the oldest
 * unanswered utterance, as the turn lane defers them in commit order and the model-native lane answers each stop).
 * The first audio delta of a response gives that utterance's first-audio latency (ms, from the stop to the delta's
 * arrival, both on the client's clock).
 */

/** How a response ended, as the load bench counts it. */
export type ResponseOutcome =
  /** `response.done` with status completed. */
  | "completed"
  /**
   * cancelled because the stream's next utterance barged in (`status_details.reason: turn_detected`) after its first
   * audio arrived: delivered until the user spoke over it.
   */
  | "interrupted"
  /** cancelled by a barge-in before any of its audio arrived: counted as lost. */
  | "interrupted_silent"
  /** any other end (failed, incomplete, cancelled for another reason). */
  | "other";

/** An utterance's response, by phase: none yet, created, or ended. */
type Answer =
  | { readonly phase: "waiting" }
  | { readonly phase: "streaming"; readonly responseId: string }
  | { readonly phase: "ended"; readonly outcome: ResponseOutcome };

interface Utterance {
  readonly stoppedAt: number;
  /** When its response's first audio delta arrived (ms, client clock). */
  firstAudioAt: number | null;
  answer: Answer;
}

/** The counts of one session (or of many, summed by {@link addTallies}). Times in ms. */
export interface TallyCounts {
  /** Utterances that stopped (turn lane: whose `speech_stopped` arrived; model-native lane: whose stop was sent). */
  readonly expected: number;
  readonly completed: number;
  readonly interrupted: number;
  /** Responses cancelled by a barge-in before their first audio arrived. */
  readonly interruptedSilent: number;
  /** Responses that ended otherwise, by `status` (and `reason` when cancelled). */
  readonly otherEnds: Readonly<Record<string, number>>;
  /** Responses created with no utterance waiting (the model spoke unprompted). */
  readonly unprompted: number;
  /** First audio after the utterance's stop, one value per answered utterance, ms. */
  readonly firstAudioMs: readonly number[];
  /** `error` events by `error.code`. */
  readonly errors: Readonly<Record<string, number>>;
  /** Audio deltas received (the relay's one per append). */
  readonly audioDeltas: number;
}

/** The bookkeeping of one session: feed it events, read its counts. */
export interface Tally {
  speechStopped(at: number): void;
  /** `at`: when it arrived, ms (client clock). */
  responseCreated(responseId: string, at: number): void;
  audioDelta(responseId: string | undefined, at: number): void;
  responseDone(responseId: string, status: string, reason: string | undefined): void;
  error(code: string): void;
  /** Every utterance's response has ended and none is streaming. */
  settled(): boolean;
  counts(): TallyCounts;
}

const bump = (record: Record<string, number>, key: string): void => {
  record[key] = (record[key] ?? 0) + 1;
};

/**
 * How long before the client places an utterance's stop its response may be created and still answer it, ms. In the
 * model-native lane the client places a stop from its own input, at the append that completes it; the server's VAD,
 * on frames aligned differently (and on 24 kHz input resampled), may hear it one append earlier, and answer before
 * the client has sent the append it expects the stop in.
 */
export const EARLY_RESPONSE_MS = 250;

export const createTally = (): Tally => {
  const utterances: Utterance[] = [];
  /** Responses created with no utterance waiting, still streaming. */
  const unpromptedLive = new Set<string>();
  /** Of those, the ones created less than EARLY_RESPONSE_MS ago: the next stop may be theirs. */
  const early: { responseId: string; createdAt: number; firstAudioAt: number | null }[] = [];
  let unprompted = 0;
  let audioDeltas = 0;
  const otherEnds: Record<string, number> = {};
  const errors: Record<string, number> = {};
  const byResponse = (responseId: string): Utterance | undefined =>
    utterances.find((u) => u.answer.phase === "streaming" && u.answer.responseId === responseId);
  return {
    speechStopped(at) {
      const utterance: Utterance = { stoppedAt: at, firstAudioAt: null, answer: { phase: "waiting" } };
      utterances.push(utterance);
      // A response created just before this stop answers it: its first audio counts from the stop (0 if before).
      while (early.length > 0 && at - (early[0]?.createdAt ?? at) > EARLY_RESPONSE_MS) early.shift();
      const answer = early.shift();
      if (answer === undefined || !unpromptedLive.delete(answer.responseId)) return;
      unprompted -= 1;
      utterance.answer = { phase: "streaming", responseId: answer.responseId };
      if (answer.firstAudioAt !== null) utterance.firstAudioAt = Math.max(at, answer.firstAudioAt);
    },
    responseCreated(responseId, at) {
      const waiting = utterances.find((u) => u.answer.phase === "waiting");
      if (waiting === undefined) {
        unprompted += 1;
        unpromptedLive.add(responseId);
        early.push({ responseId, createdAt: at, firstAudioAt: null });
        return;
      }
      waiting.answer = { phase: "streaming", responseId };
    },
    audioDelta(responseId, at) {
      audioDeltas += 1;
      if (responseId === undefined) return;
      const u = byResponse(responseId);
      if (u !== undefined && u.firstAudioAt === null) u.firstAudioAt = at;
      const e = early.find((r) => r.responseId === responseId);
      if (e !== undefined && e.firstAudioAt === null) e.firstAudioAt = at;
    },
    responseDone(responseId, status, reason) {
      const i = early.findIndex((r) => r.responseId === responseId);
      if (i >= 0) early.splice(i, 1);
      if (unpromptedLive.delete(responseId)) return;
      const u = byResponse(responseId);
      const bargeIn = status === "cancelled" && reason === "turn_detected";
      const outcome: ResponseOutcome =
        status === "completed"
          ? "completed"
          : bargeIn
            ? u?.firstAudioAt === null
              ? "interrupted_silent"
              : "interrupted"
            : "other";
      if (outcome === "other") bump(otherEnds, reason === undefined ? status : `${status}:${reason}`);
      if (u !== undefined) u.answer = { phase: "ended", outcome };
    },
    error(code) {
      bump(errors, code);
    },
    settled() {
      return unpromptedLive.size === 0 && utterances.every((u) => u.answer.phase === "ended");
    },
    counts() {
      const ended = (o: ResponseOutcome) =>
        utterances.filter((u) => u.answer.phase === "ended" && u.answer.outcome === o).length;
      const firstAudioMs: number[] = [];
      for (const u of utterances) if (u.firstAudioAt !== null) firstAudioMs.push(u.firstAudioAt - u.stoppedAt);
      return {
        expected: utterances.length,
        completed: ended("completed"),
        interrupted: ended("interrupted"),
        interruptedSilent: ended("interrupted_silent"),
        otherEnds: { ...otherEnds },
        unprompted,
        firstAudioMs,
        errors: { ...errors },
        audioDeltas,
      };
    },
  };
};

/** The sum of several sessions' counts. */
export const addTallies = (all: readonly TallyCounts[]): TallyCounts => {
  const sum = (pick: (t: TallyCounts) => number) => all.reduce((n, t) => n + pick(t), 0);
  const merge = (pick: (t: TallyCounts) => Readonly<Record<string, number>>) => {
    const out: Record<string, number> = {};
    for (const t of all) for (const [k, v] of Object.entries(pick(t))) out[k] = (out[k] ?? 0) + v;
    return out;
  };
  return {
    expected: sum((t) => t.expected),
    completed: sum((t) => t.completed),
    interrupted: sum((t) => t.interrupted),
    interruptedSilent: sum((t) => t.interruptedSilent),
    otherEnds: merge((t) => t.otherEnds),
    unprompted: sum((t) => t.unprompted),
    firstAudioMs: all.flatMap((t) => t.firstAudioMs),
    errors: merge((t) => t.errors),
    audioDeltas: sum((t) => t.audioDeltas),
  };
};
