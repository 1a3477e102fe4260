import type { SessionState } from "../domain/index.ts";
import type { WireEvent, WireState } from "../projections/index.ts";
import { Attachment, type SessionSink } from "./attachment.ts";
import { addToJournal, measure } from "./session-host-parts.ts";

/**
 * A session as its sockets see it, the side of the session host (src/engine/session-host.ts) that the engine's
 * connections and resumes use: which socket holds it (`Attachment`), its resume token and the claims of resumes, the
 * server events published to the holder, and the resume journal's sizes. The host, the single writer, supplies the
 * state and wire projection after its last commit and the engine clock (`now`, ms since the Unix epoch).
 */
export abstract class SessionSockets {
  /** The socket that holds the session, its resume token and the claims of resumes (engine/attachment.ts). */
  protected readonly attachment: Attachment;
  /** `journal[seq]`: bytes of JSON text of the server events 1..seq; only with `measureJournal`. */
  private journal: number[] | null;

  /** The state after the last commit. */
  protected abstract get state(): SessionState;
  /** The wire projection after the last commit. */
  protected abstract get wire(): WireState;

  /**
   * `recovered`: the logged state and replay of a session rebuilt from its log (null: a new session);
   * `measureJournal`: keep the size of every server event sent (`resume_replay_max_bytes`).
   */
  protected constructor(
    resumeToken: string | null,
    recovered: { readonly state: SessionState; readonly replay?: readonly WireEvent[] } | null,
    measureJournal: boolean,
    private readonly clock: () => number,
  ) {
    this.attachment = new Attachment(
      resumeToken,
      recovered?.state.attachmentGeneration ?? 1,
      recovered?.state.resumeTokenSha256 ?? null,
    );
    this.journal = measureJournal ? measure(recovered?.replay ?? []) : null;
  }

  get isClosed(): boolean {
    return this.state.phase === "closed";
  }

  /** The last `server_event_seq` published. */
  get headSeq(): number {
    return this.wire.seq;
  }

  /** When the last socket let go of the session (ms since the Unix epoch, engine clock); null while one holds it. */
  get detachedAt(): number | null {
    return this.attachment.detachedAt;
  }

  /** A session rebuilt after a restart counts as detached since its last logged input (ms, engine clock). */
  markDetached(at: number): void {
    this.attachment.markDetached(at);
  }

  /** The generation of the socket that holds (or is about to hold) the session. */
  get generation(): number {
    return this.attachment.generation;
  }

  /** Binds the socket that opened the session. */
  attach(sink: SessionSink): void {
    this.attachment.attach(sink);
  }

  /** Unbinds `sink` if it is still the current one (a superseded socket's drop changes nothing). */
  release(sink: SessionSink): boolean {
    return this.attachment.release(sink, this.clock());
  }

  /** Whether `tokenSha256` (hex) is the current token's digest, without claiming anything; `equal` is constant-time. */
  holdsToken(tokenSha256: string, equal: (a: string, b: string) => boolean): boolean {
    return !this.isClosed && this.attachment.holds(tokenSha256, this.state.resumeTokenSha256, equal);
  }

  /**
   * Checks a resume token against the current one and, when it matches, rotates it at once: of two concurrent
   * resumes with the same token exactly one wins (BEHAVIOUR.md, "Resume"). Returns the new generation, or null.
   * `tokenSha256` and `newTokenSha256` are hex SHA-256 digests; `equal` compares in constant time.
   */
  claim(
    tokenSha256: string,
    newToken: string,
    newTokenSha256: string,
    equal: (a: string, b: string) => boolean,
  ): number | null {
    if (!this.holdsToken(tokenSha256, equal)) return null;
    return this.attachment.claim(newToken, newTokenSha256);
  }

  /** Bytes of JSON text of the server events after `seq` up to the head (0 when not measured). */
  journalBytesAfter(seq: number): number {
    const journal = this.journal;
    if (journal === null) return 0;
    return (journal[this.wire.seq] ?? 0) - (journal[Math.max(0, seq)] ?? 0);
  }

  /**
   * After the host gave the session up (`yieldTo`): another node's socket resumed it, so every socket here gets
   * `session.replaced` (with the generation the log gave the one that held it) and is closed (BEHAVIOUR.md, "Moves
   * lose nothing").
   */
  replaced(): void {
    this.attachment.replacedElsewhere(this.state.attachmentGeneration, this.clock());
  }

  /**
   * After the host gave the session up (`yieldTo`): the session moved without a resume (a node that took it while
   * this one's lease had run out): every socket here gets `runtime_append_failed` with `message`, and resumes through
   * its proxy.
   */
  letGo(message: string): void {
    this.attachment.fail("runtime_append_failed", message, this.state.attachmentGeneration, this.clock());
  }

  /** Sends one appended server event to the socket; a resume switches sockets here, in stream order. */
  protected publish(event: WireEvent): void {
    if (this.journal !== null) addToJournal(this.journal, event);
    this.attachment.publish(event, this.state.attachmentGeneration);
  }

  /** The journal's sizes again, from a replay of the whole log (after it was read again). */
  protected remeasure(replay: readonly WireEvent[]): void {
    if (this.journal !== null) this.journal = measure(replay);
  }
}
