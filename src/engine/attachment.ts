import type { CloseReason } from "../domain/index.ts";
import type { WireEvent } from "../projections/index.ts";
import { REDACTED_RESUME_TOKEN } from "../protocol/index.ts";

/**
 * Where a session's server events go (DESIGN.md, "The session host"): the socket that holds the session now. A
 * socket's sink, as the server implements it.
 */
export interface SessionSink {
  /** `replayed`: a missed event re-sent after `session.resumed` (a socket's output limit counts live events only). */
  send(json: string, replayed?: boolean): void;
  replaced(attachmentGeneration: number): void;
  /**
   * `reason`: why the session closed (`runner_failed` closes the socket with 1011, `resource_exhausted` with 1013).
   */
  ended(lastType: string, reason: CloseReason | null): void;
  /**
   * The session's log could not be appended to (disk full, store closed, I/O error: `runtime_append_failed`) or read
   * (a resume's replay: `internal_error`): nothing after the last durable event was sent; the socket is let go of
   * (the coded error, then it closes). The session waits for a resume, which rebuilds it from its log.
   */
  failed(code: "runtime_append_failed" | "internal_error", message: string): void;
}

/** The redacted token as it sits in rendered JSON (a quoted string). */
const REDACTED_JSON = JSON.stringify(REDACTED_RESUME_TOKEN);

/**
 * A session's attachment (BEHAVIOUR.md, "Resume"): the socket that holds it (its sink), the plain resume token of
 * that socket (in memory only; the log keeps its SHA-256), the generation and token claimed so far (claimed at once,
 * so that of two concurrent resumes exactly one wins), the socket a claimed resume will switch to once its
 * `session.resumed` is appended, and since when no socket holds the session. It routes each published server event
 * to the sink, writing the plain token into `session.created` and `session.resumed`.
 */
export class Attachment {
  private sink: SessionSink | null = null;
  /** The socket a claimed resume switches to, and the missed events it gets after `session.resumed`. */
  private pending: { sink: SessionSink; replay: WireEvent[] } | null = null;
  /** When the last socket let go of the session (ms, engine clock); null while one holds it. */
  private detached: number | null = null;

  constructor(
    private token: string | null,
    private claimedGeneration: number,
    /** Null until the first claim of a new session, whose token hash is then the logged one. */
    private claimedTokenSha256: string | null,
  ) {}

  get generation(): number {
    return this.claimedGeneration;
  }

  get tokenSha256Claimed(): string | null {
    return this.claimedTokenSha256;
  }

  get detachedAt(): number | null {
    return this.detached;
  }

  /** Whether a socket holds the session (its server events have somewhere to go). */
  get held(): boolean {
    return this.sink !== null;
  }

  markDetached(at: number): void {
    this.detached = at;
  }

  attach(sink: SessionSink): void {
    this.sink = sink;
  }

  /** Unbinds `sink` if it is still the current one (a superseded socket's drop changes nothing). */
  release(sink: SessionSink, at: number): boolean {
    if (this.sink !== sink) return false;
    this.sink = null;
    this.detached = at;
    return true;
  }

  /** Whether `tokenSha256` is the current token's digest (the claimed one, else `logged`); `equal` is constant-time. */
  holds(tokenSha256: string, logged: string | null, equal: (a: string, b: string) => boolean): boolean {
    const current = this.claimedTokenSha256 ?? logged;
    return current !== null && equal(tokenSha256, current);
  }

  /** Rotates the token at once for a resume that matched: returns the new generation. */
  claim(newToken: string, newTokenSha256: string): number {
    this.claimedGeneration += 1;
    this.claimedTokenSha256 = newTokenSha256;
    this.token = newToken;
    this.detached = null;
    return this.claimedGeneration;
  }

  /** The socket a claimed resume switches to once its `session.resumed` is published, with what it missed. */
  switchTo(sink: SessionSink, replay: WireEvent[]): void {
    this.pending = { sink, replay };
  }

  /** Forgets a switch that was published (or failed) with its drain. */
  switched(): void {
    this.pending = null;
  }

  /** Sends one appended server event; a `session.resumed` switches sockets here, in stream order. */
  publish(event: WireEvent, generation: number): void {
    const token = this.token === null ? "null" : JSON.stringify(this.token);
    if (event.type === "session.resumed" && this.pending !== null) {
      const { sink, replay } = this.pending;
      this.sink?.replaced(generation - 1);
      this.sink = sink;
      sink.send(event.json.replace(REDACTED_JSON, token));
      // Tokens inside replayed events were rotated away since: they go out as null.
      for (const missed of replay) sink.send(missed.json.replace(REDACTED_JSON, "null"), true);
      return;
    }
    this.sink?.send(event.type === "session.created" ? event.json.replace(REDACTED_JSON, token) : event.json);
  }

  /** The session ended: its socket is told why, and let go of. */
  ended(lastType: string, reason: CloseReason | null): void {
    this.sink?.ended(lastType, reason);
    this.sink = null;
  }

  /**
   * Another node's socket resumed the session (issue 33, part 2): every socket here (the holder and one switching to
   * it) gets `session.replaced` with `generation` (the one the log gave the holder) and is let go of; the session
   * counts as detached here from `at` (ms, engine clock).
   */
  replacedElsewhere(generation: number, at: number): void {
    const sinks = new Set([this.sink, this.pending?.sink]);
    this.sink = null;
    this.detached = at;
    this.pending = null;
    for (const sink of sinks) sink?.replaced(generation);
  }

  /**
   * The log failed: every socket (the holder and one switching to it) is let go of with the coded error, the claims
   * fall back to the logged generation, and the session counts as detached from `at`.
   */
  fail(code: "runtime_append_failed" | "internal_error", message: string, loggedGeneration: number, at: number): void {
    this.claimedGeneration = loggedGeneration;
    this.claimedTokenSha256 = null;
    const sinks = new Set([this.sink, this.pending?.sink]);
    this.sink = null;
    this.detached = at;
    this.pending = null;
    for (const sink of sinks) sink?.failed(code, message);
  }
}
