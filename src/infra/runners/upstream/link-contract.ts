/**
 * The upstream link's contract (link.ts): what it needs, what it tells the runner, and what the duplex dialect's
 * revisions say that the link acts on.
 */
import type { StageLossCode } from "../../../domain/index.ts";
import type { ResumePolicy } from "./resume-policy.ts";
import type { Json } from "./wire-json.ts";

/** What the link needs to reach the upstream. Times in ms. */
export interface LinkOptions {
  readonly url: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly ca?: string | Buffer;
  readonly connectTimeoutMs: number;
  readonly dialect: "duplex" | "openai";
  /** How often a duplex session is sent `session.heartbeat` when nothing else is outstanding. */
  readonly heartbeatMs: number;
  readonly resume: ResumePolicy;
}

/** What the link tells the runner. */
export interface LinkHandlers {
  /** An upstream event after the handshake, in order, each `server_event_seq` once. */
  event(event: Json): void;
  /**
   * The upstream session is ready: `created` (a new one: nothing was sent to it yet but `opening`), or `resumed`
   * after a drop, once everything it had not confirmed was sent again.
   */
  ready(
    how: "created" | "resumed",
    session: { readonly id: string; readonly tokenSha256: string | null; readonly revision: DuplexRevision | null },
  ): void;
  /** The upstream is gone for this session; nothing is sent or received after it. */
  lost(code: StageLossCode, message: string): void;
  /** A resume try failed and another is due in `delayMs` (for the server's log). */
  retrying?(attempt: number, delayMs: number, why: string): void;
}

/** One upstream session over one WebSocket at a time. */
export interface UpstreamLink {
  /** Sends `event` now when the upstream session is ready, else once it is (in order). */
  send(event: Json): void;
  /** Ends the upstream session (`session.close`, then close 1000); nothing is reported after it. */
  close(): void;
}

/**
 * Which revision of the duplex dialect the model server speaks, told apart by its `session.created`: `incarnation`
 * (reference/realtime-duplex-api.md as copied here: `incarnation` beside the resume token, sent back on
 * `session.resume`) or `server_ids` (vLLM-Omni's newest, 09c32f18: the server allocates every session id and there is
 * no incarnation counter; it also sends `turn.event` and ends sessions with `client_close`, `disconnect`, `timeout`,
 * `transport_error` or `shutdown`). Null for an OpenAI server.
 */
export type DuplexRevision = "incarnation" | "server_ids";

/**
 * `session.closed` reasons (newest revision) that say the model server lost our attachment, not the session: the
 * link resumes it as after a drop. Every other reason while the link is open ends the stage.
 */
export const ATTACHMENT_LOST = new Set(["disconnect", "transport_error"]);
