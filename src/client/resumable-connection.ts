import { explainConnectError } from "./connect-error.ts";
import {
  type ClientEnd,
  CONNECTION_RESUMED,
  type ConnectionOptions,
  type ConnectionResumed,
  type DuplexClientPhase,
} from "./connection-types.ts";
import { DuplexConnectionError, DuplexProtocolError, DuplexSessionClosedError } from "./errors.ts";
import type { ServerEvent } from "./event-collector.ts";
import { createHeartbeats, type Heartbeats } from "./heartbeats.ts";
import { dropOutcome, serverEventEnd } from "./link-ends.ts";
import { type Resume, reconnectLoop, resumeRequest } from "./reconnect-loop.ts";
import { DEFAULT_RECONNECT_POLICY, type ReconnectPolicy } from "./reconnect-policy.ts";
import { createSendQueue, type SendQueue } from "./send-queue.ts";
import { type Connect, type Transport, wsConnect } from "./transport.ts";

/** What a ResumableConnection hands its owner: each event to deliver, once, in order; and its end, once. */
export interface ConnectionHooks {
  deliver(event: ServerEvent, at: number): void;
  ended(end: ClientEnd): void;
}

/**
 * The link of one DuplexClient to its session, across connections (reference/realtime-duplex-api.md, "Reconnect
 * and resume"; BEHAVIOUR.md, "Resume"). It keeps the session id and resume token (from `session.created`, rotated by
 * each `session.resumed`) and the highest `server_event_seq` delivered. On a close with a code of
 * RESUMABLE_CLOSE_CODES (a killed server: 1006; a restart: 1012; a slow reader: 1013), or a heartbeat without an
 * answer, it reconnects with the ReconnectPolicy's backoff to `?autostart=0` and sends
 * `session.resume{session_id, resume_token, last_received_server_event_seq}`. Events whose seq it has delivered are
 * dropped, so none is delivered twice; `session.resumed` is delivered as one ConnectionResumed. Frames sent while
 * reconnecting are sent after the resume (a frame sent just before a drop may be lost). `session.resync_required`,
 * a refused resume (`session_resume_expired`, `invalid_resume_token`, ...), `session.closed`, `session.expired` and
 * `session.replaced` end it with a DuplexSessionClosedError saying why. It also sends `session.heartbeat` and
 * `session.event_ack` (of the highest seq delivered) on their intervals.
 *
 * Its parts: the frames kept while reconnecting (send-queue.ts), when a server event or a drop ends the link
 * (link-ends.ts), the reconnect loop and its `session.resume` (reconnect-loop.ts), the heartbeats (heartbeats.ts).
 */
export class ResumableConnection {
  /** Resolves once, when the link has ended for good (see ClientEnd). */
  readonly closed: Promise<ClientEnd>;
  /** Events dropped because their seq had already been delivered (a replay overlapping what arrived). */
  duplicatesDropped = 0;
  /** Automatic resumes so far. */
  resumes = 0;

  private transport: Transport | null = null;
  private state: DuplexClientPhase = "connecting";
  private session: { id: string | null; token: string | null; generation: number } = {
    id: null,
    token: null,
    generation: 0,
  };
  private lastSeq = 0;
  private lastAcked = 0;
  private counter = 0;
  private readonly queue: SendQueue;
  private heartbeats: Heartbeats;
  private timers: ReturnType<typeof setInterval>[] = [];
  private resuming: ((result: Resume) => void) | null = null;
  private reconnectAttempt = 0;
  /** The seq the running resume asked the replay to start after, and the close code that started it. */
  private resumeFrom = 0;
  private dropCode = 0;
  private lastError: ServerEvent | null = null;
  private byClient = false;
  private readonly wake: { wake?: () => void } = {};
  private settle: (end: ClientEnd) => void = () => undefined;
  private readonly connectTo: Connect;

