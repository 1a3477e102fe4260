import type { DuplexConnectionError, DuplexProtocolError, DuplexSessionClosedError } from "./errors.ts";
import type { ReconnectPolicy } from "./reconnect-policy.ts";
import type { Connect } from "./transport.ts";

/**
 * The vocabulary of a DuplexClient's connection (reference/realtime-duplex-api.md, "Using DuplexClient",
 * "Reconnect and resume"): its options, its phases, the notice of a resume, and how it ends.
 */

/** The type of the one notification a consumer gets for each automatic resume (not a server event: no seq). */
export const CONNECTION_RESUMED = "connection.resumed";

/**
 * Delivered in place of `session.resumed` after an automatic resume (reference/realtime-duplex-api.md, "Reconnect
 * and resume": ConnectionResumed): the events the client missed follow it, each once.
 */
export type ConnectionResumed = {
  readonly type: typeof CONNECTION_RESUMED;
  readonly session_id: string;
  readonly attachment_generation: number;
  /** What the client asked the replay to start after (the highest seq it had delivered). */
  readonly last_received_server_event_seq: number;
  /** Which reconnect attempt (from 1) succeeded. */
  readonly attempt: number;
  /** The close code of the dropped connection (1006: dropped without a close frame). */
  readonly close_code: number;
  /**
   * Why the server let go of the last socket, as `session.resumed` said (`disconnect`, `output_backpressure`: the
   * client read too slowly); absent when it did not say (a restart, a move, or a server without it).
   */
  readonly detach_reason?: string;
};

/** How a DuplexClient connects, resumes and keeps its connection alive. Times in ms. */
export interface ConnectionOptions {
  /** Headers of the upgrade request (e.g. `Authorization: Bearer KEY`); ignored when `connect` is given. */
  readonly headers?: Record<string, string>;
  /** The backoff of automatic resume; null: a drop ends the client with `connection_lost`. Default 5 attempts. */
  readonly reconnect?: ReconnectPolicy | null;
  /** Interval of `session.heartbeat`, ms; null: none. Default 30 000 (the reference's 30 s). */
  readonly heartbeatIntervalMs?: number | null;
  /** A heartbeat not answered within this long counts as a drop, ms. Default 10 000. */
  readonly heartbeatTimeoutMs?: number;
  /** Interval of `session.event_ack` of the highest seq delivered (sent only when it grew), ms; null: none. Default 2000. */
  readonly ackIntervalMs?: number | null;
  /** How long `session.created` / `session.updated` / `session.resumed` may take, ms. Default 10 000. */
  readonly handshakeTimeoutMs?: number;
  /** Bytes of client frames kept while reconnecting (sent after the resume); beyond: `send_queue_full`. 16 MiB. */
  readonly maxQueuedBytes?: number;
  /** The transport factory (default: `ws` with `headers`). */
  readonly connect?: Connect;
  /** Random numbers in [0, 1) for the backoff's jitter (default Math.random). */
  readonly random?: () => number;
}

/** `connecting` until the session is open; `reconnecting` between a drop and `session.resumed`. */
export type DuplexClientPhase = "connecting" | "open" | "reconnecting" | "closing" | "closed";

/** How a client ended: null after its own `close()`, else the error that says why. */
export type ClientEnd = DuplexSessionClosedError | DuplexConnectionError | DuplexProtocolError | null;
