import { ERROR_CODES, type ErrorCode } from "../domain/index.ts";

/**
 * The body of an error before a session exists (BEHAVIOUR.md, "Errors", ours): the session envelope
 * `{type: "error", error: {type, code, message, event_id, param}}`, so OpenAI SDKs read `error.message` and
 * `error.code`, with `code` repeated at the top level, where the seed's flat shape (reference, "Handshake-stage
 * errors") put it. `eventId` is the client's event that failed, when the frame had one. The same body answers an
 * HTTP refusal of the upgrade (401, 403, 429).
 */
export const handshakeErrorBody = (
  code: ErrorCode,
  message: string,
  eventId: string | null = null,
): Record<string, unknown> => ({
  type: "error",
  code,
  error: { type: ERROR_CODES[code].type, code, message, event_id: eventId, param: null },
});

/** {@link handshakeErrorBody} as the JSON text of a WebSocket frame. */
export const handshakeError = (code: ErrorCode, message: string, eventId: string | null = null): string =>
  JSON.stringify(handshakeErrorBody(code, message, eventId));

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
