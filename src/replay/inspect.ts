import { from, last, type Observable, type OperatorFunction } from "rxjs";
import type { AudioEncoding, HistoryItem } from "../domain/index.ts";
import { chainHeadOf, verifyChain } from "../engine/chain.ts";
import { downtimeMsOf } from "../engine/downtime.ts";
import { isInputType, stepsOf } from "../engine/log.ts";
import type { RecordedEntry } from "../engine/ports/index.ts";
import { committedStepsOf } from "../engine/step.ts";
import {
  type CommittedStep,
  type EventEnvelope,
  endingOfReason,
  type PlaybackEntry,
  type SessionReportViews,
  type SessionView,
  type SpanSummary,
  sessionReportViews,
  summariseTurns,
  type Turn,
} from "../projections/index.ts";
import { type BadAudio, decodeAudio } from "../protocol/index.ts";

/**
 * What a person or a script asks of a recorded (or live) session (issue 20, parts 2 and 3): the projections of its
 * log, computed by the same RxJS operators as for a live session, over the log read as an Observable. Times are the
 * engine clock (ms since the Unix epoch) unless a name says otherwise; durations in s where the name ends in `_s`.
 */
export interface SessionReport {
  readonly session_id: string;
  /** ISO 8601 time of the first log entry. */
  readonly opened_at: string;
  readonly duration_s: number;
  /** `closed`, `expired (idle)`, ..., or `open` / `detached` while the session has not ended. */
  readonly state: string;
  /** The model the session served (its configuration's), and its lane. */
  readonly model: string | null;
  readonly revision: number;
  readonly inputs: number;
  readonly decisions: number;
  readonly responses: number;
  /** Every refusal and failure in the log, in order: its revision, code and message. */
  readonly errors: readonly { readonly revision: number; readonly code: string; readonly message: string }[];
  readonly view: SessionView | null;
  readonly playback: readonly PlaybackEntry[];
  /** The conversation as the listener heard it. */
  readonly history: readonly HistoryItem[];
  readonly turns: readonly Turn[];
  /** p50/p95/worst of each span of the turn ledger, ms. */
  readonly spans: readonly SpanSummary[];
  /**
   * The log's hash chain (src/engine/chain.ts): its head (the last entry's digest; compare it with one kept
   * elsewhere to see a truncation), and whether every entry follows from the ones before it (null: a log written
   * without a chain), with where it first does not.
   */
  readonly chain: {
    readonly head: string | null;
    readonly verified: boolean | null;
    readonly broken_at: number | null;
  };
}

/** The domain event envelopes of a session's entries, in log order, with each one's revision. */
export const envelopesOf = (entries: readonly RecordedEntry[]): { revision: number; envelope: EventEnvelope }[] => {
  const decisions = entries.filter((e) => !isInput(e));
  const out: { revision: number; envelope: EventEnvelope }[] = [];
  let d = 0;
  for (const step of stepsOf(entries)) {
    for (const decision of step.decisions) {
      out.push({ revision: decisions[d]?.revision ?? -1, envelope: decision.envelope });
      d += 1;
    }
  }
  return out;
};

const isInput = (entry: RecordedEntry): boolean => isInputType(entry.type);

/** The last value `operator` gives over `envelopes` (synchronous: the log is read already), or `fallback`. */
export const lastOf = <T>(
  envelopes: readonly EventEnvelope[],
  operator: OperatorFunction<EventEnvelope, T>,
  fallback: T,
): T => {
  let value = fallback;
  const source: Observable<EventEnvelope> = from(envelopes);
  source.pipe(operator, last(undefined, fallback)).subscribe((v) => {
    value = v;
  });
  return value;
};

const chainReport = (entries: readonly RecordedEntry[]): SessionReport["chain"] => {
  if (typeof entries[0]?.metadata.chain !== "string") return { head: null, verified: null, broken_at: null };
  const verdict = verifyChain(entries);
  return verdict.ok
    ? { head: verdict.head, verified: true, broken_at: null }
    : { head: chainHeadOf(entries), verified: false, broken_at: verdict.revision };
};

/** How a session ended, in words, from its log; `open` or `detached` while it has not. */
export const endingOf = (entries: readonly RecordedEntry[], attached: boolean): string => {
  const closed = entries.findLast((e) => e.type === "SessionClosed")?.data as { reason?: string } | undefined;
  if (closed === undefined) return attached ? "open" : "detached";
  return endingOfReason(closed.reason);
};

