import type { Turn } from "../projections/index.ts";
import { audioOf, envelopesOf, reportOf } from "./inspect.ts";
import { stepsOf } from "./log.ts";
import type { RecordedEntry } from "./ports/index.ts";

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
  readonly duration_ms: number;
  readonly chain: {
    readonly head: string | null;
    readonly verified: boolean | null;
    readonly broken_at: number | null;
  };
  /** What the model heard: peaks of the input at its rate, and where the input clock starts on the timeline. */
  readonly input: { readonly rate_hz: number; readonly duration_ms: number; readonly peaks: readonly number[] };
  /** Each VAD frame's probability at its place on the input clock (ms of input), and the server VAD's threshold. */
  readonly vad: { readonly threshold: number; readonly points: readonly (readonly [number, number])[] };
  /** Each utterance the server heard, by the times its start and stop were decided. */
  readonly speech: readonly { readonly item_id: string; readonly start_ms: number; readonly stop_ms: number | null }[];
  /** Each response: when created, first audio, ended; what was generated and heard; its audio's peaks. */
  readonly responses: readonly {
    readonly id: string;
    readonly created_ms: number;
    readonly first_audio_ms: number | null;
    readonly ended_ms: number | null;
    readonly status: string | null;
    readonly reason: string | null;
    readonly audio_ms: number;
    readonly heard_ms: number | null;
    readonly transcript: string;
    readonly peaks: readonly number[];
  }[];
  readonly turns: readonly Turn[];
  /** Every other mark: commits, overlap decisions, errors, attachments, recoveries; each with its log revision. */
  readonly marks: readonly {
    readonly at_ms: number;
    readonly kind: string;
    readonly label: string;
    readonly revision: number;
  }[];
}

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

/** Silero's frame, ms (512 samples at 16 kHz). */
const VAD_FRAME_MS = 32;

/** The timeline of a session's log. @throws Error when the entries are not a session stream. */
export const timelineOf = (entries: readonly RecordedEntry[], attached = false): Timeline => {
  const t0 = entries[0]?.metadata.at ?? 0;
  const rel = (at: number): number => Math.round(at - t0);
  const report = reportOf(entries, attached);
  const audio = audioOf(entries);
  const envelopes = envelopesOf(entries);

  // VAD frames on the input clock (ms of input, as the waveform): each append's frames end where its
  // AudioBuffered says the input clock stood after it.
  const vad: [number, number][] = [];
  let threshold = 0.5;
  for (const step of stepsOf(entries)) {
    if (step.input.type !== "CommandReceived") continue;
    const command = step.input.data.command;
    if (command.type !== "input_audio_buffer.append") continue;
    const buffered = step.decisions.find((d) => d.envelope.event.type === "AudioBuffered")?.envelope.event;
    const start = buffered?.type === "AudioBuffered" ? buffered.data.clockMs - buffered.data.durationMs : 0;
    for (const [i, p] of command.vad.entries()) vad.push([Math.round(start + i * VAD_FRAME_MS), p]);
  }
  const speech = new Map<string, { item_id: string; start_ms: number; stop_ms: number | null }>();
  const responses = new Map<string, Timeline["responses"][number] & { first_audio_ms: number | null }>();
  const marks: { at_ms: number; kind: string; label: string; revision: number }[] = [];
  for (const { revision, envelope } of envelopes) {
    const { event, metadata } = envelope;
    const at = rel(metadata.at);
    switch (event.type) {
      case "SessionCreated":
      case "SessionConfigured": {
        const detection = event.data.config.turnDetection as { threshold?: number } | null | undefined;
        if (typeof detection?.threshold === "number") threshold = detection.threshold;
        break;
      }
      case "SpeechStarted":
        speech.set(event.data.itemId, { item_id: event.data.itemId, start_ms: at, stop_ms: null });
        break;
      case "SpeechStopped": {
        const s = speech.get(event.data.itemId);
        if (s !== undefined) s.stop_ms = at;
        break;
      }
      case "InputCommitted":
        marks.push({ at_ms: at, kind: "commit", label: `commit ${event.data.itemId}`, revision });
        break;
      case "OverlapDecided":
        marks.push({
          at_ms: at,
          kind: event.data.action === "barge_in" ? "barge-in" : "overlap",
          label: `${event.data.action} (${event.data.reason}, ${Math.round(event.data.overlapMs)} ms)`,
          revision,
        });
        break;
      case "RequestRejected":
      case "RunnerFailed":
        marks.push({ at_ms: at, kind: "error", label: `${event.data.code}: ${event.data.message}`, revision });
        break;
      case "SessionResumed":
        marks.push({
          at_ms: at,
          kind: "resume",
          label: `resumed (generation ${event.data.attachmentGeneration})`,
          revision,
        });
        break;
      case "SessionDetached":
        marks.push({
          at_ms: at,
          kind: "detach",
          label: `detached (generation ${event.data.attachmentGeneration})`,
          revision,
        });
        break;
      case "ResponseStarted":
        responses.set(event.data.responseId, {
          id: event.data.responseId,
          created_ms: at,
          first_audio_ms: null,
          ended_ms: null,
          status: null,
          reason: null,
          audio_ms: 0,
          heard_ms: null,
          transcript: "",
          peaks: [],
        });
        break;
      case "AudioDelivered": {
        const r = responses.get(event.data.responseId);
        if (r === undefined) break;
        r.first_audio_ms ??= at;
        responses.set(r.id, { ...r, audio_ms: r.audio_ms + event.data.durationMs });
        break;
      }
      case "ResponseEnded": {
        const r = responses.get(event.data.responseId);
        if (r === undefined) break;
        responses.set(r.id, {
          ...r,
          ended_ms: at,
          status: event.data.status,
          reason: event.data.reason,
          heard_ms: event.data.playback.committedMs,
          transcript: event.data.transcript,
        });
        if (event.data.error !== null)
          marks.push({
            at_ms: at,
            kind: "error",
            label: `${event.data.error.code}: ${event.data.error.message}`,
            revision,
          });
        break;
      }
      default:
    }
  }
  // Recoveries are inputs, not decisions: marked from the entries.
  for (const entry of entries)
    if (entry.type === "SessionRecovered")
      marks.push({
        at_ms: rel(entry.metadata.at),
        kind: "restart",
        label: "rebuilt from the log",
        revision: entry.revision,
      });
  marks.sort((a, b) => a.at_ms - b.at_ms || a.revision - b.revision);

  return {
    session_id: report.session_id,
    state: report.state,
    model: report.model,
    opened_at: report.opened_at,
    duration_ms: rel(entries.at(-1)?.metadata.at ?? t0),
    chain: report.chain,
    input: {
      rate_hz: audio.input.rateHz,
      duration_ms: Math.round((audio.input.pcm16.byteLength / 2 / audio.input.rateHz) * 1000),
      peaks: peaksOf(audio.input.pcm16, audio.input.rateHz),
    },
    vad: { threshold, points: vad },
    speech: [...speech.values()],
    responses: [...responses.values()].map((r) => {
      const sent = audio.responses.get(r.id);
      // Peaks of PCM16 only; another output format's bytes are not samples.
      const peaks = sent === undefined || sent.format !== "pcm16" ? [] : peaksOf(sent.bytes, sent.rateHz);
      return { ...r, peaks };
    }),
    turns: report.turns,
    marks,
  };
};
