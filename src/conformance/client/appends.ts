import type { Command } from "../../domain/index.ts";
import { CLIENT_EVENTS } from "../../protocol/index.ts";
import type { Evidence } from "./grade.ts";

/**
 * A client's audio appends as its session's log holds them (issue 33, part 5): the accepted ones
 * (`input_audio_buffer.append` commands) and the refused ones (an `invalid` command whose `eventType` names an append,
 * decided `RequestRejected` with the code the client got in its `error`: `bad_audio` for half samples or bad base64,
 * `bad_event` for a `sample_rate_hz` the server does not take, `input_backpressure`, ...).
 */

/** `input_audio_buffer.append` and its aliases (`push_chunk`, `input.audio.append`: the catalogue's entry). */
export const APPEND_TYPES: ReadonlySet<string> = new Set(
  CLIENT_EVENTS.filter((e) => e.type === "input_audio_buffer.append").flatMap((e) => [e.type, ...(e.aliases ?? [])]),
);

/** The part of a grader's step (grade.ts) these functions read. */
export interface AppendStep {
  readonly revision: number;
  /** ms epoch, the log's clock. */
  readonly at: number;
  readonly command: Command | null;
  /** The code of the step's `RequestRejected`, or null when it was accepted. */
  readonly rejected: string | null;
  readonly events: readonly { readonly type: string; readonly data: Record<string, unknown> }[];
}

/** Whether `command` is an audio append the client sent, accepted or refused. */
export const isAppend = (command: Command | null): boolean =>
  command?.type === "input_audio_buffer.append" ||
  (command?.type === "invalid" && command.eventType !== null && APPEND_TYPES.has(command.eventType));

/** The refusals of one code among a client's appends. */
export interface AppendRefusal {
  /** The error code the server answered (`bad_audio`, `bad_event`, ...). */
  readonly code: string;
  /** How many appends were refused with it. */
  readonly count: number;
  /** The server's message to the first of them (what was expected and what came). */
  readonly message: string;
  /** The first refused append's step (its log revision and time). */
  readonly first: AppendStep;
}

/**
 * The refused appends among `appends` (steps of `isAppend`), one entry per code in the order each code first came,
 * with its count and its first message; empty when the server took every append.
 */
export const appendRefusalsOf = (appends: readonly AppendStep[]): AppendRefusal[] => {
  const byCode = new Map<string, { count: number; message: string; first: AppendStep }>();
  for (const step of appends) {
    if (step.rejected === null) continue;
    const seen = byCode.get(step.rejected);
    if (seen !== undefined) {
      seen.count += 1;
      continue;
    }
    const rejection = step.events.find((e) => e.type === "RequestRejected");
    byCode.set(step.rejected, { count: 1, message: String(rejection?.data.message ?? ""), first: step });
  }
  return [...byCode].map(([code, r]) => ({ code, ...r }));
};

/** `3 of 10 audio appends refused: bad_audio x2 ("..."), bad_event x1 ("...")`. */
export const describeRefusals = (refusals: readonly AppendRefusal[], appends: number): string => {
  const refused = refusals.reduce((n, r) => n + r.count, 0);
  return `${refused} of ${appends} audio append(s) refused: ${refusals.map((r) => `${r.code} x${r.count} ("${r.message}")`).join(", ")}`;
};

/** The rates a client most likely sends at, Hz: telephony, wideband, the CD family and the Realtime API's 24 kHz. */
export const COMMON_RATES_HZ: readonly number[] = [8000, 16000, 22050, 24000, 44100, 48000];
/** How far (a ratio) an estimate may be from a common rate to be named as it: 4 % (22050 and 24000 are 8.5 % apart). */
export const RATE_SNAP_TOLERANCE = 0.04;

/** The rate a client most likely sent its audio at. */
export interface RateGuess {
  /** The raw estimate, Hz: the declared rate times the tone's frequency over its heard pitch. */
  readonly estimateHz: number;
  /** The common rate (`COMMON_RATES_HZ`) within `RATE_SNAP_TOLERANCE` of the estimate, or null when none is. */
  readonly likelyHz: number | null;
}

/**
 * The rate audio was made at when a tone of `toneHz` made at that rate, declared as `declaredHz`, is heard at
 * `heardHz`: the server reads each second of it as declaredHz samples, so the pitch scales by declared / sent, and
 * sent = declared x tone / heard (16 kHz audio declared as 24 kHz plays 1.5 times too high: 24000 / 1.5 = 16000).
 * All in Hz; snapped to the nearest common rate within `RATE_SNAP_TOLERANCE`.
 */
export const guessSentRate = (declaredHz: number, toneHz: number, heardHz: number): RateGuess => {
  const estimateHz = (declaredHz * toneHz) / heardHz;
  const nearest = COMMON_RATES_HZ.reduce((a, b) => (Math.abs(b - estimateHz) < Math.abs(a - estimateHz) ? b : a));
  return {
    estimateHz,
    likelyHz: Math.abs(estimateHz / nearest - 1) <= RATE_SNAP_TOLERANCE ? nearest : null,
  };
};

/** The evidence of refused appends: each code's first refusal, with its count and the server's message. */
export const refusalEvidence = (refusals: readonly AppendRefusal[], t0: number): Evidence[] =>
  refusals.map((r) => ({
    revision: r.first.revision,
    at_ms: r.first.at - t0,
    what: `append refused: ${r.code} (${r.count} like it): ${r.message}`,
  }));
