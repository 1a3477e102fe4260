import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";

/**
 * A model server as real ones behave, for the upstream runner's tests (issue 18): a small ws server, not a mock of
 * our own code. Both dialects:
 * - `duplex` (reference/realtime-duplex-api.md): the first `session.update` opens a session (`session.created` with a
 *   resume token); every later event carries `server_event_seq` and is journaled; a dropped socket leaves the session
 *   resumable for `graceMs`; `session.resume` (on `?autostart=0`) rotates the token, answers `session.resumed` and
 *   replays the journal after the client's seq; `session.heartbeat` is acked.
 * - `openai`: `session.created` at once; no seq, no resume (a dropped socket ends the session).
 * In both: appends fill a buffer; a commit shorter than `minCommitMs` is refused with
 * `input_audio_buffer_commit_empty` echoing its `event_id`, else the user item gets a transcript (`utterance N`);
 * `conversation.item.create` adds to the conversation; `response.create` answers with `respond` (by default one
 * 100 ms chunk saying "I know N user texts.", N the user messages with text in its conversation); `response.cancel`
 * of no active response is refused with `response_not_active` echoing its `event_id` (or, by `cancel`, as the
 * reference says or ignored).
 * `drop()` cuts every socket; `refuse("connection" | "http503" | null)` makes the server unreachable (refused
 * connections, then HTTP 503 upgrades) or reachable again.
 */
export interface StubOptions {
  readonly dialect: "duplex" | "openai";
  /** How long a dropped duplex session stays resumable (ms); default 30 000. */
  readonly graceMs?: number;
  /** The shortest commit taken (ms of audio at `inputRateHz`); default 100. */
  readonly minCommitMs?: number;
  /**
   * The events of a response after its `response.created` (without `response_id`; the stub adds it), given the
   * session and the `response.create`; default: the spoken "I know N user texts."
   */
  readonly respond?: (session: StubSession, request: StubFrame, responseId: string) => Record<string, unknown>[];
  /** ms between `response.created` and the rest of a response (default 0: all at once). */
  readonly respondDelayMs?: number;
  /**
   * What a `response.cancel` does. `refuses` (default): it cancels the active response it names (or the active one),
   * and one of no active response is refused with `response_not_active` echoing its `event_id`. `reference`: as
   * reference/realtime-duplex-api.md says ("Cancel the active (or named) response; advances epoch"): every cancel
   * advances the session's `epoch` and cancels the active response, whatever it names; nothing is refused.
   * `ignores`: a cancel of no active response (or naming another) is ignored, without a word.
   */
  readonly cancel?: "refuses" | "reference" | "ignores";
  /**
   * Live sessions at most (default: no cap): a session beyond it is refused as the reference's duplex server refuses
   * one at `duplex_session.max_sessions` (`error{rate_limit_error, duplex_session_busy}` before any session.created,
   * then the socket closes 1013).
   */
  readonly maxSessions?: number;
  /**
   * Which revision of the duplex dialect the stub speaks (absent: neither's markers, as the stub always did):
   * - `incarnation` (reference/realtime-duplex-api.md as copied here): `session.created` and `session.resumed` carry
   *   `incarnation: 0`; a `session.resume` without that incarnation is refused `session_resume_expired`; the session
   *   takes the `session_id` the client's opening `session.update` names; `session.close` ends it `session_close`.
   * - `server_ids` (vLLM-Omni's newest, 09c32f18): the server allocates every id (`duplex-<32 hex>`, whatever the
   *   client names), no incarnation anywhere, a resume of an id it does not hold is `unknown_session`, a cancel is
   *   followed by `turn.event`, and `session.close` ends it `client_close`.
   */
  readonly revision?: "incarnation" | "server_ids";
}

export type StubFrame = { readonly type: string } & Record<string, unknown>;

/** One model-server session as the stub keeps it. */
export interface StubSession {
  readonly id: string;
  token: string;
  /** Every frame the session received, in order (across its sockets). */
  readonly frames: StubFrame[];
  /** The conversation: role and text of each item, in order. */
  readonly items: { readonly id: string; readonly role: string; readonly text: string; readonly type: string }[];
  /** Bytes of audio appended in all, and since the last commit. */
  appendedBytes: number;
  bufferBytes: number;
  commits: number;
  responses: number;
  active: string | null;
  /** The interruption fence: advanced by each cancel that `cancel: reference` takes. */
  epoch: number;
  /** Events sent with their seq (duplex). */
  readonly journal: { seq: number; text: string }[];
  socket: WebSocket | null;
  expiry: NodeJS.Timeout | null;
  closed: boolean;
}

