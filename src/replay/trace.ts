import type { DomainEvent } from "../domain/index.ts";
import type { RecordedEntry } from "../engine/ports/index.ts";
import { type EventEnvelope, spanOf, TURN_SPANS, type Turn, turnLedger } from "../projections/index.ts";
import { inputClockOf, sessionMsOfInput } from "./input-clock.ts";
import { envelopesOf, lastOf } from "./inspect.ts";

/**
 * A session's log as a Chrome trace (issue 21, part 3): the Trace Event Format that Perfetto and chrome://tracing
 * open (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU). Times are µs since the
 * session's first entry (engine clock). One process, one thread (track) per lane:
 *
 * - 1 `user speech`: each utterance from its `SpeechStarted` to its `SpeechStopped` (`X`);
 * - 2 `assistant speech`: each response while its audio was sent, from its first audio delta to its end (`X`); a
 *   barge-in overlaps the user's track, which is why they are apart;
 * - 3 `responses`: each response from `response.created` to its end, named with its status (`X`);
 * - 4 `events`: commits, barge-ins, cancels and errors (`i`, thread-scoped), each with its log revision;
 * - 5.. `turn: <span>`: each span of the turn ledger (`X`), a track per span so that no two slices of a track
 *   overlap without nesting (Perfetto's rule for complete events);
 * - the VAD probability of every frame the server heard, as a counter (`C`, `vad`).
 */
export interface TraceEvent {
  readonly name: string;
  readonly ph: "X" | "i" | "C" | "M";
  readonly pid: number;
  readonly tid?: number;
  readonly ts?: number;
  readonly dur?: number;
  readonly s?: "t" | "p" | "g";
  readonly cat?: string;
  readonly args?: Record<string, unknown>;
}

export interface ChromeTrace {
  readonly traceEvents: TraceEvent[];
  readonly displayTimeUnit: "ms";
  readonly otherData: Record<string, string>;
}

const PID = 1;
const TRACKS: readonly string[] = [
  "user speech",
  "assistant speech",
  "responses",
  "events",
  ...TURN_SPANS.map(([name]) => `turn: ${name}`),
];
const tid = (track: string): number => TRACKS.indexOf(track) + 1;

type Instant = (name: string, at: number, revision: number, args?: Record<string, unknown>) => void;

/** VAD: every frame where its audio was on the session's clock, as the timeline page draws it (inputClockOf). */
const vadCounters = (entries: readonly RecordedEntry[], events: TraceEvent[]): void => {
  const { clock, vad } = inputClockOf(entries);
  for (const [inputMs, p] of vad)
    events.push({
      name: "vad",
      ph: "C",
      pid: PID,
      ts: Math.max(0, Math.round(sessionMsOfInput(clock, inputMs) * 1000)),
      args: { probability: Math.round(p * 1e4) / 1e4 },
    });
};

/** A response's slice on the responses track, its audio on the assistant speech track, its cancel and error. */
const responseEnded = (
  event: Extract<DomainEvent, { type: "ResponseEnded" }>,
  revision: number,
  at: number,
  r: { created: number; firstAudio: number | null; audioMs: number } | undefined,
  us: (at: number) => number,
  instant: Instant,
  events: TraceEvent[],
): void => {
  if (r === undefined) return;
  const status = event.data.status;
  events.push({
    name: `${event.data.responseId} ${status}${event.data.reason === null ? "" : ` (${event.data.reason})`}`,
    ph: "X",
    pid: PID,
    tid: tid("responses"),
    ts: us(r.created),
    dur: us(at) - us(r.created),
    args: { revision, status, reason: event.data.reason, transcript: event.data.transcript },
  });
  if (r.firstAudio !== null)
    events.push({
      name: event.data.responseId,
      ph: "X",
      pid: PID,
      tid: tid("assistant speech"),
      ts: us(r.firstAudio),
      dur: us(at) - us(r.firstAudio),
      args: { audio_ms: Math.round(r.audioMs), heard_ms: Math.round(event.data.playback.committedMs) },
    });
  if (status === "cancelled")
    instant("cancel", at, revision, { response_id: event.data.responseId, reason: event.data.reason });
  if (event.data.error !== null)
    instant(`error ${event.data.error.code}`, at, revision, { message: event.data.error.message });
};

