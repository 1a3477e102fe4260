import { createHash } from "node:crypto";
import { WebSocket } from "ws";
import type { StageLossCode } from "../../../domain/index.ts";

/** A JSON object as the upstream sends or takes it. */
export type Json = Record<string, unknown>;

export const str = (value: unknown): string | null => (typeof value === "string" ? value : null);
export const obj = (value: unknown): Json | null =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : null;

/**
 * How the link retries a dropped duplex upstream session (reference/realtime-duplex-api.md, "Reconnect and resume").
 * Times in ms. The first try comes after `initialDelayMs`; each later one waits twice as long as the one before, at
 * most `maxDelayMs`, each delay drawn at random between half of it and all of it (jitter, so that the sessions of a
 * restarted upstream do not come back in step). No try starts after `graceMs` since the drop.
 */
export interface ResumePolicy {
  readonly graceMs: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
}

export const DEFAULT_RESUME_POLICY: ResumePolicy = { graceMs: 10_000, initialDelayMs: 100, maxDelayMs: 2000 };

/** The longest a resume may be retried (ms): the reference's default disconnect grace is 30 s; ten times that. */
export const MAX_RESUME_GRACE_MS = 300_000;

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
  ready(how: "created" | "resumed", session: { readonly id: string; readonly tokenSha256: string | null }): void;
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