/** What the stub does from now on (its faults): each applies to what comes after it is set. */
export interface StubBehaviour {
  /** Responses end `incomplete` (`max_output_tokens`) instead of completed. */
  readonly incomplete?: boolean;
  /** The shortest commit taken (ms). */
  readonly minCommitMs?: number;
  /** Every commit is refused with this code (the reference's `commit_aborted`, say); null: commits are taken. */
  readonly commitRefusal?: string | null;
}

export interface ModelServerStub {
  /** `ws://127.0.0.1:PORT/v1/realtime`. */
  readonly url: string;
  /** Changes what the stub does from now on. */
  behave(behaviour: StubBehaviour): void;
  /**
   * The next frame of `type` is handled, its answers journaled but never written, and its socket is cut: a link that
   * dies just after the model server took a frame (the client learns what came of it only from the replay).
   */
  cutAfter(type: string): void;
  readonly sessions: StubSession[];
  /** The user messages with text in a session's conversation. */
  userTexts(session: StubSession): number;
  /** Cuts every socket (no close frame); duplex sessions stay resumable for the grace. */
  drop(): void;
  /**
   * Sends every live session `session.closed{reason}` (with the newest revision's `event`), then closes its socket:
   * `disconnect` and `transport_error` leave the session resumable for the grace (the server lost the attachment),
   * any other reason ends it.
   */
  end(reason: string): void;
  /** `connection`: connections are refused; `http503`: upgrades are answered 503; null: served again. */
  refuse(mode: "connection" | "http503" | null): Promise<void>;
  close(): Promise<void>;
}

/** 24 kHz PCM16 of a quiet tone, `ms` long, base64. */
const toneBase64 = (ms: number): string => {
  const samples = new Int16Array((24000 * ms) / 1000);
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(3000 * Math.sin((2 * Math.PI * 220 * i) / 24000));
  return Buffer.from(samples.buffer).toString("base64");
};

const textOf = (item: Record<string, unknown>): string => {
  const content = Array.isArray(item.content) ? (item.content as Record<string, unknown>[]) : [];
  return content.map((c) => String(c.text ?? c.transcript ?? "")).join("");
};

