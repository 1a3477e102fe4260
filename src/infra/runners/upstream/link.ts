import { createHash } from "node:crypto";
import { WebSocket } from "ws";
import type { StageLossCode } from "../../../domain/index.ts";
import { createDelivery, type Delivery } from "./delivery.ts";
import {
  ATTACHMENT_LOST,
  type DuplexRevision,
  type LinkHandlers,
  type LinkOptions,
  type UpstreamLink,
} from "./link-contract.ts";
import { AT_CAPACITY, GONE, type ResumePolicy, resumeDelayMs } from "./resume-policy.ts";
import { type Json, obj, str } from "./wire-json.ts";

export type { DuplexRevision, LinkHandlers, LinkOptions, UpstreamLink } from "./link-contract.ts";

/**
 * The upstream link of one session. It connects (the first frame opens a duplex session, which answers with
 * `session.created`; an OpenAI server sends `session.created` at once) and hands every event on, dropping one whose
 * `server_event_seq` it already had.
 *
 * What it sent is confirmed by barriers: a `session.heartbeat` after each burst of events (at most one outstanding,
 * keepalives included), whose `session.heartbeat_ack` (acks come in order) tells that the upstream took everything
 * sent before it. When a duplex link drops, the link resumes the upstream session on a new socket (`session.resume`
 * with the token, in memory only, and the last seq received), retrying refusals, HTTP errors and timeouts with
 * backoff and jitter until the grace of its {@link ResumePolicy} is spent; the upstream replays what it had sent after
 * that seq. The end of the replay is marked by the reference's own request and answer (reference/realtime-duplex-api.md,
 * "Session lifetime"): a `session.heartbeat` sent on `session.resumed`, which the upstream answers after the replay
 * (its mailbox applies events in arrival order); on its `session.heartbeat_ack`, everything sent after the last
 * confirmed barrier is sent again, in order, before anything new. Nothing that changes the upstream session (no
 * `response.cancel`, which advances its epoch) is sent for the marker.
 *
 * An ack names no request, so an ack replayed for the barrier that was outstanding at the drop cannot be told from the
 * marker's: the first ack after `session.resumed` ends the replay. When the link broke between the upstream taking
 * that barrier and its ack reaching us, the events of that last burst reach the upstream twice, and the marker's own
 * ack, arriving later, confirms the next barrier early (until a barrier finds no ack outstanding); nothing is ever
 * lost or waited for in vain. With no barrier outstanding at the drop the replay's end is exact. A
 * `response.create` answered with `response.created` before that first ack is never sent again.
 *
 * The upstream is lost (`lost`) when the first connection is refused or times out, a duplex session cannot be resumed
 * within the grace or the upstream says it is gone, an OpenAI link drops (its sessions cannot be resumed), or a frame
 * is not a JSON event.
 */
export const createUpstreamLink = (options: LinkOptions, handlers: LinkHandlers): UpstreamLink =>
  new LinkConnection(options, handlers);

/** `open`: ready for traffic; `connecting`: the first connection; `resuming`: after a drop; `done`: lost or closed. */
type Phase = "connecting" | "open" | "resuming" | "done";

/**
 * The link as a long-lived resource: its phase, its socket, the upstream session (id and resume token, memory only),
 * the last `server_event_seq` taken, the resume in progress, and its outbound queue (delivery.ts). The socket's
 * events are handled by named methods; the handshake's and the resume's rules are in `onEvent` and `retryOrLose`.
 */
class LinkConnection implements UpstreamLink {
  private socket: WebSocket | null = null;
  private phase: Phase = "connecting";
  private session: { id: string; token: string | null; incarnation: number | null } | null = null;
  private lastSeq = 0;
  /**
   * The resume in progress: when the link dropped, the tries made, the timer of the next one, and whether this try's
   * marker (a `session.heartbeat` after `session.resumed`) was sent.
   */
  private resume: { since: number; attempts: number; timer: NodeJS.Timeout | null; marked: boolean } | null = null;
  private readyTimer: NodeJS.Timeout | null = null;
  private readonly delivery: Delivery;
  private readonly keepalive: NodeJS.Timeout;

