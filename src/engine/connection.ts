import { ERROR_CODES, type ErrorCode } from "../domain/index.ts";
import {
  type DecodedFrame,
  handshakeError,
  type PeekedFrame,
  resyncRequired,
  sessionError,
  sessionReplaced,
} from "../protocol/index.ts";
import type { SessionSink } from "./attachment.ts";
import {
  type ConnectionOptions,
  type ConnectionPort,
  type ConnectionState,
  closeOfEnd,
  costOf,
  decodeWith,
  FIRST_MESSAGE_TIMEOUT_MS,
  logWhenCreated,
  type OutputOverflow,
  refAudioRefusal,
} from "./connection-parts.ts";
import { droppedWhileAdopting, type ResumeFrame, Takeover } from "./connection-takeover.ts";
import type { AdmissionRefusal, Engine } from "./engine-api.ts";
import type { EngineLog } from "./lifecycle-log.ts";
import type { SessionHost } from "./session-host.ts";
import { realScheduler, type Scheduler } from "./timers.ts";

/**
 * One realtime client's connection rules (issue 34, part 3): handshake phases, the session opened on connect, resume
 * versus open, the first-message timer, the takeover queue (connection-takeover.ts). Driven by `connected()`,
 * `receive(frame)`, `overflowed(output)` and `closed(code)`, writing to a `ConnectionPort` (the socket writer,
 * src/server/realtime/; a recording port in test/engine/connection.test.ts). The first valid client event either opens a session (admission may refuse it: flat
 * `resource_exhausted`, then the connection closes) or, when it is `session.resume`, re-attaches a live one. Every
 * later frame is decoded in the session's mailbox; server events arrive through `sink` only after they are
 * appended. A connection that closes without `session.close` detaches its session; one superseded by a resume gets
 * `session.replaced` and is closed, its later input ignored. After `session.expired` it stays open and further
 * frames are answered with `unknown_session` (BEHAVIOUR.md scenario 13).
 */
export class Connection {
  /** The session's sink: what the engine sends this connection. */
  readonly sink: SessionSink;
  #host: SessionHost | null = null;
  #state: ConnectionState = "new";
  /** False while the session this connection opened on connect has received nothing from the client. */
  #used = true;
  /** Admission refused the session on connect: the first frame may still resume one, or is refused. */
  #refused: AdmissionRefusal | null = null;
  /** The connection has been sent its first event (the session.created of the session opened on connect). */
  #delivered = false;
  /** The first-message timeout passed before that: config_timeout waits for it, so it never comes first. */
  #timedOutBeforeCreated = false;
  readonly #firstMessage: unknown;
  readonly #firstMessageMs: number;
  readonly #scheduler: Scheduler;
  readonly #defer: (fn: () => void) => void;
  readonly #takeover: Takeover;

