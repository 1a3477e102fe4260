import type { ErrorCode } from "../domain/index.ts";
import { type DecodedFrame, handshakeError, type PeekedFrame } from "../protocol/index.ts";
import type { Engine } from "./engine-api.ts";
import type { EngineLog } from "./lifecycle-log.ts";
import type { Scheduler } from "./timers.ts";

/** A decoded `session.resume`. */
export type ResumeFrame = Extract<DecodedFrame, { type: "session.resume" }>;

/**
 * Frames a connection may send while its `session.resume` takes the session over from another node (20 s of 100 ms
 * appends); each one beyond is answered with `input_backpressure` and dropped.
 */
export const MAX_FRAMES_WHILE_ADOPTING = 200;

/** The answer to a frame dropped because `MAX_FRAMES_WHILE_ADOPTING` wait already (a handshake error). */
export const droppedWhileAdopting = (eventId: string | null): string =>
  handshakeError(
    "input_backpressure",
    `more than ${MAX_FRAMES_WHILE_ADOPTING} frames arrived while the resumed session was being taken over; this one was dropped`,
    eventId,
  );

/** What a takeover asks of its connection. */
export interface TakeoverHooks {
  /** The session is held here now: resume it as any other. */
  resumeHeld(frame: ResumeFrame): void;
  /** Refuse the resume (a handshake error; `sessionId` for the log). */
  refuse(code: ErrorCode, message: string, eventId: string | null, sessionId?: string | null): void;
  /** A frame that waited for the takeover, handled in arrival order once the resume is answered. */
  handle(frame: PeekedFrame): void;
  /** The first-message timeout passed during a takeover that then left the connection with nothing: time out now. */
  timedOut(): void;
  /** The takeover outlived its deadline: tell the client and let the connection go. */
  gaveUp(): void;
  /** The client is still connected. */
  isOpen(): boolean;
}

/**
 * The takeover queue of one connection (issue 22, part 4): a `session.resume` of a session another node holds takes
 * it over first (`engine.adopt`); the connection's later frames wait (up to `MAX_FRAMES_WHILE_ADOPTING`) and are
 * handled once the resume is answered. A store that does not answer within one more first-message timeout after
 * the first one passed lets the connection go; a takeover given up is told apart from a later one by a counter.
 */
export class Takeover {
  #waiting: PeekedFrame[] | null = null;
  /** Counts takeovers started (and given up): an answer for an earlier one is ignored. */
  #generation = 0;
  #deadline: unknown = null;
  /** The first-message timeout passed while this takeover was under way. */
  #timedOut = false;

  constructor(
    readonly engine: Engine,
    readonly log: EngineLog,
    readonly scheduler: Scheduler,
    /** The deadline after the first-message timeout (ms): that same timeout. */
    readonly deadlineMs: number,
    readonly hooks: TakeoverHooks,
  ) {}

  /** A takeover is under way: frames wait. */
  get active(): boolean {
    return this.#waiting !== null;
  }

  /** Queues a frame behind the takeover; false when the queue is full (the frame is dropped). */
  hold(frame: PeekedFrame): boolean {
    if (this.#waiting === null || this.#waiting.length >= MAX_FRAMES_WHILE_ADOPTING) return false;
    this.#waiting.push(frame);
    return true;
  }

  /**
   * The first-message timeout passed. During a takeover the resume's answer waits for it, not the clock, for one more
   * timeout (true: handled here); otherwise false, and the connection times out as it would.
   */
  firstMessageTimedOut(): boolean {
    if (this.#waiting === null) {
      this.#timedOut = false;
      return false;
    }
    this.#timedOut = true;
    this.#deadline ??= this.scheduler.setTimeout(() => this.#giveUp(), this.deadlineMs);
    return true;
  }

  /** Takes the session of `frame` over from the node that holds it, then resumes it (or refuses). */
  start(frame: ResumeFrame): void {
    this.#waiting = [];
    this.#generation += 1;
    const mine = this.#generation;
    void this.engine
      .adopt(frame.sessionId, frame.resumeToken)
      .then(
        (adopted) => this.#adopted(mine, frame, adopted),
        (error: unknown) => {
          if (mine !== this.#generation) return;
          this.#waiting = null;
          this.log.error(
            { err: error, sessionId: frame.sessionId },
            "takeover failed: the session log could not be read",
          );
          this.hooks.refuse(
            "internal_error",
            "the session could not be taken over: its log could not be read",
            frame.eventId,
          );
        },
      )
      .catch((error: unknown) => {
        this.log.error({ err: error, sessionId: frame.sessionId }, "a resume's takeover ended in an error");
      })
      .finally(() => {
        if (mine !== this.#generation) return;
        if (this.#deadline !== null) this.scheduler.clearTimeout(this.#deadline);
        this.#deadline = null;
        // A refused resume after the timeout leaves a connection with nothing: it ends as the timeout says.
        if (this.#waiting === null && this.#timedOut && this.hooks.isOpen()) this.hooks.timedOut();
      });
  }

  /** The takeover `mine` answered: resume the session now held here, then handle the frames that waited. */
  #adopted(mine: number, frame: ResumeFrame, adopted: Awaited<ReturnType<Engine["adopt"]>>): void {
    // Given up past its deadline: the session, taken over or not, waits detached for the client's next resume.
    if (mine !== this.#generation) return;
    const waiting = this.#waiting ?? [];
    this.#waiting = null;
    // The client went away meanwhile: the session taken over stays detached, its grace running.
    if (!this.hooks.isOpen()) return;
    // adopt refuses with session_resume_expired or invalid_resume_token only (never a journal code).
    if ("code" in adopted && (adopted.code === "session_resume_expired" || adopted.code === "invalid_resume_token"))
      this.hooks.refuse(adopted.code, adopted.message, frame.eventId, frame.sessionId);
    else this.hooks.resumeHeld(frame);
    for (const waited of waiting) this.hooks.handle(waited);
  }

  /** The takeover outlived its deadline: the connection is let go of, the frames that waited with it. */
  #giveUp(): void {
    if (this.#waiting === null) return;
    this.#waiting = null;
    this.#generation += 1;
    this.hooks.gaveUp();
  }
}