  constructor(
    private readonly options: LinkOptions,
    private readonly handlers: LinkHandlers,
  ) {
    this.delivery = createDelivery({
      duplex: options.dialect === "duplex",
      isOpen: () => this.phase === "open",
      write: (text) => this.write(text),
    });
    // A live duplex session keeps its upstream session alive too (the upstream's idle TTL counts our silence).
    this.keepalive = setInterval(() => {
      if (this.phase === "open" && options.dialect === "duplex") this.delivery.barrier();
    }, options.heartbeatMs);
    this.keepalive.unref();
    this.armReadyTimer(() => `no session.created from ${options.url.origin} within ${options.connectTimeoutMs} ms`);
    // The session's first session.update (queued by its first configure before the socket opened) opens a duplex
    // upstream session, which answers with session.created; everything else waits for that.
    this.connect(options.url, null).once("open", () => {
      const opening = this.phase === "connecting" ? this.delivery.takeOpening() : undefined;
      if (opening !== undefined) this.write(opening);
    });
  }

  send(event: Json): void {
    if (this.phase === "done") return;
    this.delivery.send(event);
  }

  close(): void {
    if (this.phase === "done") return;
    this.phase = "done";
    this.stopTimers();
    const current = this.socket;
    // Also while connecting: an OpenAI server (or a duplex one that got the opening update) has a session already.
    if (current?.readyState === WebSocket.OPEN) {
      current.send(JSON.stringify({ type: "session.close" }));
      current.close(1000, "session closed");
    } else current?.terminate();
  }

  private write(text: string): void {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(text);
  }

  private tokenSha256(): string | null {
    return this.session?.token == null ? null : createHash("sha256").update(this.session.token).digest("hex");
  }

  private stopTimers(): void {
    if (this.readyTimer !== null) clearTimeout(this.readyTimer);
    this.delivery.pause();
    if (this.resume?.timer) clearTimeout(this.resume.timer);
    clearInterval(this.keepalive);
    this.readyTimer = null;
  }

  private clearReadyTimer(): void {
    if (this.readyTimer !== null) clearTimeout(this.readyTimer);
    this.readyTimer = null;
  }

  private lose(code: StageLossCode, message: string): void {
    if (this.phase === "done") return;
    this.phase = "done";
    this.stopTimers();
    this.socket?.terminate();
    this.handlers.lost(code, message);
  }

  private armReadyTimer(why: () => string): void {
    if (this.readyTimer !== null) clearTimeout(this.readyTimer);
    this.readyTimer = setTimeout(() => {
      this.readyTimer = null;
      if (this.phase === "resuming") this.retryOrLose(why());
      else this.lose("upstream_unavailable", why());
    }, this.options.connectTimeoutMs);
  }

  /** After session.resumed and the marker's ack: send again what the upstream did not confirm, then the rest. */
  private resynced(): void {
    if (this.resume === null) return;
    this.resume = null;
    this.phase = "open";
    this.clearReadyTimer();
    this.delivery.resend();
    this.handlers.ready("resumed", {
      id: this.session?.id ?? "",
      tokenSha256: this.tokenSha256(),
      revision: this.revision(),
    });
  }

  /** The duplex dialect's revision the upstream's `session.created` showed (null: an OpenAI server). */
  private revision(): DuplexRevision | null {
    if (this.options.dialect !== "duplex") return null;
    return this.session?.incarnation === null ? "server_ids" : "incarnation";
  }

  /** `session.created` or `session.resumed`: the upstream session, new or taken back, and its token. */
  private onSession(type: string, event: Json): void {
    const described = obj(event.session);
    const id = str(described?.id) ?? str(event.session_id) ?? this.session?.id ?? "";
    const incarnation = typeof event.incarnation === "number" ? event.incarnation : null;
    this.session = {
      id,
      token: str(event.resume_token) ?? (type === "session.created" ? null : (this.session?.token ?? null)),
      incarnation: incarnation ?? (type === "session.created" ? null : (this.session?.incarnation ?? null)),
    };
    if (type === "session.created" && this.phase === "connecting") {
      this.phase = "open";
      this.clearReadyTimer();
      this.delivery.flush();
      this.handlers.ready("created", { id, tokenSha256: this.tokenSha256(), revision: this.revision() });
      return;
    }
    if (type === "session.resumed" && this.resume !== null) {
      // The replay follows; the marker's ack comes after it.
      this.resume.marked = true;
      this.write(JSON.stringify({ type: "session.heartbeat" }));
      this.armReadyTimer(
        () => `the upstream did not answer the resume's session.heartbeat within ${this.options.connectTimeoutMs} ms`,
      );
    }
    this.handlers.event(event);
  }