  constructor(
    readonly url: string,
    private readonly options: ConnectionOptions,
    private readonly hooks: ConnectionHooks,
  ) {
    this.connectTo = options.connect ?? wsConnect(options.headers ?? {});
    this.queue = createSendQueue(options.maxQueuedBytes ?? 16 * 2 ** 20);
    this.closed = new Promise((resolve) => {
      this.settle = resolve;
    });
    this.heartbeats = createHeartbeats(this.heartbeatTimeoutMs, () => undefined);
  }

  /** Where the link is. */
  get phase(): DuplexClientPhase {
    return this.state;
  }
  /** The session's id (`sess_...`), from `session.created`; "" before. */
  get sessionId(): string {
    return this.session.id ?? "";
  }
  /** The current resume token (rotated by every resume); null when the model does not support resume. */
  get resumeToken(): string | null {
    return this.session.token;
  }
  /** The current attachment generation: 1 after `session.created`, +1 per resume. */
  get attachmentGeneration(): number {
    return this.session.generation;
  }
  /** The highest `server_event_seq` delivered (0: none yet): what a resume asks the replay to start after. */
  get lastReceivedSeq(): number {
    return this.lastSeq;
  }

  /**
   * Opens the first connection to `url` (phase `connecting`: frames are sent, events delivered).
   * @throws DuplexConnectionError `connect_failed`, its message one line that says what to do; the link has ended.
   */
  async connect(): Promise<void> {
    let transport: Transport;
    try {
      transport = await this.connectTo(this.url);
    } catch (error) {
      const sentKey = Object.keys(this.options.headers ?? {}).some((h) => h.toLowerCase() === "authorization");
      const failure = new DuplexConnectionError("connect_failed", explainConnectError(this.url, error, sentKey), {
        cause: error,
      });
      this.finish(failure);
      throw failure;
    }
    this.attach(transport);
  }

  /** The session is open (its owner saw `session.created`): from now on a drop is resumed; timers start. */
  opened(): void {
    if (this.state !== "connecting") return;
    this.state = "open";
    this.startTimers();
  }

  /** Ends the link with `end` (its owner gave up on the handshake, for example). */
  end(end: ClientEnd): void {
    this.finish(end);
  }

  /**
   * Sends a client event, adding an `event_id` (`evt_client_N`) when it has none; returns the `event_id`. While
   * reconnecting the frame is kept and sent after the resume.
   * @throws DuplexSessionClosedError once the client has ended; DuplexConnectionError `send_queue_full` when more
   *   than `maxQueuedBytes` wait for a reconnect.
   */
  send(event: { type: string } & Record<string, unknown>): string {
    if (this.state === "closed" || this.state === "closing")
      throw new DuplexSessionClosedError("client_closed", `cannot send ${event.type}: the client is ${this.state}`);
    this.counter += 1;
    const eventId = typeof event.event_id === "string" ? event.event_id : `evt_client_${this.counter}`;
    const text = JSON.stringify({ ...event, event_id: eventId });
    if (this.state === "reconnecting" || this.transport === null) this.queue.push(text);
    else this.transport.send(text);
    return eventId;
  }

  /**
   * Sends `session.heartbeat` and resolves on its `session.heartbeat_ack`: the session's mailbox is ordered, so by
   * then the server has handled every event sent before it.
   * @throws DuplexConnectionError `connection_lost` when the connection drops first (a missing answer within
   *   `heartbeatTimeoutMs` is such a drop); DuplexSessionClosedError when the client has ended.
   */
  heartbeat(): Promise<void> {
    if (this.state !== "open")
      return Promise.reject(new DuplexConnectionError("connection_lost", `cannot heartbeat while ${this.state}`));
    this.send({ type: "session.heartbeat" });
    return this.heartbeats.sent();
  }

  /** Drops the current connection without a closing handshake, as a network failure would (tests, chaos). */
  dropConnection(): void {
    this.transport?.terminate();
  }

