import type { DomainEvent } from "../domain/index.ts";
import type { RecordedEntry } from "../engine/ports/index.ts";
import { type SpanSummary, summariseTurns, type Turn } from "../projections/index.ts";
import { bidiClosed } from "./bidi-text.ts";
import { inputClockOf } from "./input-clock.ts";
import { audioOf, envelopesOf, reportOf, responseSamples } from "./inspect.ts";

/**
 * What a session's timeline draws (issue 21, parts 1-2: the data of the page, computed on the server or by the CLI,
 * never by decoding whole sessions in the browser). Times are ms since the session's first entry (engine clock);
 * peaks are [min, max] pairs of each bucket of `PEAKS_PER_SECOND` a second of audio, as -1..1.
 */
export interface Timeline {
  readonly session_id: string;
  readonly state: string;
  readonly model: string | null;
  readonly opened_at: string;
  /** Engine clock (ms since the Unix epoch) of the first entry: time 0 of every other time here. */
  readonly starts_at: number;
  readonly duration_ms: number;
  readonly chain: {
    readonly head: string | null;
    readonly verified: boolean | null;
    readonly broken_at: number | null;
  };
  /**
   * What the model heard: peaks of the input at its rate, and `clock`, the input clock's anchors on the timeline:
   * [ms of input, ms of the session] where each append's audio began (audio ms before it was buffered) and ended
   * (when it was buffered). Between anchors the page interpolates; a file sent faster than real time shows as a
   * steep stretch, as it arrived.
   */
  readonly input: {
    readonly rate_hz: number;
    readonly duration_ms: number;
    readonly peaks: readonly number[];
    readonly clock: readonly (readonly [number, number])[];
  };
  /** Each VAD frame's probability at its place on the input clock (ms of input), and the server VAD's threshold. */
  readonly vad: { readonly threshold: number; readonly points: readonly (readonly [number, number])[] };
  /** Each utterance the server heard, by the times its start and stop were decided. */
  readonly speech: readonly { readonly item_id: string; readonly start_ms: number; readonly stop_ms: number | null }[];
  /**
   * Each response: when created, first audio (where its audio starts on the timeline: the server's playback
   * estimate), ended; and on its own audio clock (ms from its first sample): `audio_ms` generated, `played_ms`
   * played (the clients' acks, or the estimate), `heard_ms` heard (the truncation point history keeps); each ack as
   * [ms of the session, ms played]; its audio's peaks; the revisions of its start and end.
   */
  readonly responses: readonly TimelineResponse[];
  /** The turn ledger's turns, their times (`...At`) as ms of the session like every other time here. */
  readonly turns: readonly Turn[];
  /** p50/p95/worst of each turn span (ms). */
  readonly spans: readonly SpanSummary[];
  /**
   * Every other mark, each with its log revision: commits and transcripts (input), overlap decisions and the model's
   * listen/speak (decisions), tool calls and truncations (outputs), cancels, errors with their codes, detaches,
   * resumes and restarts (connection). A label is the server's words around client text (ids, transcripts, tool
   * names and arguments, messages), each piece of which has its open bidi controls closed (`bidiClosed`), so no
   * piece reverses the words after it.
   */
  readonly marks: readonly {
    readonly at_ms: number;
    readonly kind: string;
    readonly label: string;
    readonly revision: number;
  }[];
}

export interface TimelineResponse {
  readonly id: string;
  readonly created_ms: number;
  readonly first_audio_ms: number | null;
  readonly ended_ms: number | null;
  readonly status: string | null;
  readonly reason: string | null;
  readonly audio_ms: number;
  readonly played_ms: number;
  readonly heard_ms: number | null;
  readonly acks: readonly (readonly [number, number])[];
  readonly transcript: string;
  readonly peaks: readonly number[];
  readonly started_revision: number;
  readonly ended_revision: number | null;
}

/** The kinds of `Timeline.marks`, by the lane the page draws them in. */
export const MARK_LANES = {
  input: ["commit", "transcript"],
  decisions: ["barge-in", "overlap", "listen", "speak"],
  outputs: ["tool-call", "truncate", "cancel"],
  errors: ["error"],
  connection: ["detach", "resume", "restart", "takeover"],
} as const;

export const PEAKS_PER_SECOND = 50;

/** [min, max] of each bucket of PCM16 little-endian `bytes` at `rateHz`, `PEAKS_PER_SECOND` buckets a second. */
export const peaksOf = (bytes: Uint8Array, rateHz: number): number[] => {
  const samples = Math.floor(bytes.byteLength / 2);
  const view = new DataView(bytes.buffer, bytes.byteOffset, samples * 2);
  const bucket = Math.max(1, Math.round(rateHz / PEAKS_PER_SECOND));
  const out: number[] = [];
  for (let start = 0; start < samples; start += bucket) {
    let min = 0;
    let max = 0;
    for (let i = start; i < Math.min(samples, start + bucket); i++) {
      const v = view.getInt16(i * 2, true) / 32768;
      if (v < min) min = v;
      if (v > max) max = v;
    }
    out.push(Math.round(min * 1e4) / 1e4, Math.round(max * 1e4) / 1e4);
  }
  return out;
};

