import { ERROR_CODES, type ErrorCode } from "../domain/index.ts";

/**
 * Errors before a session exists use the flat native shape `{type: "error", error: "message", code}`
 * (BEHAVIOUR.md, "Errors"; reference, "Handshake-stage errors"), plus the client's `event_id` when the frame had one.
 */
export const handshakeError = (code: ErrorCode, message: string, eventId: string | null = null): string =>
  JSON.stringify(
    eventId === null
      ? { type: "error", error: message, code }
      : { type: "error", error: message, code, event_id: eventId },
  );

/**
 * An error about a session this socket opened on connect that is not in its log (the first message timeout): the
 * session envelope of BEHAVIOUR.md, "Errors", without `server_event_seq`.
 */
export const sessionError = (code: ErrorCode, message: string): string =>
  JSON.stringify({
    type: "error",
    error: { type: ERROR_CODES[code].type, code, message, event_id: null, param: null },
  });

/**
 * `session.replaced`, sent to a superseded socket before it is closed (reference, "Session lifecycle"). Not part of
 * the session's sequenced stream: it concerns only the socket that receives it.
 */
export const sessionReplaced = (sessionId: string, attachmentGeneration: number): string =>
  JSON.stringify({ type: "session.replaced", session_id: sessionId, attachment_generation: attachmentGeneration });

/** `session.resync_required`: replay from the requested seq is impossible; the client must start a new session. */
export const resyncRequired = (sessionId: string, reason: "journal_gap" | "journal_overflow"): string =>
  JSON.stringify({ type: "session.resync_required", session_id: sessionId, reason });