  /**
   * Ends the session: sends `session.close`, waits up to `timeoutMs` (default 5000) for `session.closed`, closes
   * the connection; `closed` resolves with null. While reconnecting, it stops (the server keeps the session
   * detached until its grace runs out).
   */
  async close(timeoutMs = 5000): Promise<void> {
    if (this.state === "closed" || this.state === "closing") {
      await this.closed;
      return;
    }
    if (this.state === "open" && this.transport !== null) {
      this.byClient = true;
      this.send({ type: "session.close" });
      this.state = "closing";
      const timer = setTimeout(() => this.finish(null), timeoutMs);
      await this.closed;
      clearTimeout(timer);
      return;
    }
    this.finish(null);
  }

  private get heartbeatTimeoutMs(): number {
    return this.options.heartbeatTimeoutMs ?? 10_000;
  }

  private attach(transport: Transport): void {
    this.transport = transport;
    this.heartbeats = createHeartbeats(this.heartbeatTimeoutMs, () => {
      // A heartbeat without an answer: the connection is as good as gone.
      if (this.transport === transport) transport.terminate();
    });
    transport.onMessage((text) => this.received(transport, text));
    transport.onClose((code, reason) => this.dropped(transport, code, reason));
  }

  private received(transport: Transport, text: string): void {
    if (transport !== this.transport) return;
    let event: ServerEvent;
    try {
      event = JSON.parse(text) as ServerEvent;
    } catch {
      this.finish(
        new DuplexProtocolError(
          "invalid_server_frame",
          `the server sent a frame that is not JSON: ${text.slice(0, 80)}`,
          null,
        ),
      );
      return;
    }
    const at = performance.now();
    const seq = event.server_event_seq;
    if (typeof seq === "number") {
      if (seq <= this.lastSeq) {
        this.duplicatesDropped += 1;
        return;
      }
      this.lastSeq = seq;
    }
    switch (event.type) {
      case "session.created":
        this.session = {
          id: String((event.session as { id?: string } | undefined)?.id ?? ""),
          token: typeof event.resume_token === "string" ? event.resume_token : null,
          generation: Number(event.attachment_generation ?? 1),
        };
        break;
      case "session.resumed":
        this.resumed(event, at);
        return;
      case "session.heartbeat_ack":
        this.heartbeats.acked();
        break;
      case "error":
        if (this.state !== "closing") this.lastError = event;
        break;
      default:
    }
    this.hooks.deliver(event, at);
    const end = serverEventEnd(event, {
      lastError: this.lastError,
      byClient: this.byClient,
      lastSeq: this.lastSeq,
      resuming: this.resuming !== null,
    });
    if (end?.kind === "finish") this.finish(end.end);
    else if (end?.kind === "refuse") this.refuse(end.error);
  }

  private refuse(error: DuplexSessionClosedError): void {
    const resuming = this.resuming;
    this.resuming = null;
    if (resuming !== null) resuming({ kind: "refused", error });
    else this.finish(error);
  }

  private resumed(event: ServerEvent, at: number): void {
    this.session = {
      id: this.session.id,
      token: typeof event.resume_token === "string" ? event.resume_token : this.session.token,
      generation: Number(event.attachment_generation ?? this.session.generation + 1),
    };
    this.state = "open";
    this.resumes += 1;
    const notice: ConnectionResumed = {
      type: CONNECTION_RESUMED,
      session_id: String(event.session_id ?? this.session.id),
      attachment_generation: this.session.generation,
      last_received_server_event_seq: this.resumeFrom,
      attempt: this.reconnectAttempt,
      close_code: this.dropCode,
      ...(typeof event.detach_reason === "string" ? { detach_reason: event.detach_reason } : {}),
    };
    // The replay that follows is delivered after the notice; what waited for the reconnect goes out now.
    this.hooks.deliver(notice, at);
    this.queue.flush((text) => this.transport?.send(text));
    this.startTimers();
    const resuming = this.resuming;
    this.resuming = null;
    resuming?.({ kind: "resumed" });
  }

