/**
 * The errors of the project's client (reference/realtime-duplex-api.md, "Using DuplexClient", "Errors"): a server
 * error event is a `DuplexProtocolError`, a transport failure a `DuplexConnectionError`, a session that ended while
 * it was awaited a `DuplexSessionClosedError`. All three derive from `DuplexClientError` and carry a `code` and,
 * where one exists, the `cause`.
 */
export class DuplexClientError extends Error {
  /** A stable code: the server's error code, or one of the client's own (`reconnect_failed`, ...). */
  readonly code: string;
  constructor(code: string, message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "DuplexClientError";
    this.code = code;
  }
}

/**
 * The server answered with an `error` event: `code` is its error code (BEHAVIOUR.md, "Errors"), `eventId` the
 * client event it refers to (null when none). Both envelopes are read: the session one
 * `{type: "error", error: {type, code, message, event_id, param}}` and the flat handshake one
 * `{type: "error", error: "message", code}`.
 */
export class DuplexProtocolError extends DuplexClientError {
  readonly eventId: string | null;
  constructor(code: string, message: string, eventId: string | null) {
    super(code, message);
    this.name = "DuplexProtocolError";
    this.eventId = eventId;
  }

  /** The error of a server `error` event (either envelope). */
  static of(event: { readonly type: string } & Readonly<Record<string, unknown>>): DuplexProtocolError {
    const e = event.error;
    if (typeof e === "object" && e !== null) {
      const body = e as { code?: unknown; message?: unknown; event_id?: unknown };
      const code = String(body.code ?? "error");
      return new DuplexProtocolError(code, `${code}: ${String(body.message ?? "")}`, errorEventId(event));
    }
    const code = String(event.code ?? "error");
    return new DuplexProtocolError(code, `${code}: ${String(e ?? "")}`, errorEventId(event));
  }
}

/**
 * The connection could not be made or was lost for good. `code`: `connect_failed` (the first connection; the
 * message is one line that says what to do, from `explainConnectError`), `reconnect_failed` (every attempt of the
 * ReconnectPolicy failed), `connection_lost` (dropped with no reconnect policy, or while a call awaited it),
 * `handshake_timeout`. `cause`: the last transport error.
 */
export class DuplexConnectionError extends DuplexClientError {
  constructor(code: string, message: string, options: { cause?: unknown } = {}) {
    super(code, message, options);
    this.name = "DuplexConnectionError";
  }
}

/**
 * The session is over for this client. `code` says why: `session_closed` (session.closed), `session_expired`
 * (session.expired), `session_replaced` (another socket resumed it), `resync_required` (session.resync_required: the
 * server cannot replay what the client missed; start a new session), or the server's refusal of a resume
 * (`session_resume_expired`, `invalid_resume_token`, `unsupported_session_resume`), or `client_closed`.
 */
export class DuplexSessionClosedError extends DuplexClientError {
  constructor(code: string, message: string, options: { cause?: unknown } = {}) {
    super(code, message, options);
    this.name = "DuplexSessionClosedError";
  }
}

/** The client `event_id` a server `error` event refers to (either envelope); null when none. */
export const errorEventId = (event: Readonly<Record<string, unknown>>): string | null => {
  const error = event.error;
  const id = typeof error === "object" && error !== null ? (error as { event_id?: unknown }).event_id : event.event_id;
  return typeof id === "string" ? id : null;
};
