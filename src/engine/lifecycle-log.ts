import { isExpiry } from "../domain/index.ts";
import type { EventEnvelope } from "../projections/index.ts";
import type { SessionHost } from "./session-host.ts";

/** The structured logger the engine writes to (pino's methods; messages are static, details in the object). */
export interface EngineLog {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** The median of `values` (ms), or null when there are none. */
const median = (values: readonly number[]): number | null => {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] ?? null) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
};

/** The log a host was rebuilt from: its decisions, and its downtime (ms) with the gap before the rebuild. */
export interface LoggedBefore {
  readonly logged: readonly EventEnvelope[];
  readonly downtimeMs: number;
}

/**
 * Logs a session's lifecycle as its log decides it, whoever holds it (a socket, none after a drop or a restart), one
 * line per event, for an operator: at info, `session resumed` (generation, events replayed), `session closed` or
 * `session expired` (reason, duration in s, responses, first audio p50 in ms: from `response.created` to its first
 * audio delta, engine clock) and `session runner failed` (the code); at debug, every refused client command by code.
 * `earlier`: what the log a host was rebuilt from holds (after a restart, or a takeover from another node), so that
 * the closing line's totals are the whole session's, not only what this host saw (issue 33, part 3): its decisions
 * are counted, never logged again, and its downtime is not counted in the duration (as `durationOf` and the summary
 * rows count it: one figure in every view).
 */
export const logLifecycle = (
  host: SessionHost,
  log: EngineLog,
  earlier: LoggedBefore = { logged: [], downtimeMs: 0 },
): void => {
  let opened: number | null = null;
  let responses = 0;
  const started = new Map<string, number>();
  const firstAudio: number[] = [];
  /** Counts the session's totals: when it opened, its responses and their first audio. */
  const count = (envelope: EventEnvelope): void => {
    const { event, metadata } = envelope;
    switch (event.type) {
      case "SessionCreated":
        opened ??= metadata.at;
        return;
      case "ResponseStarted":
        responses += 1;
        started.set(event.data.responseId, metadata.at);
        return;
      case "AudioDelivered": {
        const at = started.get(event.data.responseId);
        if (at === undefined) return;
        firstAudio.push(metadata.at - at);
        started.delete(event.data.responseId);
        return;
      }
      default:
        return;
    }
  };
  const seen = (envelope: EventEnvelope): void => {
    count(envelope);
    const { event, metadata } = envelope;
    const sessionId = host.sessionId;
    switch (event.type) {
      case "SessionResumed":
        log.info(
          {
            sessionId,
            generation: event.data.attachmentGeneration,
            eventsReplayed: Math.max(0, host.headSeq - event.data.lastReceivedSeq),
          },
          "session resumed",
        );
        return;
      case "RequestRejected":
        log.debug(
          { sessionId, code: event.data.code, command: event.data.commandType, param: event.data.param },
          "client command refused",
        );
        return;
      case "RunnerFailed":
        log.info(
          { sessionId, code: event.data.code, operation: event.data.operation, message: event.data.message },
          "session runner failed",
        );
        return;
      case "SessionClosed": {
        const expired = isExpiry(event.data.reason);
        log.info(
          {
            sessionId,
            reason: event.data.reason,
            durationS: opened === null ? null : Math.round((metadata.at - opened - earlier.downtimeMs) / 100) / 10,
            responses,
            firstAudioP50Ms: median(firstAudio),
          },
          expired ? "session expired" : "session closed",
        );
        return;
      }
      default:
        return;
    }
  };
  for (const envelope of earlier.logged) count(envelope);
  host.events$.subscribe(seen);
};