/** Where a turn's times are (engine clock, ms since the Unix epoch): made ms of the session. */
const TURN_TIMES = [
  "speechStartedAt",
  "speechStoppedAt",
  "committedAt",
  "responseCreatedAt",
  "firstAudioAt",
  "firstAckAt",
  "responseEndedAt",
  "bargeInAt",
] as const;

type Mark = Timeline["marks"][number];
type OpenResponse = { -readonly [K in keyof TimelineResponse]: TimelineResponse[K] } & {
  acks: [number, number][];
};

type MarkOf = (at_ms: number, kind: string, label: string, revision: number) => void;

/**
 * The marks of the timeline an event makes by itself (commits, transcripts, overlaps, listens, speaks, tool calls,
 * truncations, errors, resumes, detaches); every other event makes none here (speech and responses are tracked by
 * `trackEvent`).
 */
const readMarks = (event: DomainEvent, revision: number, at: number, mark: MarkOf): void => {
  switch (event.type) {
    case "InputCommitted":
      mark(at, "commit", bidiClosed`commit ${event.data.itemId} (${Math.round(event.data.audioMs)} ms)`, revision);
      break;
    case "InputTranscribed":
      mark(at, "transcript", bidiClosed`${event.data.itemId}: ${event.data.transcript}`, revision);
      break;
    case "OverlapDecided":
      mark(
        at,
        event.data.action === "barge_in" ? "barge-in" : "overlap",
        bidiClosed`${event.data.action} (${event.data.reason}, ${Math.round(event.data.overlapMs)} ms)`,
        revision,
      );
      break;
    case "ModelListened":
      mark(at, "listen", bidiClosed`the model listens (${event.data.reason})`, revision);
      break;
    case "ResponseSpoke":
      mark(at, "speak", bidiClosed`the model speaks (${event.data.responseId})`, revision);
      break;
    case "FunctionCallDelivered":
      mark(at, "tool-call", bidiClosed`${event.data.call.name}(${event.data.call.arguments})`, revision);
      break;
    case "ItemTruncated":
      mark(at, "truncate", bidiClosed`truncate ${event.data.itemId} at ${event.data.audioEndMs} ms`, revision);
      break;
    case "RequestRejected":
    case "RunnerFailed":
    case "InputTranscriptionFailed":
    case "DeferredResponseRefused":
      mark(at, "error", bidiClosed`${event.data.code}: ${event.data.message}`, revision);
      break;
    case "MalformedFunctionCall":
      mark(
        at,
        "error",
        bidiClosed`malformed_function_call: ${event.data.name ?? "?"}(${event.data.arguments})`,
        revision,
      );
      break;
    case "SessionResumed":
      mark(at, "resume", `resumed (generation ${event.data.attachmentGeneration})`, revision);
      break;
    case "SessionDetached":
      mark(at, "detach", `detached (generation ${event.data.attachmentGeneration})`, revision);
      break;
    default:
  }
};

/**
 * What the timeline tracks over several events: the VAD threshold in force (returned when an event sets it), each
 * utterance's speech span, each response's lifecycle, audio and acks, and the marks their ends make.
 */
const trackEvent = (
  event: DomainEvent,
  revision: number,
  at: number,
  rel: (at: number) => number,
  into: {
    speech: Map<string, { item_id: string; start_ms: number; stop_ms: number | null }>;
    responses: Map<string, OpenResponse>;
    mark: MarkOf;
  },
): number | undefined => {
  const { speech, responses, mark } = into;
  switch (event.type) {
    case "SessionCreated":
    case "SessionConfigured": {
      const detection = event.data.config.turnDetection as { threshold?: number } | null | undefined;
      return typeof detection?.threshold === "number" ? detection.threshold : undefined;
    }
    case "SpeechStarted":
      speech.set(event.data.itemId, { item_id: event.data.itemId, start_ms: at, stop_ms: null });
      break;
    case "SpeechStopped": {
      const s = speech.get(event.data.itemId);
      if (s !== undefined) s.stop_ms = at;
      break;
    }
    case "ResponseStarted":
      responses.set(event.data.responseId, {
        id: event.data.responseId,
        created_ms: at,
        first_audio_ms: null,
        ended_ms: null,
        status: null,
        reason: null,
        audio_ms: 0,
        played_ms: 0,
        heard_ms: null,
        acks: [],
        transcript: "",
        peaks: [],
        started_revision: revision,
        ended_revision: null,
      });
      break;
    case "AudioDelivered": {
      const r = responses.get(event.data.responseId);
      if (r === undefined) break;
      r.first_audio_ms ??= rel(event.data.firstDeltaAt);
      r.audio_ms += event.data.durationMs;
      break;
    }
    case "PlaybackAcknowledged": {
      const r = responses.get(event.data.responseId);
      if (r === undefined) break;
      r.acks.push([at, event.data.playedMs]);
      break;
    }
    case "ResponseEnded": {
      const r = responses.get(event.data.responseId);
      if (r === undefined) break;
      Object.assign(r, {
        ended_ms: at,
        status: event.data.status,
        reason: event.data.reason,
        transcript: event.data.transcript,
        ended_revision: revision,
      });
      if (event.data.status === "cancelled")
        mark(at, "cancel", bidiClosed`${r.id} cancelled (${event.data.reason ?? "?"})`, revision);
      if (event.data.error !== null)
        mark(at, "error", bidiClosed`${event.data.error.code}: ${event.data.error.message}`, revision);
      break;
    }
    default:
  }
  return undefined;
};