  private dropped(transport: Transport, code: number, reason: string): void {
    if (transport !== this.transport) return;
    this.transport = null;
    this.stopTimers();
    this.heartbeats.dropped(new DuplexConnectionError("connection_lost", `the connection closed (${code})`));
    if (this.resuming !== null) {
      const resuming = this.resuming;
      this.resuming = null;
      resuming({ kind: "dropped", code });
      return;
    }
    if (this.state === "closed") return;
    const policy = this.options.reconnect === undefined ? DEFAULT_RECONNECT_POLICY : this.options.reconnect;
    const outcome = dropOutcome({ code, reason }, this.state, policy, this.session.token);
    if (outcome.kind === "end") this.finish(outcome.end);
    else this.reconnect(outcome.policy, code);
  }

  /** Starts the reconnect loop (reconnect-loop.ts) after a resumable drop with `code`. */
  private reconnect(policy: ReconnectPolicy, code: number): void {
    this.state = "reconnecting";
    this.dropCode = code;
    const resumeUrl = new URL(this.url);
    resumeUrl.searchParams.set("autostart", "0");
    void reconnectLoop({
      url: resumeUrl.toString(),
      policy,
      random: this.options.random,
      wake: this.wake,
      sessionId: () => this.session.id,
      still: () => this.state === "reconnecting",
      connect: (url) => this.connectTo(url),
      resume: (transport, attempt) => this.resumeOn(transport, attempt),
      end: (end) => this.finish(end),
    });
  }

  /** Attaches `transport` and sends `session.resume` (attempt `attempt`); resolves with how the attempt ended. */
  private resumeOn(transport: Transport, attempt: number): Promise<Resume> {
    this.reconnectAttempt = attempt;
    this.resumeFrom = this.lastSeq;
    return new Promise<Resume>((resolve) => {
      const timer = setTimeout(() => transport.terminate(), this.options.handshakeTimeoutMs ?? 10_000);
      this.resuming = (r) => {
        clearTimeout(timer);
        resolve(r);
      };
      this.attach(transport);
      transport.send(resumeRequest(this.session, this.lastSeq, { resume: this.resumes + 1, attempt }));
    });
  }

  private startTimers(): void {
    this.stopTimers();
    const heartbeatMs = this.options.heartbeatIntervalMs === undefined ? 30_000 : this.options.heartbeatIntervalMs;
    if (heartbeatMs !== null) {
      const timer = setInterval(() => {
        if (this.state === "open" && this.heartbeats.outstanding === 0) this.heartbeat().catch(() => undefined);
      }, heartbeatMs);
      timer.unref?.();
      this.timers.push(timer);
    }
    const ackMs = this.options.ackIntervalMs === undefined ? 2000 : this.options.ackIntervalMs;
    if (ackMs !== null) {
      const timer = setInterval(() => {
        if (this.state !== "open" || this.lastSeq <= this.lastAcked) return;
        this.lastAcked = this.lastSeq;
        this.send({ type: "session.event_ack", server_event_seq: this.lastSeq });
      }, ackMs);
      timer.unref?.();
      this.timers.push(timer);
    }
  }

  private stopTimers(): void {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
  }

  private finish(error: ClientEnd): void {
    if (this.state === "closed") return;
    this.state = "closed";
    this.stopTimers();
    this.wake.wake?.();
    const resuming = this.resuming;
    this.resuming = null;
    resuming?.({ kind: "dropped", code: 1000 });
    const transport = this.transport;
    this.transport = null;
    transport?.close();
    const end = error ?? new DuplexSessionClosedError("client_closed", "the client closed the session");
    this.heartbeats.dropped(end);
    this.queue.clear();
    this.hooks.ended(error);
    this.settle(error);
  }
}
