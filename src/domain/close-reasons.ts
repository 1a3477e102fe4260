/**
 * Why a session ended (`SessionClosed.reason`, src/domain/events.ts): the client closed it (`session_close`, or
 * `client_closed`: its socket closed with 1000), or a lease ran out (idle TTL, disconnect grace, maximum lifetime;
 * rendered as `session.expired`), or its runner cannot resume and the socket dropped (`disconnect`), or its runner
 * failed (`runner_failed`), or the model server refused it at its capacity (`model_busy`), or the session opened on
 * connect was never used (`unused`), or the server ran short of disk for its log (`resource_exhausted`).
 */
export type CloseReason =
  | "session_close"
  | "client_closed"
  | "idle_ttl_expired"
  | "disconnect_grace_expired"
  | "max_lifetime_expired"
  | "disconnect"
  | "runner_failed"
  | "model_busy"
  | "unused"
  | "resource_exhausted";

/**
 * True for the reasons of a lease timer (idle TTL, disconnect grace, maximum lifetime): the client is told with
 * `session.expired{reason}` rather than `session.closed`.
 */
export const isExpiry = (reason: CloseReason): boolean =>
  reason === "idle_ttl_expired" || reason === "disconnect_grace_expired" || reason === "max_lifetime_expired";
