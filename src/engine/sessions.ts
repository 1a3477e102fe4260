import type { AdmissionRefusal } from "./engine-api.ts";
import type { SessionHost } from "./session-host.ts";

/**
 * The session registry of one engine (issue 34, part 4): the live `SessionHost` of each session held on this node,
 * by session id, and admission (BEHAVIOUR.md, "Defaults and limits": `max_sessions`). A session its socket ended
 * (closed with 1000, or opened and unused) is no longer counted by admission, though its close is still being
 * logged: a client that closed may open its next session at once.
 */
export class SessionRegistry {
  readonly #hosts = new Map<string, SessionHost>();
  /** Sessions whose socket ended them: no longer counted by admission. */
  readonly #ending = new Set<string>();

  get(sessionId: string): SessionHost | undefined {
    return this.#hosts.get(sessionId);
  }

  has(sessionId: string): boolean {
    return this.#hosts.has(sessionId);
  }

  add(host: SessionHost): void {
    this.#hosts.set(host.sessionId, host);
  }

  /** Every host held, in the order they were added. */
  all(): SessionHost[] {
    return [...this.#hosts.values()];
  }

  /** The session's socket ended it: its slot is free at once. */
  ending(sessionId: string): void {
    this.#ending.add(sessionId);
  }

  /** The session closed: forgotten. */
  closed(sessionId: string): void {
    this.#hosts.delete(sessionId);
    this.#ending.delete(sessionId);
  }

  /** `host` was fenced (another node owns its session): forgotten, unless a newer host holds the id already. */
  fenced(host: SessionHost): void {
    if (this.#hosts.get(host.sessionId) === host) this.#hosts.delete(host.sessionId);
    this.#ending.delete(host.sessionId);
  }

  clear(): void {
    this.#hosts.clear();
  }

  /**
   * Whether one more session may open: `resource_exhausted` at `maxSessions` live sessions (neither closed nor
   * ending), else what `admit` says (the server's headroom), else null.
   */
  admission(maxSessions: number, admit?: () => AdmissionRefusal | null): AdmissionRefusal | null {
    const live = this.all().filter((h) => !h.isClosed && !this.#ending.has(h.sessionId)).length;
    return live >= maxSessions
      ? { code: "resource_exhausted", message: `session capacity reached (max_sessions=${maxSessions})` }
      : (admit?.() ?? null);
  }
}