/** The slices and instants of the log's decisions: speech, commits, barge-ins, errors, responses. */
const decisionEvents = (
  envelopes: readonly { revision: number; envelope: EventEnvelope }[],
  us: (at: number) => number,
  events: TraceEvent[],
): void => {
  const speech = new Map<string, number>();
  const responses = new Map<string, { created: number; firstAudio: number | null; audioMs: number }>();
  const instant = (name: string, at: number, revision: number, args: Record<string, unknown> = {}) =>
    events.push({ name, ph: "i", s: "t", pid: PID, tid: tid("events"), ts: us(at), args: { revision, ...args } });
  for (const { revision, envelope } of envelopes) {
    const { event, metadata } = envelope;
    const at = metadata.at;
    switch (event.type) {
      case "SpeechStarted":
        speech.set(event.data.itemId, at);
        break;
      case "SpeechStopped": {
        const started = speech.get(event.data.itemId);
        if (started === undefined) break;
        events.push({
          name: "speech",
          ph: "X",
          pid: PID,
          tid: tid("user speech"),
          ts: us(started),
          dur: us(at) - us(started),
          args: { item_id: event.data.itemId, audio_end_ms: event.data.audioEndMs },
        });
        break;
      }
      case "InputCommitted":
        instant("commit", at, revision, { item_id: event.data.itemId });
        break;
      case "OverlapDecided":
        if (event.data.action === "barge_in") instant("barge-in", at, revision, { overlap_ms: event.data.overlapMs });
        break;
      case "RequestRejected":
        instant(`error ${event.data.code}`, at, revision, { message: event.data.message });
        break;
      case "RunnerFailed":
        instant(`error ${event.data.code}`, at, revision, { message: event.data.message });
        break;
      case "ResponseStarted":
        responses.set(event.data.responseId, { created: at, firstAudio: null, audioMs: 0 });
        break;
      case "AudioDelivered": {
        const r = responses.get(event.data.responseId);
        if (r === undefined) break;
        r.firstAudio ??= at;
        r.audioMs += event.data.durationMs;
        break;
      }
      case "ResponseEnded":
        responseEnded(event, revision, at, responses.get(event.data.responseId), us, instant, events);
        break;
      default:
    }
  }
};

/** The turn ledger's spans, a track per span. */
const turnSpanEvents = (turns: readonly Turn[], us: (at: number) => number, events: TraceEvent[]): void => {
  for (const turn of turns) {
    for (const [name, fromKey] of TURN_SPANS) {
      const ms = spanOf(turn, name);
      const start = turn[fromKey] as number | null;
      if (ms === null || start === null) continue;
      events.push({
        name,
        ph: "X",
        pid: PID,
        tid: tid(`turn: ${name}`),
        ts: us(start),
        dur: Math.round(ms * 1000),
        args: { turn: turn.index, response_id: turn.responseId, ms },
      });
    }
  }
};

/** The Chrome trace of a session's log. @throws Error when the entries are not a session stream. */
export const traceOf = (entries: readonly RecordedEntry[]): ChromeTrace => {
  const t0 = entries[0]?.metadata.at ?? 0;
  const us = (at: number): number => Math.max(0, Math.round((at - t0) * 1000));
  const events: TraceEvent[] = [];
  const sessionId = (entries[0]?.data as { sessionId?: string } | undefined)?.sessionId ?? "session";
  events.push({ name: "process_name", ph: "M", pid: PID, args: { name: `duplex ${sessionId}` } });
  for (const track of TRACKS)
    events.push({ name: "thread_name", ph: "M", pid: PID, tid: tid(track), args: { name: track } });

  vadCounters(entries, events);
  const envelopes = envelopesOf(entries);
  decisionEvents(envelopes, us, events);
  const turns = lastOf<readonly Turn[]>(
    envelopes.map((e) => e.envelope),
    turnLedger(),
    [],
  );
  turnSpanEvents(turns, us, events);
  return {
    traceEvents: events,
    displayTimeUnit: "ms",
    otherData: { session_id: sessionId, started_at: new Date(t0).toISOString() },
  };
};
