import type { ClientEnd, DuplexClientPhase } from "./connection-types.ts";
import { DuplexConnectionError, DuplexProtocolError, DuplexSessionClosedError } from "./errors.ts";
import type { ServerEvent } from "./event-collector.ts";
import { RESUMABLE_CLOSE_CODES, type ReconnectPolicy } from "./reconnect-policy.ts";

/**
 * When a ResumableConnection's link to its session ends, and with which error (reference/realtime-duplex-api.md,
 * "Reconnect and resume"; BEHAVIOUR.md, "Resume"): on a server event (`session.closed`, `session.expired`,
 * `session.replaced`, `session.resync_required`, an `error` that refuses a resume) and on a dropped connection
 * (resumed when the policy, the close code and a resume token allow it).
 */

/**
 * What a delivered server event does to the link: nothing (null), end it (`finish`, with null after the client's
 * own close), or refuse the running resume (`refuse`: the link ends with the error, at once or when the resume
 * attempt hands it back).
 */
export type ServerEventEnd =
  | { readonly kind: "finish"; readonly end: ClientEnd }
  | { readonly kind: "refuse"; readonly error: DuplexSessionClosedError }
  | null;

/** What the link knows when a server event comes. */
export interface LinkFacts {
  /** The last `error` the server sent (not while closing), for the message of a `session.closed` after it. */
  readonly lastError: ServerEvent | null;
  /** The client sent `session.close` itself: the session's end is no error. */
  readonly byClient: boolean;
  /** The highest `server_event_seq` delivered. */
  readonly lastSeq: number;
  /** A resume is running (a refusing `error` ends it). */
  readonly resuming: boolean;
}

/** Errors that answer a resume without refusing it: the server is busy, the client tries again. */
const RETRYABLE_RESUME_ERRORS: readonly string[] = ["resource_exhausted", "duplex_session_busy"];

/** What `event` (already delivered) does to the link. */
export const serverEventEnd = (event: ServerEvent, facts: LinkFacts): ServerEventEnd => {
  switch (event.type) {
    case "session.closed":
    case "session.expired": {
      const code = event.type === "session.closed" ? "session_closed" : "session_expired";
      const e = facts.lastError === null ? null : DuplexProtocolError.of(facts.lastError);
      const why = `the server ended the session (${String(event.reason)})${e === null ? "" : `; ${e.message}`}`;
      return { kind: "finish", end: facts.byClient ? null : new DuplexSessionClosedError(code, why) };
    }
    case "session.replaced":
      return {
        kind: "finish",
        end: new DuplexSessionClosedError("session_replaced", "another connection resumed this session"),
      };
    case "session.resync_required":
      return {
        kind: "refuse",
        error: new DuplexSessionClosedError(
          "resync_required",
          `the server cannot replay the events after seq ${facts.lastSeq} (${String(event.reason)}): start a new session`,
        ),
      };
    case "error": {
      const error = DuplexProtocolError.of(event);
      if (!facts.resuming || RETRYABLE_RESUME_ERRORS.includes(error.code)) return null;
      return {
        kind: "refuse",
        error: new DuplexSessionClosedError(error.code, `the server refused to resume the session: ${error.message}`, {
          cause: error,
        }),
      };
    }
    default:
      return null;
  }
};

/** What a dropped connection does to the link: end it with `end`, or resume with `policy`. */
export type DropOutcome =
  | { readonly kind: "end"; readonly end: ClientEnd }
  | { readonly kind: "resume"; readonly policy: ReconnectPolicy };

/**
 * What a connection closed with `code` and `reason` does to a link in `phase` (not `closed`) with `policy` (null:
 * no automatic resume) and resume `token`: a close while closing ends it with null; one before the session opened,
 * one with a code outside RESUMABLE_CLOSE_CODES, or any without a policy ends it with `connection_lost`; a session
 * without a resume token ends with `unsupported_session_resume`; any other is resumed.
 */
export const dropOutcome = (
  drop: { readonly code: number; readonly reason: string },
  phase: DuplexClientPhase,
  policy: ReconnectPolicy | null,
  token: string | null,
): DropOutcome => {
  const { code, reason } = drop;
  if (phase === "closing") return { kind: "end", end: null };
  if (phase === "connecting")
    return {
      kind: "end",
      end: new DuplexConnectionError(
        "connection_lost",
        `the connection closed before the session opened (${code} ${reason})`.trim(),
      ),
    };
  if (policy === null || !RESUMABLE_CLOSE_CODES.includes(code))
    return {
      kind: "end",
      end: new DuplexConnectionError(
        "connection_lost",
        `connection closed by the server (${code}${reason === "" ? "" : ` ${reason}`})`,
      ),
    };
  if (token === null)
    return {
      kind: "end",
      end: new DuplexSessionClosedError(
        "unsupported_session_resume",
        `the connection dropped (${code}) and the session cannot be resumed: it has no resume token`,
      ),
    };
  return { kind: "resume", policy };
};
