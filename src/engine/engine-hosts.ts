import { distinctUntilChanged } from "rxjs";
import { spanOf, TURN_SPANS, type TurnSpanName, turnLedger } from "../projections/index.ts";
import type { DecodedResume } from "../protocol/index.ts";
import { equalDigests, sha256Hex } from "./digest.ts";
import type { Effect } from "./effects.ts";
import { type EngineDeps, type EngineLimits, type ResumeRefusal, resumeExpired } from "./engine-api.ts";
import type { VadStream } from "./ports/index.ts";
import type { SessionHost, SessionHostDeps } from "./session-host.ts";

/** The parts of the engine (src/engine/engine.ts) that concern one host: its deps, its turn spans, its checks. */

/** What the engine does when one of its hosts closes, is fenced, fails an append or finds its session moved. */
export interface HostEvents {
  closed(host: SessionHost, vad: VadStream | null): void;
  fenced(host: SessionHost, reason: string, vad: VadStream | null): void;
  appendFailed(host: SessionHost, error: unknown): void;
  /** A drain's effects: the engine's timers run the timer effects among them. */
  runTimers(host: SessionHost, effects: readonly Effect[]): void;
  /** Only with other nodes on the store (`nodeId` not null). */
  movedAway(host: SessionHost): void;
}

/**
 * A host's dependencies from the engine's: the store, its VAD stream `vad`, the resamplers, the engine clock `now`
 * (ms since the Unix epoch), the input limits and rates, the runner, the observers, and `events` for its endings.
 */
export const hostDepsOf = (
  deps: EngineDeps,
  limits: EngineLimits,
  now: () => number,
  vad: VadStream | null,
  events: HostEvents,
  withNodes: boolean,
): SessionHostDeps => ({
  store: deps.store,
  vad,
  createResampler: deps.createResampler,
  ...(deps.createOutputResampler === undefined ? {} : { createOutputResampler: deps.createOutputResampler }),
  now,
  runTimers: (timed, effects) => events.runTimers(timed, effects),
  inputLimits: { maxPendingBytes: limits.maxPendingInputBytes, maxPendingTurns: limits.maxPendingTurns },
  ...(limits.eventsPerS === null ? {} : { eventRate: { perS: limits.eventsPerS, burst: limits.eventBurst } }),
  ...(limits.appendsPerS === null ? {} : { appendRate: { perS: limits.appendsPerS, burst: limits.appendBurst } }),
  openRunner: (id, config, history, emit) => deps.runner.open({ sessionId: id, config, history }, emit),
  onRunnerFault: (faulty, operation, error) =>
    deps.log?.error(
      { err: error, sessionId: faulty.sessionId, operation },
      "model runner broke its contract; its session is ended",
    ),
  onClosed: (closed) => events.closed(closed, vad),
  ...(deps.observe === undefined ? {} : { onAppended: deps.observe.appended }),
  ...(deps.observe?.delivered === undefined ? {} : { onDelivered: deps.observe.delivered }),
  measureJournal: limits.resumeReplayMaxBytes !== null,
  onFenced: (fenced, reason) => events.fenced(fenced, reason, vad),
  onAppendFailed: (failed, error) => events.appendFailed(failed, error),
  // With other nodes: a refused append waits for the new owner's claim and resume (the watch tells the sockets).
  ...(withNodes ? { onMovedAway: (moved: SessionHost) => events.movedAway(moved) } : {}),
});

/** Feeds each turn's spans (ms) to `observe` once they are known, from the session's live turn ledger. */
export const observeTurnSpans = (host: SessionHost, observe: (span: TurnSpanName, ms: number) => void): void => {
  const seen = new Set<string>();
  host.events$.pipe(turnLedger(), distinctUntilChanged()).subscribe((turns) => {
    // Only the last two turns can still change: a turn is done once the next one has a response.
    for (const turn of turns.slice(-2)) {
      for (const [name] of TURN_SPANS) {
        const key = `${turn.index}:${name}`;
        if (seen.has(key)) continue;
        const ms = spanOf(turn, name);
        if (ms === null) continue;
        seen.add(key);
        observe(name, ms);
      }
    }
  });
};

/**
 * Why a resume of `host` (undefined: not live here) is refused, or null when it may claim the session
 * (BEHAVIOUR.md, "Resume"): unknown or closed, a model without resume, the token (verified before anything about the
 * journal is answered), a sequence beyond the last event sent, a journal past `resume_replay_ttl_s` (`now` in ms
 * since the Unix epoch) or over `resume_replay_max_bytes`.
 */
export const resumeRefusalOf = (
  host: SessionHost | undefined,
  request: DecodedResume,
  limits: EngineLimits,
  now: number,
): ResumeRefusal | null => {
  if (host === undefined || host.isClosed) return resumeExpired(request.sessionId);
  if (!host.current.capabilities.supportsSessionResume)
    return { code: "unsupported_session_resume", message: "this model does not support session resume" };
  if (!host.holdsToken(sha256Hex(request.resumeToken), equalDigests))
    return { code: "invalid_resume_token", message: "the resume token is not the current one for this session" };
  if (request.lastReceivedSeq > host.headSeq)
    return {
      code: "journal_gap",
      message: `last_received_server_event_seq ${request.lastReceivedSeq} is beyond the last event sent (${host.headSeq})`,
    };
  const missed = request.lastReceivedSeq < host.headSeq;
  const ttl = limits.resumeReplayTtlS;
  if (missed && ttl !== null && host.detachedAt !== null && now - host.detachedAt > ttl * 1000)
    return {
      code: "journal_gap",
      message: `the events after ${request.lastReceivedSeq} are no longer retained: the session has been detached for more than resume_replay_ttl_s (${ttl} s)`,
    };
  const cap = limits.resumeReplayMaxBytes;
  if (missed && cap !== null && host.journalBytesAfter(request.lastReceivedSeq) > cap)
    return {
      code: "journal_overflow",
      message: `the events after ${request.lastReceivedSeq} are more than resume_replay_max_bytes (${cap}) to replay`,
    };
  return null;
};