  /**
   * An `error`: a refused `response.create` is not waited for; a journaled one (with a seq) goes on like any event;
   * the handshake's answer refuses the session or the resume. Returns whether the link took it (not handed on).
   */
  private onError(event: Json): boolean {
    const error = obj(event.error);
    const code = str(error?.code) ?? str(event.code);
    // A refused response.create will not be answered.
    this.delivery.refused(str(error?.event_id));
    // An error with a seq is the session's own, replayed from its journal (a commit it refused while the link was
    // down): it goes on like any event. Only the handshake's answer, which has none, refuses the resume.
    if (typeof event.server_event_seq === "number") return false;
    if (this.phase === "resuming" && code !== null && GONE.has(code)) {
      this.lose("upstream_unavailable", `the upstream session is gone: ${code}: ${str(error?.message) ?? ""}`.trim());
      return true;
    }
    if (this.phase === "connecting" || this.phase === "resuming") {
      const message = str(event.error) ?? str(error?.message) ?? "refused";
      if (this.phase === "resuming") this.retryOrLose(`the upstream refused the resume: ${message}`);
      else if (code !== null && AT_CAPACITY.has(code))
        this.lose("duplex_session_busy", `the model server is at capacity (${code}): ${message}`);
      else this.lose("upstream_unavailable", `the upstream refused the session: ${message}`);
      return true;
    }
    return false;
  }

  /** One upstream event, after its seq was checked: the link's own (handshake, acks, ends) or handed on. */
  private onEvent(event: Json): void {
    const type = str(event.type) ?? "";
    // A session.created on a resume's socket would be another session: not ours to take.
    if (type === "session.created" && this.phase !== "connecting") return;
    if (type === "session.created" || type === "session.resumed") {
      this.onSession(type, event);
      return;
    }
    if (type === "session.heartbeat_ack") {
      if (this.phase === "resuming" && this.resume?.marked === true) {
        this.resynced();
        return;
      }
      this.delivery.acked();
    }
    if ((type === "session.expired" || type === "session.closed") && this.phase === "open") {
      const reason = str(event.reason) ?? str(obj(event.event)?.reason);
      // The newest revision says so when it lost our socket, not the session: resumed as after a drop.
      if (type === "session.closed" && reason !== null && ATTACHMENT_LOST.has(reason)) {
        this.dropped(`the upstream closed our attachment (${reason})`);
        return;
      }
      this.lose("upstream_unavailable", `the upstream session ended (${reason ?? type})`);
      return;
    }
    if (type === "response.created") this.delivery.responseCreated();
    if (type === "error" && this.onError(event)) return;
    this.handlers.event(event);
  }

  /** Opens a socket to `target` (the link's current one), sending `first` once it is open. */
  private connect(target: URL, first: string | null): WebSocket {
    const current = new WebSocket(target, {
      headers: this.options.headers,
      handshakeTimeout: this.options.connectTimeoutMs,
      perMessageDeflate: false,
      ...(this.options.ca === undefined ? {} : { ca: this.options.ca }),
    });
    this.socket = current;
    const mine = (): boolean => current === this.socket && this.phase !== "done";
    current.on("message", (data, isBinary) => {
      if (mine()) this.onMessage(data.toString(), isBinary);
    });
    current.on("unexpected-response", (_request, response) => {
      if (!mine()) return;
      current.terminate();
      this.onUpgradeRefused(response.statusCode ?? 0);
    });
    current.on("error", (error) => {
      if (mine()) this.onSocketError(error);
    });
    current.on("close", (code, reason) => {
      if (mine()) this.onSocketClose(`the upstream closed the connection (${code} ${reason.toString()})`.trim());
    });
    current.on("open", () => {
      if (mine() && first !== null) current.send(first);
    });
    return current;
  }