export const startModelServerStub = async (options: StubOptions): Promise<ModelServerStub> => {
  const graceMs = options.graceMs ?? 30_000;
  let minCommitMs = options.minCommitMs ?? 100;
  let incomplete = false;
  let commitRefusal: string | null = null;
  let cutAfterType: string | null = null;
  /** The socket whose writes are swallowed while its last frame is handled. */
  let muted: WebSocket | null = null;
  const inputRate = options.dialect === "duplex" ? 16000 : 24000;
  const sessions: StubSession[] = [];
  const sockets = new Set<WebSocket>();
  let mode: "connection" | "http503" | null = null;
  const wss = new WebSocketServer({ noServer: true });
  let http: Server = createServer();
  let port = 0;

  const userTexts = (s: StubSession): number => s.items.filter((i) => i.role === "user" && i.text !== "").length;

  const defaultRespond = (s: StubSession): Record<string, unknown>[] => {
    const transcript = `I know ${userTexts(s)} user texts.`;
    const itemId = `it_resp_${s.responses}`;
    return [
      { type: "response.output_item.added", item: { type: "message", id: itemId, role: "assistant" } },
      ...(options.dialect === "duplex" ? [{ type: "response.speak" }] : []),
      { type: "response.output_audio.delta", item_id: itemId, delta: toneBase64(100) },
      { type: "response.output_audio_transcript.delta", item_id: itemId, delta: transcript },
      { type: "response.output_audio.done", item_id: itemId },
      {
        type: "response.done",
        response: incomplete
          ? { status: "incomplete", status_details: { type: "incomplete", reason: "max_output_tokens" }, output: [] }
          : { status: "completed", output: [] },
      },
    ];
  };

  /** Sends an event of `s` on its socket (journaled with a seq in the duplex dialect). */
  const send = (s: StubSession, event: Record<string, unknown>): void => {
    let body = event;
    if (options.dialect === "duplex") {
      const seq = (s.journal.at(-1)?.seq ?? 0) + 1;
      body = { ...event, server_event_seq: seq };
      s.journal.push({ seq, text: JSON.stringify(body) });
    }
    if (s.socket?.readyState === 1 && s.socket !== muted) s.socket.send(JSON.stringify(body));
  };

  const refuse = (s: StubSession, frame: StubFrame, code: string, message: string): void =>
    send(s, {
      type: "error",
      error: { type: "invalid_request_error", code, message, event_id: frame.event_id ?? null },
    });

  const handle = (s: StubSession, frame: StubFrame): void => {
    s.frames.push(frame);
    switch (frame.type) {
      case "session.update":
        send(s, { type: "session.updated", session: { id: s.id } });
        return;
      case "session.heartbeat":
        send(s, { type: "session.heartbeat_ack", session_id: s.id });
        return;
      case "input_audio_buffer.append": {
        const bytes = Buffer.from(String(frame.audio ?? ""), "base64").length;
        s.appendedBytes += bytes;
        s.bufferBytes += bytes;
        return;
      }
      case "input_audio_buffer.commit": {
        const ms = (s.bufferBytes / 2 / inputRate) * 1000;
        if (commitRefusal !== null) {
          s.bufferBytes = 0;
          refuse(s, frame, commitRefusal, `the commit was aborted (${commitRefusal})`);
          return;
        }
        if (ms < minCommitMs) {
          refuse(s, frame, "input_audio_buffer_commit_empty", `buffer too small: ${ms.toFixed(0)} ms`);
          return;
        }
        s.bufferBytes = 0;
        s.commits += 1;
        const id = `it_user_${s.commits}`;
        const transcript = `utterance ${s.commits}`;
        s.items.push({ id, role: "user", text: transcript, type: "message" });
        send(s, { type: "input_audio_buffer.committed", item_id: id });
        send(s, { type: "conversation.item.input_audio_transcription.completed", item_id: id, transcript });
        return;
      }
      case "conversation.item.create": {
        const item = (frame.item ?? {}) as Record<string, unknown>;
        const id = `it_${s.items.length + 1}`;
        s.items.push({ id, role: String(item.role ?? ""), text: textOf(item), type: String(item.type) });
        send(s, { type: "conversation.item.created", item: { ...item, id } });
        return;
      }
      case "input.text.append":
        s.items.push({ id: `it_${s.items.length + 1}`, role: "user", text: String(frame.text), type: "message" });
        return;
      case "response.create": {
        // One response at a time, as OpenAI's servers: another create while one is active is refused.
        if (s.active !== null) {
          refuse(s, frame, "response_already_active", `response ${s.active} is still active`);
          return;
        }
        s.responses += 1;
        const responseId = `resp_stub_${s.responses}`;
        s.active = responseId;
        send(s, { type: "response.created", response: { id: responseId, status: "in_progress" } });
        const events = (options.respond ?? defaultRespond)(s, frame, responseId);
        const rest = (): void => {
          for (const event of events) {
            if (s.active !== responseId) return;
            const done = event.type === "response.done";
            send(
              s,
              done
                ? { ...event, response: { id: responseId, ...(event.response as object) } }
                : { ...event, response_id: responseId },
            );
            if (done) s.active = null;
          }
        };
        if ((options.respondDelayMs ?? 0) > 0) setTimeout(rest, options.respondDelayMs);
        else rest();
        return;
      }
      case "response.cancel":
        if (options.cancel === "reference") s.epoch += 1;
        if (options.cancel === "reference" && s.active === null) return;
        if (
          options.cancel !== "reference" &&
          (s.active === null || (frame.response_id !== undefined && frame.response_id !== s.active))
        ) {
          if (options.cancel !== "ignores") refuse(s, frame, "response_not_active", "no such response is active");
          return;
        }
        send(s, { type: "response.done", response: { id: s.active, status: "cancelled" } });
        s.active = null;
        if (options.revision === "server_ids") {
          send(s, { type: "turn.event", session_id: s.id, event: "barge_in", turn_state: "idle", epoch: s.epoch });
        }
        return;
      case "session.close":
        s.closed = true;
        send(s, {
          type: "session.closed",
          session_id: s.id,
          reason: options.revision === "server_ids" ? "client_close" : "session_close",
        });
        s.socket?.close(1000);
        return;
      default:
        return;
    }
  };

  const incarnation = options.revision === "incarnation" ? { incarnation: 0 } : {};
  /** The id of a new session: the client's under the `incarnation` revision, the server's own under `server_ids`. */
  const idFor = (opening: StubFrame | null): string => {
    if (options.revision === "server_ids") return `duplex-${randomBytes(16).toString("hex")}`;
    const named = (opening?.session as { session_id?: unknown } | undefined)?.session_id;
    if (options.revision === "incarnation" && typeof named === "string") return named;
    return `sess_stub_${sessions.length + 1}`;
  };

  const open = (socket: WebSocket, opening: StubFrame | null = null): StubSession => {
    const s: StubSession = {
      id: idFor(opening),
      token: randomBytes(8).toString("hex"),
      frames: [],
      items: [],
      appendedBytes: 0,
      bufferBytes: 0,
      commits: 0,
      responses: 0,
      active: null,
      epoch: 0,
      journal: [],
      socket,
      expiry: null,
      closed: false,
    };
    sessions.push(s);
    socket.send(
      JSON.stringify({
        type: "session.created",
        session: { id: s.id },
        ...(options.dialect === "duplex" ? { resume_token: s.token, attachment_generation: 1, ...incarnation } : {}),
      }),
    );
    return s;
  };

  const resume = (socket: WebSocket, frame: StubFrame): StubSession | null => {
    const s = sessions.find((x) => x.id === frame.session_id && !x.closed);
    const fail = (code: string): null => {
      socket.send(JSON.stringify({ type: "error", error: { type: "invalid_request_error", code, message: code } }));
      socket.close(1008);
      return null;
    };
    if (s === undefined) return fail(options.revision === "server_ids" ? "unknown_session" : "session_resume_expired");
    if (options.revision === "incarnation" && frame.incarnation !== 0) return fail("session_resume_expired");
    if (frame.resume_token !== s.token) return fail("invalid_resume_token");
    s.frames.push(frame);
    if (s.expiry !== null) clearTimeout(s.expiry);
    s.expiry = null;
    s.socket?.terminate();
    s.socket = socket;
    s.token = randomBytes(8).toString("hex");
    socket.send(JSON.stringify({ type: "session.resumed", session_id: s.id, resume_token: s.token, ...incarnation }));
    const last = Number(frame.last_received_server_event_seq ?? 0);
    for (const entry of s.journal) if (entry.seq > last) socket.send(entry.text);
    return s;
  };

  wss.on("connection", (socket: WebSocket, request: IncomingMessage) => {
    sockets.add(socket);
    const resumeOnly = new URL(request.url ?? "/", "http://stub").searchParams.get("autostart") === "0";
    let session: StubSession | null = options.dialect === "openai" ? open(socket) : null;
    socket.on("message", (data) => {
      const frame = JSON.parse(data.toString()) as StubFrame;
      if (session === null) {
        if (resumeOnly && frame.type === "session.resume") session = resume(socket, frame);
        else if (!resumeOnly && frame.type === "session.update") {
          const live = sessions.filter((x) => !x.closed).length;
          if (options.maxSessions !== undefined && live >= options.maxSessions) {
            const message = `duplex session capacity reached (max_sessions=${options.maxSessions})`;
            const error = { type: "rate_limit_error", code: "duplex_session_busy", message };
            socket.send(JSON.stringify({ type: "error", error }));
            socket.close(1013);
            return;
          }
          session = open(socket, frame);
          session.frames.push(frame);
        }
        return;
      }
      const cut = frame.type === cutAfterType;
      if (cut) {
        cutAfterType = null;
        muted = socket;
      }
      handle(session, frame);
      if (cut) socket.terminate();
    });
    socket.on("close", () => {
      sockets.delete(socket);
      const s = session;
      if (s === null || s.socket !== socket || s.closed) return;
      s.socket = null;
      if (options.dialect === "openai") {
        s.closed = true;
        return;
      }
      s.expiry = setTimeout(() => {
        s.closed = true;
      }, graceMs);
    });
  });

  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer): void => {
    if (mode === "http503") {
      socket.end("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit("connection", ws, request));
  };

  const listen = (server: Server, on: number): Promise<number> =>
    new Promise((resolve) => {
      server.on("upgrade", onUpgrade);
      server.listen(on, "127.0.0.1", () => resolve((server.address() as { port: number }).port));
    });
  const stopListening = (server: Server): Promise<void> =>
    new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });

  port = await listen(http, 0);
  return {
    url: `ws://127.0.0.1:${port}/v1/realtime`,
    cutAfter(type) {
      cutAfterType = type;
    },
    behave(behaviour) {
      if (behaviour.incomplete !== undefined) incomplete = behaviour.incomplete;
      if (behaviour.minCommitMs !== undefined) minCommitMs = behaviour.minCommitMs;
      if (behaviour.commitRefusal !== undefined) commitRefusal = behaviour.commitRefusal;
    },
    sessions,
    userTexts,
    drop() {
      for (const socket of sockets) socket.terminate();
    },
    end(reason) {
      const attachmentLost = reason === "disconnect" || reason === "transport_error";
      for (const x of sessions.filter((y) => !y.closed && y.socket !== null)) {
        const event = { type: "session.closed", session_id: x.id, epoch: x.epoch, reason };
        send(x, { ...event, event });
        if (!attachmentLost) x.closed = true;
        x.socket?.close(1000);
      }
    },
    async refuse(next) {
      const listening = mode !== "connection";
      mode = next;
      if (next === "connection" && listening) await stopListening(http);
      if (next !== "connection" && !listening) {
        http = createServer();
        await listen(http, port);
      }
    },
    async close() {
      for (const s of sessions) if (s.expiry !== null) clearTimeout(s.expiry);
      for (const socket of sockets) socket.terminate();
      if (mode !== "connection") await stopListening(http);
      wss.close();
    },
  };
};