/**
 * The timeline of a session's log; `attached` as `reportOf` takes it (`"log"`: as the log's last state says).
 * @throws Error when the entries are not a session stream.
 */
export const timelineOf = (entries: readonly RecordedEntry[], attached: boolean | "log" = false): Timeline => {
  const t0 = entries[0]?.metadata.at ?? 0;
  const rel = (at: number): number => Math.round(at - t0);
  const report = reportOf(entries, attached);
  const audio = audioOf(entries);
  const envelopes = envelopesOf(entries);
  const playback = new Map(report.playback.map((p) => [p.responseId, p]));

  const { clock, vad } = inputClockOf(entries);
  let threshold = 0.5;
  const speech = new Map<string, { item_id: string; start_ms: number; stop_ms: number | null }>();
  const responses = new Map<string, OpenResponse>();
  const marks: Mark[] = [];
  const mark = (at_ms: number, kind: string, label: string, revision: number) =>
    marks.push({ at_ms, kind, label, revision });
  for (const { revision, envelope } of envelopes) {
    const { event, metadata } = envelope;
    const at = rel(metadata.at);
    readMarks(event, revision, at, mark);
    threshold = trackEvent(event, revision, at, rel, { speech, responses, mark }) ?? threshold;
  }
  // Recoveries are inputs, not decisions: marked from the entries.
  for (const entry of entries) {
    if (entry.type === "SessionRecovered")
      mark(rel(entry.metadata.at), "restart", "rebuilt from the log", entry.revision);
    if (entry.type === "SessionOwned") {
      const { node, epoch } = entry.data as { node: string; epoch: number };
      mark(
        rel(entry.metadata.at),
        "takeover",
        bidiClosed`taken over by node ${node} (ownership epoch ${epoch})`,
        entry.revision,
      );
    }
  }
  marks.sort((a, b) => a.at_ms - b.at_ms || a.revision - b.revision);

  const turns = report.turns.map((turn) => {
    const out: Record<string, unknown> = { ...turn };
    for (const key of TURN_TIMES) {
      const value = turn[key];
      out[key] = value === null ? null : rel(value);
    }
    return out as unknown as Turn;
  });
  return {
    session_id: report.session_id,
    state: report.state,
    model: report.model,
    opened_at: report.opened_at,
    starts_at: t0,
    duration_ms: rel(entries.at(-1)?.metadata.at ?? t0),
    chain: report.chain,
    input: {
      rate_hz: audio.input.rateHz,
      duration_ms: Math.round((audio.input.pcm16.byteLength / 2 / audio.input.rateHz) * 1000),
      peaks: peaksOf(audio.input.pcm16, audio.input.rateHz),
      clock,
    },
    vad: { threshold, points: vad },
    speech: [...speech.values()],
    responses: [...responses.values()].map((r) => {
      const sent = audio.responses.get(r.id);
      const samples = sent === undefined ? null : responseSamples(sent);
      const peaks =
        sent === undefined || !(samples instanceof Int16Array)
          ? []
          : peaksOf(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength), sent.rateHz);
      // Played and heard are the playback truth's, as in every other view (BEHAVIOUR.md, "One story per session").
      const truth = playback.get(r.id);
      const played_ms = truth?.ledger.playedMs ?? 0;
      const heard_ms = truth === undefined || truth.source === "none" ? null : truth.ledger.committedMs;
      return { ...r, audio_ms: Math.round(r.audio_ms), played_ms, heard_ms, peaks };
    }),
    turns,
    spans: summariseTurns(report.turns),
    marks,
  };
};

export { inputClockOf, sessionMsOfInput } from "./input-clock.ts";