  /** A frame: a JSON event with a type, taken once by its seq, else the stage is lost (`upstream_protocol_error`). */
  private onMessage(text: string, isBinary: boolean): void {
    let event: Json | null = null;
    try {
      event = isBinary ? null : obj(JSON.parse(text));
    } catch {
      event = null;
    }
    if (event === null || typeof event.type !== "string") {
      this.lose("upstream_protocol_error", "the upstream sent a frame that is not a JSON event with a type");
      return;
    }
    const seq = typeof event.server_event_seq === "number" ? event.server_event_seq : null;
    if (seq !== null) {
      // A replayed event this session already had (the contract replays only later ones; checked anyway).
      if (seq <= this.lastSeq) return;
      this.lastSeq = seq;
    }
    try {
      this.onEvent(event);
    } catch (error) {
      // Whatever an upstream event breaks here breaks only this session.
      this.lose(
        "upstream_protocol_error",
        `the upstream sent ${String(event.type)} that cannot be used: ${(error as Error).message}`,
      );
    }
  }

  private onUpgradeRefused(status: number): void {
    const why = `the upstream answered the upgrade with HTTP ${status}`;
    // A 5xx (or 408, 429) is a server that will be back; 401, 403, 404 will not change with a retry.
    if (this.phase === "resuming" && (status >= 500 || status === 408 || status === 429)) this.retryOrLose(why);
    else if (status === 429) this.lose("duplex_session_busy", `${why}: the model server is at capacity`);
    else this.lose("upstream_unavailable", why);
  }

  private onSocketError(error: Error): void {
    if (this.phase === "resuming") this.retryOrLose(`cannot reach the upstream: ${error.message}`);
    else if (this.phase === "connecting")
      this.lose("upstream_unavailable", `cannot reach the upstream: ${error.message}`);
  }

  private onSocketClose(why: string): void {
    if (this.phase === "open") this.dropped(why);
    else if (this.phase === "resuming") this.retryOrLose(why);
    else this.lose("upstream_unavailable", why);
  }

  /** The open link dropped: a duplex session is resumed, an OpenAI one is lost. */
  private dropped(why: string): void {
    if (this.options.dialect !== "duplex" || this.session?.token == null) {
      this.lose("upstream_unavailable", why);
      return;
    }
    this.phase = "resuming";
    this.delivery.pause();
    this.resume = { since: performance.now(), attempts: 0, timer: null, marked: false };
    this.retryOrLose(why);
  }

  /** Schedules the next resume try, or loses the stage when the grace is spent. */
  private retryOrLose(why: string): void {
    const resume = this.resume;
    if (resume === null || this.phase !== "resuming") return;
    this.socket?.terminate();
    this.socket = null;
    this.clearReadyTimer();
    resume.marked = false;
    const elapsed = performance.now() - resume.since;
    const policy = this.options.resume;
    const delay = resumeDelayMs(policy, resume.attempts);
    if (elapsed + delay > policy.graceMs) {
      this.lose(
        "upstream_unavailable",
        `the upstream session could not be resumed within ${policy.graceMs} ms (${resume.attempts} tries): ${why}`,
      );
      return;
    }
    resume.attempts += 1;
    this.handlers.retrying?.(resume.attempts, Math.round(delay), why);
    resume.timer = setTimeout(() => this.tryResume(), delay);
  }

  /** One resume try: a new socket on `?autostart=0` whose first frame is `session.resume`. */
  private tryResume(): void {
    const { resume, session } = this;
    if (resume === null || this.phase !== "resuming" || session === null) return;
    resume.timer = null;
    const again = new URL(this.options.url);
    again.searchParams.set("autostart", "0");
    this.armReadyTimer(() => `no session.resumed within ${this.options.connectTimeoutMs} ms`);
    this.connect(
      again,
      JSON.stringify({
        type: "session.resume",
        session_id: session.id,
        // The revision with an incarnation names the session by both (the newest one has none).
        ...(session.incarnation === null ? {} : { incarnation: session.incarnation }),
        resume_token: session.token,
        last_received_server_event_seq: this.lastSeq,
      }),
    );
  }
}