  constructor(
    readonly engine: Engine,
    readonly port: ConnectionPort,
    readonly log: EngineLog,
    readonly options: ConnectionOptions = {},
  ) {
    this.#scheduler = options.scheduler ?? realScheduler;
    this.#defer = options.defer ?? setImmediate;
    this.#firstMessageMs = options.firstMessageTimeoutMs ?? FIRST_MESSAGE_TIMEOUT_MS;
    this.#firstMessage = this.#scheduler.setTimeout(() => this.#timeOut(), this.#firstMessageMs);
    this.#takeover = new Takeover(engine, log, this.#scheduler, this.#firstMessageMs, {
      resumeHeld: (frame) => this.#resumeHeld(frame),
      refuse: (code, message, eventId, sessionId) => this.#refuse(code, message, eventId, sessionId),
      handle: (frame) => void this.#handle(frame),
      timedOut: () => this.#timeOut(),
      gaveUp: () => this.#giveUp(),
      isOpen: () => port.isOpen(),
    });
    this.sink = {
      send: (json, replayed = false) => this.#deliver(json, replayed),
      replaced: (generation) => this.#replaced(generation),
      failed: (code, message) => this.#failed(code, message),
      ended: (lastType, reason) => this.#ended(lastType, reason),
    };
  }

  get state(): ConnectionState {
    return this.#state;
  }

  /** The session that holds this connection, if any. */
  get host(): SessionHost | null {
    return this.#host;
  }

  /**
   * The client is connected and its upgrade answered: a session opens with the deployment's defaults and
   * session.created is sent at once, as OpenAI's servers do (BEHAVIOUR.md, "Identity", ours), unless the profile
   * needs ref_audio first or the connection is resume-only (autostart=0): then the first client event is the
   * handshake. At capacity a first `session.resume` may still take its detached session back; anything else is
   * refused when it arrives (or at the first-message timeout).
   */
  connected(): void {
    if (this.engine.capabilities.refAudio === "required" || this.options.query?.autostart === false) return;
    // A first client event that came first opened (or resumed) the connection's session already.
    if (this.#state !== "new" || !this.port.isOpen()) return;
    this.#refused = this.engine.admission();
    if (this.#refused !== null) return;
    const opened = this.#open(null);
    if (opened === null) return;
    this.#used = false;
    this.#bind(opened);
  }

  /**
   * A client frame, as peeked. Resolves once the session has decided it (at once for a frame that reaches no
   * session: refused, ignored, or queued behind a takeover).
   */
  receive(frame: PeekedFrame): Promise<void> {
    if (!this.#takeover.active) return this.#handle(frame);
    if (!this.#takeover.hold(frame)) this.port.send(droppedWhileAdopting(frame.eventId()));
    return Promise.resolve();
  }

  /**
   * The connection closed (`code`, `reason`: the WebSocket close). While bound, this server closes the socket only at
   * shutdown (1012): a 1000 is the client's own close, the end a stock OpenAI client means (BEHAVIOUR.md, "Resume",
   * ours), and closes the session. Every other end detaches it; a session opened on connect and unused closes.
   */
  closed(code: number, reason: string): void {
    this.#scheduler.clearTimeout(this.#firstMessage);
    const current = this.#host;
    if (current === null || this.#state !== "bound" || current.isClosed) return;
    if (!this.#used) {
      // Nothing of the client reached it: there is nothing to resume.
      this.log.info({ sessionId: current.sessionId }, "session closed unused: the socket closed first");
      this.engine.abandon(current, this.sink);
      return;
    }
    if (code === 1000) {
      this.engine.closedByClient(current, this.sink);
      return;
    }
    this.log.info(
      { sessionId: current.sessionId, closeCode: code, closeReason: reason },
      code === 1006 ? "socket dropped; session detached" : "socket closed; session detached",
    );
    this.engine.detach(current, this.sink);
  }

  /**
   * A reader slower than the session's output (BEHAVIOUR.md, "Defaults and limits", ours): the connection is
   * detached as after a drop, so the session goes on within the disconnect grace and a resume replays what the
   * reader missed. The error and the closing frame go out beyond the limit (its reserve).
   */
  overflowed(output: OutputOverflow): void {
    const current = this.#host;
    if (current === null || this.#state !== "bound") return;
    this.#state = "detached";
    this.log.info(
      {
        sessionId: current.sessionId,
        code: "output_backpressure",
        unsentBytes: output.unsentBytes,
        unsentEvents: output.unsentEvents,
      },
      "socket detached: the client reads too slowly",
    );
    this.engine.detach(current, this.sink, "output_backpressure");
    this.port.send(
      sessionError(
        "output_backpressure",
        `more than ${output.maxBytes} bytes or ${output.maxEvents} events of output are waiting for this client; resume the session to receive what was missed`,
      ),
    );
    this.port.close(ERROR_CODES.output_backpressure.closeCode, "output_backpressure");
  }

  /** A frame in the connection's current state: the handshake, the session's mailbox, or an answer of its end. */
  #handle(frame: PeekedFrame): Promise<void> {
    const decode = decodeWith(frame);
    const host = this.#host;
    switch (this.#state) {
      case "new":
        this.#handshake(decode(null));
        return Promise.resolve();
      case "bound":
        if (host === null) return Promise.resolve();
        if (!this.#used) {
          // The first client event may resume another session instead of using the one opened on connect; after a
          // refused resume the session stays unused, and the client may try again.
          if (frame.kind === "resume") {
            const decoded = decode(null);
            if (decoded.type === "session.resume" || decoded.type === "invalid") {
              this.#handshake(decoded);
              return Promise.resolve();
            }
          }
          this.#used = true;
          this.#scheduler.clearTimeout(this.#firstMessage);
        }
        this.engine.touch(host);
        return host.submit(decode, costOf(frame));
      case "expired":
        this.port.send(
          handshakeError("unknown_session", `session ${host?.sessionId ?? ""} has expired`, frame.eventId()),
        );
        return Promise.resolve();
      case "replaced":
      case "closed":
      case "detached":
        return Promise.resolve();
      default: {
        const unhandled: never = this.#state;
        throw new Error(`unhandled connection state ${String(unhandled)}`);
      }
    }
  }

  /** The first client event of a connection no session holds (or that may resume another): open or resume. */
  #handshake(frame: DecodedFrame): void {
    if (frame.type === "invalid") {
      const code =
        frame.eventType === "session.resume" && frame.code === "bad_event" ? "invalid_session_resume" : frame.code;
      this.#refuse(code, frame.message, frame.eventId);
      return;
    }
    if (frame.type === "session.resume") {
      this.#resume(frame);
      return;
    }
    const refusal = refAudioRefusal(this.engine, frame);
    if (refusal !== null) {
      this.#refuse(refusal.code, refusal.message, frame.eventId);
      return;
    }
    if (this.options.query?.autostart === false) {
      this.#refuse(
        "invalid_session_resume",
        "this connection was opened with autostart=0: send session.resume first",
        frame.eventId,
      );
      return;
    }
    const opened = this.#open(frame.eventId);
    if (opened === null) return;
    this.#bind(opened);
    this.engine.touch(opened);
    void opened.submit(frame);
  }

  /** Refuses a handshake (no session holds this connection yet): logs who and why, and tells the client. */
  #refuse(code: ErrorCode, message: string, eventId: string | null, sessionId: string | null = null): void {
    this.log.info({ code, sessionId, address: this.options.remote?.address ?? null }, "handshake refused");
    this.port.send(handshakeError(code, message, eventId));
  }

  #bind(bound: SessionHost): void {
    this.#host = bound;
    this.#state = "bound";
    if (this.#used) this.#scheduler.clearTimeout(this.#firstMessage);
  }

  /** Opens a session for this connection; on a refusal (capacity), says so and closes it. */
  #open(eventId: string | null): SessionHost | null {
    const { query } = this.options;
    const opened = this.engine.open({
      ...(query?.model === undefined ? {} : { model: query.model }),
      ...(query?.nativeDuplex === undefined ? {} : { nativeDuplex: query.nativeDuplex }),
    });
    if ("code" in opened) {
      this.#refuse(opened.code, opened.message, eventId);
      this.port.close(ERROR_CODES.resource_exhausted.closeCode, opened.code);
      return null;
    }
    opened.attach(this.sink);
    logWhenCreated(this.log, opened, { ...this.options.remote, dialect: this.options.dialect ?? "ga" });
    return opened;
  }

  /**
   * `session.resume` of a session this node does not hold, with other nodes on the store (issue 22, part 4): the
   * session is taken over first (`engine.adopt`), then resumed as any other; the connection's later frames wait.
   */
  #resume(frame: ResumeFrame): void {
    const held = this.engine.get(frame.sessionId);
    if (this.engine.nodeId === null || (held !== undefined && !held.isFenced)) this.#resumeHeld(frame);
    else this.#takeover.start(frame);
  }

  /** `session.resume` as the first client event; a session opened on connect and unused is abandoned. */
  #resumeHeld(frame: ResumeFrame): void {
    const resumed = this.engine.resume(frame, this.sink);
    if ("code" in resumed) {
      if (resumed.code === "journal_gap" || resumed.code === "journal_overflow") {
        this.log.info(
          { sessionId: frame.sessionId, code: resumed.code, address: this.options.remote?.address ?? null },
          "resume refused",
        );
        this.port.send(resyncRequired(frame.sessionId, resumed.code));
      } else this.#refuse(resumed.code, resumed.message, frame.eventId, frame.sessionId);
      return;
    }
    if (this.#host !== null) {
      this.engine.abandon(this.#host, this.sink);
      this.log.info(
        { sessionId: this.#host.sessionId },
        "session opened on connect closed unused: the socket resumed another",
      );
    }
    this.#used = true;
    this.#scheduler.clearTimeout(this.#firstMessage);
    this.#bind(resumed);
    // At debug: the engine's "session resumed" line is the lifecycle event at info.
    this.log.debug(
      { sessionId: resumed.sessionId, generation: resumed.generation, address: this.options.remote?.address ?? null },
      "socket attached: resume",
    );
  }

  /** The first-message timeout passed (or a takeover that outlived it ended). */
  #timeOut(): void {
    // The client's first event did arrive (a session.resume): its answer waits for the takeover.
    if (this.#takeover.firstMessageTimedOut()) return;
    const host = this.#host;
    if (this.#state === "bound" && !this.#used && host !== null) {
      // Its session.created is not out yet (a slow store): the session exists, so the client hears of it first.
      if (!this.#delivered) {
        this.#timedOutBeforeCreated = true;
        return;
      }
      // A session opened on connect that heard nothing: it closes and holds no capacity.
      this.log.info({ sessionId: host.sessionId, code: "config_timeout" }, "session closed unused: no client event");
      this.port.send(sessionError("config_timeout", "no client event arrived within the first message timeout"));
      this.engine.abandon(host, this.sink);
      this.#state = "closed";
      this.port.close(ERROR_CODES.config_timeout.closeCode, "config_timeout");
      return;
    }
    if (this.#state !== "new") return;
    const code = this.#refused === null ? "config_timeout" : this.#refused.code;
    this.#refuse(code, this.#refused?.message ?? "no session.update arrived within the first message timeout", null);
    // Frames that cross the close open nothing.
    this.#state = "closed";
    this.port.close(ERROR_CODES[code].closeCode, code);
  }

  /** A takeover outlived its deadline: the client is told, and a session opened on connect and unused ends. */
  #giveUp(): void {
    this.log.error(
      { address: this.options.remote?.address ?? null },
      "takeover given up: the session log did not answer",
    );
    this.#refuse(
      "internal_error",
      "the session could not be taken over in time: its log did not answer; resume again",
      null,
    );
    if (this.#host !== null && !this.#used) this.engine.abandon(this.#host, this.sink);
    this.#state = "closed";
    this.port.close(ERROR_CODES.internal_error.closeCode, "internal_error");
  }

  /** A server event of the session, appended: to the port, unless the connection is gone or detached. */
  #deliver(json: string, replayed: boolean): void {
    if (!this.port.isOpen() || this.#state === "detached") return;
    if (!this.#delivered) {
      this.#delivered = true;
      if (this.#timedOutBeforeCreated) this.#defer(() => this.#timeOut());
    }
    this.port.write(json, replayed);
  }

  #replaced(generation: number): void {
    this.#state = "replaced";
    if (!this.port.isOpen()) return;
    this.port.send(sessionReplaced(this.#host?.sessionId ?? "", generation));
    this.port.close(1000, "session replaced");
  }

  /** The session's log failed: nothing after the last durable event went out; it waits, detached, for a resume. */
  #failed(code: "runtime_append_failed" | "internal_error", message: string): void {
    this.log.error({ sessionId: this.#host?.sessionId, code }, "socket let go: the session log failed");
    this.#state = "detached";
    if (!this.port.isOpen()) return;
    this.port.send(sessionError(code, message));
    this.port.close(ERROR_CODES[code].closeCode, code);
  }

  /** The session ended (the engine logs its end, src/engine/lifecycle-log.ts, connection or not). */
  #ended(lastType: string, reason: string | null): void {
    if (lastType === "session.expired") {
      this.#state = "expired";
      return;
    }
    this.#state = "closed";
    if (!this.port.isOpen()) return;
    const close = closeOfEnd(reason);
    this.port.close(close.code, close.reason);
  }
}
