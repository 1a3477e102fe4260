import type { ClientEnd } from "./connection-types.ts";
import { DuplexConnectionError, type DuplexSessionClosedError } from "./errors.ts";
import { type ReconnectPolicy, reconnectDelayMs } from "./reconnect-policy.ts";
import type { Transport } from "./transport.ts";

/**
 * The reconnect loop of a ResumableConnection (reference/realtime-duplex-api.md, "Reconnect and resume"): after a
 * resumable drop, up to `policy.attempts` connections to the resume URL (`?autostart=0`), each after the policy's
 * backoff, each sending `session.resume`; the loop ends at the first resume (`session.resumed`), at a refusal, when
 * its owner stopped reconnecting (closed), or after the last attempt with `reconnect_failed`.
 */

/** How one resume attempt ended: resumed, refused by the server (the link ends), or its connection dropped. */
export type Resume =
  | { kind: "resumed" }
  | { kind: "refused"; error: DuplexSessionClosedError }
  | { kind: "dropped"; code: number };

/** Resolves after `ms`, or as soon as `signal.wake` is called (the link ended). */
export const later = (ms: number, signal: { wake?: () => void }): Promise<void> =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.wake = () => {
      clearTimeout(timer);
      resolve();
    };
  });

/** The `session.resume` client event of attempt `attempt` of resume `resume` (1-based), as sent. */
export const resumeRequest = (
  session: { readonly id: string | null; readonly token: string | null },
  lastSeq: number,
  ids: { readonly resume: number; readonly attempt: number },
): string =>
  JSON.stringify({
    type: "session.resume",
    event_id: `evt_client_resume_${ids.resume}_${ids.attempt}`,
    session_id: session.id,
    resume_token: session.token,
    last_received_server_event_seq: lastSeq,
  });

/** What the loop drives: the link it reconnects. */
export interface Reconnecting {
  /** The resume URL (the session's URL with `autostart=0`). */
  readonly url: string;
  readonly policy: ReconnectPolicy;
  /** Random numbers in [0, 1) for the backoff's jitter (default Math.random). */
  readonly random?: () => number;
  /** Wakes the loop's wait when the link ends. */
  readonly wake: { wake?: () => void };
  /** The session, for the message of `reconnect_failed`. */
  sessionId(): string | null;
  /** Whether the link still reconnects (its owner may have closed it during a wait). */
  still(): boolean;
  connect(url: string): Promise<Transport>;
  /** Attaches `transport`, sends `session.resume` for `attempt` (1-based), resolves with how it ended. */
  resume(transport: Transport, attempt: number): Promise<Resume>;
  /** Ends the link: a refusal's error, or `reconnect_failed` after the last attempt. */
  end(end: ClientEnd): void;
}

/** Runs the attempts of `link` until one resumes, one is refused, the link stops reconnecting, or none is left. */
export const reconnectLoop = async (link: Reconnecting): Promise<void> => {
  const { policy } = link;
  let last: unknown = null;
  for (let attempt = 1; attempt <= policy.attempts; attempt += 1) {
    await later(reconnectDelayMs(policy, attempt, link.random), link.wake);
    if (!link.still()) return;
    let transport: Transport;
    try {
      transport = await link.connect(link.url);
    } catch (error) {
      last = error;
      continue;
    }
    if (!link.still()) {
      transport.close();
      return;
    }
    const result = await link.resume(transport, attempt);
    if (result.kind === "resumed") return;
    if (result.kind === "refused") {
      link.end(result.error);
      return;
    }
    last = new Error(`the connection closed during the resume (${result.code})`);
  }
  const why = last instanceof Error ? last.message : String(last);
  link.end(
    new DuplexConnectionError(
      "reconnect_failed",
      `could not resume session ${link.sessionId()} in ${policy.attempts} attempts; last: ${why}`,
      { cause: last },
    ),
  );
};