/** Error codes with which the upstream says its session is gone: retrying the same token cannot help. */
const GONE = new Set([
  "session_resume_expired",
  "invalid_resume_token",
  "unsupported_session_resume",
  "unknown_session",
]);

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
export const createUpstreamLink = (options: LinkOptions, handlers: LinkHandlers): UpstreamLink => {
  let socket: WebSocket | null = null;
  /** `open`: ready for traffic; `connecting`: the first connection; `resuming`: after a drop; `done`: lost or closed. */
  let phase: "connecting" | "open" | "resuming" | "done" = "connecting";
  /** Events waiting for the session to be ready (sent in order once it is). */
  const outbox: string[] = [];
  /** Events sent since the last confirmed barrier, each with its place in the stream of sent events. */
  let unconfirmed: { readonly index: number; readonly text: string; readonly respondId: string | null }[] = [];
  let sentCount = 0;
  /** Barriers sent and not acknowledged: how many events had been sent before each. */
  let barriers: number[] = [];
  let barrierTimer: NodeJS.Timeout | null = null;
  /** `response.create` event ids the upstream answered with `response.created`. */
  const answered = new Set<string>();
  /** `response.create` event ids sent and not yet answered or refused, in order. */
  let waitingRespond: string[] = [];
  /** The upstream session: its id and current resume token (memory only). */
  let session: { id: string; token: string | null } | null = null;
  let lastSeq = 0;
  /**
   * The resume in progress: when the link dropped, the tries made, the timer of the next one, and whether this try's
   * marker (a `session.heartbeat` after `session.resumed`) was sent.
   */
  let resume: { since: number; attempts: number; timer: NodeJS.Timeout | null; marked: boolean } | null = null;
  let readyTimer: NodeJS.Timeout | null = null;

  const tokenSha256 = (): string | null =>
    session?.token == null ? null : createHash("sha256").update(session.token).digest("hex");

  const stopTimers = (): void => {
    if (readyTimer !== null) clearTimeout(readyTimer);
    if (barrierTimer !== null) clearTimeout(barrierTimer);
    if (resume?.timer) clearTimeout(resume.timer);
    clearInterval(keepalive);
    readyTimer = null;
    barrierTimer = null;
  };

  const lose = (code: StageLossCode, message: string): void => {
    if (phase === "done") return;
    phase = "done";
    stopTimers();
    socket?.terminate();
    handlers.lost(code, message);
  };

  const rawSend = (text: string): void => {
    if (socket?.readyState === WebSocket.OPEN) socket.send(text);
  };

  /** Sends a barrier: a heartbeat whose ack confirms every event sent before it. */
  const sendBarrier = (): void => {
    barrierTimer = null;
    // One outstanding at a time: its ack refreshes the upstream's lease as well as a second one would.
    if (phase !== "open" || barriers.length > 0) return;
    barriers.push(sentCount);
    rawSend(JSON.stringify({ type: "session.heartbeat" }));
  };

  /**
   * A barrier follows each burst of events (the events one turn of the event loop sent), or, while one is on its
   * way, the ack that confirms it: at most one barrier is outstanding, so a slow upstream gets fewer, not more.
   */
  const scheduleBarrier = (): void => {
    if (barrierTimer !== null || barriers.length > 0 || options.dialect !== "duplex") return;
    barrierTimer = setTimeout(sendBarrier, 0);
  };

  /** Sends one event on the open link and keeps it until a barrier confirms it. */
  const transmit = (text: string, respondId: string | null): void => {
    sentCount += 1;
    if (options.dialect === "duplex") unconfirmed.push({ index: sentCount, text, respondId });
    rawSend(text);
    scheduleBarrier();
  };

  const confirm = (): void => {
    const upTo = barriers.shift();
    if (upTo === undefined) return;
    unconfirmed = unconfirmed.filter((e) => e.index > upTo);
    if (unconfirmed.length > 0 && phase === "open") scheduleBarrier();
  };

  // A live duplex session keeps its upstream session alive too (the upstream's idle TTL counts our silence).
  const keepalive = setInterval(() => {
    if (phase === "open" && options.dialect === "duplex") sendBarrier();
  }, options.heartbeatMs);
  keepalive.unref();

  const armReadyTimer = (why: () => string): void => {
    if (readyTimer !== null) clearTimeout(readyTimer);
    readyTimer = setTimeout(() => {
      readyTimer = null;
      if (phase === "resuming") retryOrLose(why());
      else lose("upstream_unavailable", why());
    }, options.connectTimeoutMs);
  };

  /** After session.resumed and the marker's ack: send again what the upstream did not confirm, then the rest. */
  const resynced = (): void => {
    if (resume === null) return;
    resume = null;
    phase = "open";
    if (readyTimer !== null) clearTimeout(readyTimer);
    readyTimer = null;
    const again = unconfirmed.filter((e) => e.respondId === null || !answered.has(e.respondId));
    unconfirmed = [];
    barriers = [];
    for (const e of again) transmit(e.text, e.respondId);
    for (const text of outbox.splice(0)) transmit(text, respondIdOf(text));
    handlers.ready("resumed", { id: session?.id ?? "", tokenSha256: tokenSha256() });
  };

  const onEvent = (event: Json): void => {
    const type = str(event.type) ?? "";
    // A session.created on a resume's socket would be another session: not ours to take.
    if (type === "session.created" && phase !== "connecting") return;
    if (type === "session.created" || type === "session.resumed") {
      const described = obj(event.session);
      const id = str(described?.id) ?? str(event.session_id) ?? session?.id ?? "";
      session = {
        id,
        token: str(event.resume_token) ?? (type === "session.created" ? null : (session?.token ?? null)),
      };
      if (type === "session.created" && phase === "connecting") {
        phase = "open";
        if (readyTimer !== null) clearTimeout(readyTimer);
        readyTimer = null;
        for (const text of outbox.splice(0)) transmit(text, respondIdOf(text));
        handlers.ready("created", { id, tokenSha256: tokenSha256() });
        return;
      }
      if (type === "session.resumed" && resume !== null) {
        // The replay follows; the marker's ack comes after it.
        resume.marked = true;
        rawSend(JSON.stringify({ type: "session.heartbeat" }));
        armReadyTimer(
          () => `the upstream did not answer the resume's session.heartbeat within ${options.connectTimeoutMs} ms`,
        );
        handlers.event(event);
        return;
      }
      handlers.event(event);
      return;
    }
    if (type === "session.heartbeat_ack") {
      if (phase === "resuming" && resume?.marked === true) {
        resynced();
        return;
      }
      confirm();
    }
    if ((type === "session.expired" || type === "session.closed") && phase === "open") {
      lose("upstream_unavailable", `the upstream session ended (${str(event.reason) ?? type})`);
      return;
    }
    if (type === "response.created") {
      const next = waitingRespond.shift();
      if (next !== undefined) answered.add(next);
    }
    if (type === "error") {
      const error = obj(event.error);
      const code = str(error?.code) ?? str(event.code);
      const refused = str(error?.event_id);
      // A refused response.create will not be answered.
      if (refused !== null) waitingRespond = waitingRespond.filter((id) => id !== refused);
      // An error with a seq is the session's own, replayed from its journal (a commit it refused while the link was
      // down): it goes on like any event. Only the handshake's answer, which has none, refuses the resume.
      if (typeof event.server_event_seq === "number") {
        handlers.event(event);
        return;
      }
      if (phase === "resuming" && code !== null && GONE.has(code)) {
        lose("upstream_unavailable", `the upstream session is gone: ${code}: ${str(error?.message) ?? ""}`.trim());
        return;
      }
      if (phase === "connecting" || phase === "resuming") {
        const message = str(event.error) ?? str(error?.message) ?? "refused";
        if (phase === "resuming") retryOrLose(`the upstream refused the resume: ${message}`);
        else lose("upstream_unavailable", `the upstream refused the session: ${message}`);
        return;
      }
    }
    handlers.event(event);
  };

  const connect = (target: URL, first: string | null): WebSocket => {
    const current = new WebSocket(target, {
      headers: options.headers,
      handshakeTimeout: options.connectTimeoutMs,
      perMessageDeflate: false,
      ...(options.ca === undefined ? {} : { ca: options.ca }),
    });
    socket = current;
    const mine = (): boolean => current === socket && phase !== "done";
    current.on("message", (data, isBinary) => {
      if (!mine()) return;
      let event: Json | null = null;
      try {
        event = isBinary ? null : obj(JSON.parse(data.toString()));
      } catch {
        event = null;
      }
      if (event === null || typeof event.type !== "string") {
        lose("upstream_protocol_error", "the upstream sent a frame that is not a JSON event with a type");
        return;
      }
      const seq = typeof event.server_event_seq === "number" ? event.server_event_seq : null;
      if (seq !== null) {
        // A replayed event this session already had (the contract replays only later ones; checked anyway).
        if (seq <= lastSeq) return;
        lastSeq = seq;
      }
      try {
        onEvent(event);
      } catch (error) {
        // Whatever an upstream event breaks here breaks only this session.
        lose(
          "upstream_protocol_error",
          `the upstream sent ${String(event.type)} that cannot be used: ${(error as Error).message}`,
        );
      }
    });
    current.on("unexpected-response", (_request, response) => {
      if (!mine()) return;
      const status = response.statusCode ?? 0;
      const why = `the upstream answered the upgrade with HTTP ${status}`;
      current.terminate();
      // A 5xx (or 408, 429) is a server that will be back; 401, 403, 404 will not change with a retry.
      if (phase === "resuming" && (status >= 500 || status === 408 || status === 429)) retryOrLose(why);
      else lose("upstream_unavailable", why);
    });
    current.on("error", (error) => {
      if (!mine()) return;
      if (phase === "resuming") retryOrLose(`cannot reach the upstream: ${error.message}`);
      else if (phase === "connecting") lose("upstream_unavailable", `cannot reach the upstream: ${error.message}`);
    });
    current.on("close", (code, reason) => {
      if (!mine()) return;
      const why = `the upstream closed the connection (${code} ${reason.toString()})`.trim();
      if (phase === "open") dropped(why);
      else if (phase === "resuming") retryOrLose(why);
      else lose("upstream_unavailable", why);
    });
    current.on("open", () => {
      if (mine() && first !== null) current.send(first);
    });
    return current;
  };

  /** The open link dropped: a duplex session is resumed, an OpenAI one is lost. */
  const dropped = (why: string): void => {
    if (options.dialect !== "duplex" || session?.token == null) {
      lose("upstream_unavailable", why);
      return;
    }
    phase = "resuming";
    if (barrierTimer !== null) clearTimeout(barrierTimer);
    barrierTimer = null;
    resume = { since: performance.now(), attempts: 0, timer: null, marked: false };
    retryOrLose(why);
  };

  /** Schedules the next resume try, or loses the stage when the grace is spent. */
  const retryOrLose = (why: string): void => {
    if (resume === null || phase !== "resuming") return;
    socket?.terminate();
    socket = null;
    if (readyTimer !== null) clearTimeout(readyTimer);
    readyTimer = null;
    resume.marked = false;
    const elapsed = performance.now() - resume.since;
    const step = Math.min(options.resume.maxDelayMs, options.resume.initialDelayMs * 2 ** resume.attempts);
    const delay = step / 2 + Math.random() * (step / 2);
    if (elapsed + delay > options.resume.graceMs) {
      lose(
        "upstream_unavailable",
        `the upstream session could not be resumed within ${options.resume.graceMs} ms (${resume.attempts} tries): ${why}`,
      );
      return;
    }
    resume.attempts += 1;
    handlers.retrying?.(resume.attempts, Math.round(delay), why);
    resume.timer = setTimeout(() => {
      if (resume === null || phase !== "resuming" || session === null) return;
      resume.timer = null;
      const again = new URL(options.url);
      again.searchParams.set("autostart", "0");
      armReadyTimer(() => `no session.resumed within ${options.connectTimeoutMs} ms`);
      connect(
        again,
        JSON.stringify({
          type: "session.resume",
          session_id: session.id,
          resume_token: session.token,
          last_received_server_event_seq: lastSeq,
        }),
      );
    }, delay);
  };

  armReadyTimer(() => `no session.created from ${options.url.origin} within ${options.connectTimeoutMs} ms`);
  // The session's first session.update (queued by its first configure before the socket opened) opens a duplex
  // upstream session, which answers with session.created; everything else waits for that.
  connect(options.url, null).once("open", () => {
    if (phase === "connecting" && outbox[0]?.startsWith('{"type":"session.update"')) rawSend(outbox.shift() ?? "");
  });

  return {
    send(event) {
      if (phase === "done") return;
      const text = JSON.stringify(event);
      const respondId = event.type === "response.create" ? str(event.event_id) : null;
      if (respondId !== null) waitingRespond.push(respondId);
      if (phase === "open") transmit(text, respondIdOf(text));
      else outbox.push(text);
    },
    close() {
      if (phase === "done") return;
      phase = "done";
      stopTimers();
      const current = socket;
      // Also while connecting: an OpenAI server (or a duplex one that got the opening update) has a session already.
      if (current?.readyState === WebSocket.OPEN) {
        current.send(JSON.stringify({ type: "session.close" }));
        current.close(1000, "session closed");
      } else current?.terminate();
    },
  };
};

/** The `event_id` of a `response.create` in its JSON text, else null. */
const respondIdOf = (text: string): string | null =>
  text.startsWith('{"type":"response.create"') ? str(obj(JSON.parse(text))?.event_id) : null;