/** The session's time alive, s: from its first entry to its last, less the downtime of server restarts. */
export const durationOf = (entries: readonly RecordedEntry[]): number => {
  const span = (entries.at(-1)?.metadata.at ?? 0) - (entries[0]?.metadata.at ?? 0);
  return Math.round((span - downtimeMsOf(entries)) / 100) / 10;
};

/**
 * The report of a session from its log entries: the entries are folded once into committed steps
 * (`committedStepsOf`, or `steps` when the caller has them) and every view is read from them in one pass
 * (`sessionReportViews`). `attached`: whether a socket holds it now (a live session's engine knows; a recorded one is
 * not; `"log"`: as the log's last state says). @throws Error when the entries are not a session stream (see `stepsOf`).
 */
export const reportOf = (
  entries: readonly RecordedEntry[],
  attached: boolean | "log" = false,
  steps: readonly CommittedStep[] = committedStepsOf(entries),
): SessionReport => {
  let views: SessionReportViews | undefined;
  from(steps)
    .pipe(sessionReportViews())
    .subscribe((v) => {
      views = v;
    });
  if (views === undefined) throw new Error("the report's views did not complete");
  const inputs = entries.filter(isInput).length;
  const opened = entries.find((e) => e.type === "SessionOpened")?.data as { sessionId?: string } | undefined;
  return {
    session_id: opened?.sessionId ?? views.view?.sessionId ?? "",
    opened_at: new Date(entries[0]?.metadata.at ?? 0).toISOString(),
    duration_s: durationOf(entries),
    state: endingOf(entries, attached === "log" ? views.attached : attached),
    model: views.model,
    revision: entries.at(-1)?.revision ?? -1,
    inputs,
    decisions: entries.length - inputs,
    responses: views.view?.responses ?? 0,
    errors: views.errors,
    view: views.view,
    playback: views.playback,
    history: views.history,
    turns: views.turns,
    spans: summariseTurns(views.turns),
    chain: chainReport(entries),
  };
};

/**
 * A session's audio from its log (issue 20, part 2): what the model heard (every append's audio as the runner got
 * it: PCM16 mono at the model's input rate, `capabilities.inputSampleRateHz`), and each response's audio as it was
 * sent (its `AudioDelivered` deltas in order, in the session's output format and rate at the time). Bytes, not
 * samples. An out-of-band response is included like any other.
 */
export interface SessionAudio {
  readonly input: { readonly rateHz: number; readonly pcm16: Uint8Array };
  readonly responses: ReadonlyMap<
    string,
    { readonly rateHz: number; readonly format: string; readonly bytes: Uint8Array }
  >;
}

export const audioOf = (entries: readonly RecordedEntry[]): SessionAudio => {
  let rateHz = 16000;
  const input: Uint8Array[] = [];
  const responses = new Map<string, { rateHz: number; format: string; chunks: Uint8Array[] }>();
  for (const step of stepsOf(entries)) {
    const command = step.input.type === "CommandReceived" ? step.input.data.command : null;
    if (command?.type === "input_audio_buffer.append") input.push(command.audio);
    for (const { envelope } of step.decisions) {
      const event = envelope.event;
      if (event.type === "SessionCreated") rateHz = event.data.capabilities.inputSampleRateHz;
      if (event.type !== "AudioDelivered") continue;
      const response = responses.get(event.data.responseId) ?? {
        rateHz: event.data.sampleRateHz,
        format: event.data.format ?? "pcm16",
        chunks: [],
      };
      response.chunks.push(event.data.audio);
      responses.set(event.data.responseId, response);
    }
  }
  return {
    input: { rateHz, pcm16: Buffer.concat(input) },
    responses: new Map(
      [...responses].map(([id, r]) => [id, { rateHz: r.rateHz, format: r.format, bytes: Buffer.concat(r.chunks) }]),
    ),
  };
};

/**
 * A response's audio of `audioOf` as PCM16 samples at its `rateHz`: G.711 decoded (`decodeAudio`, ITU-T G.711).
 * @returns the samples, or the `BadAudio` that says why its bytes do not decode.
 */
export const responseSamples = (response: {
  readonly format: string;
  readonly rateHz: number;
  readonly bytes: Uint8Array;
}): Int16Array | BadAudio => {
  if (response.format === "pcm16") {
    const copy = new Uint8Array(response.bytes.byteLength - (response.bytes.byteLength % 2));
    copy.set(response.bytes.subarray(0, copy.byteLength));
    return new Int16Array(copy.buffer);
  }
  return decodeAudio({ encoding: response.format as AudioEncoding, rate: response.rateHz }, response.bytes);
};
