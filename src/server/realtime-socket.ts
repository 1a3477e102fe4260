import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import type { RawData, WebSocket } from "ws";
import {
  applySessionPatch,
  DEFAULT_INPUT_RATE_HZ,
  defaultSessionConfig,
  ERROR_CODES,
  type ErrorCode,
  laneOf,
  reject,
  type SessionConfig,
} from "../domain/index.ts";
import type { AdmissionRefusal, Engine, SessionHost, SessionSink } from "../engine/index.ts";
import {
  type DecodedFrame,
  type Dialect,
  decodeClientFrame,
  handshakeError,
  MAX_FRAME_BYTES,
  renderForDialect,
  resyncRequired,
  sessionError,
  sessionReplaced,
} from "../protocol/index.ts";
import { frameEventId, peekFrame } from "./frame-peek.ts";

/**
 * Query parameters of the realtime endpoint (reference, "Endpoint and transport"): `model`, `autostart` (0: the
 * socket only resumes), `native_duplex` (deprecated alias `minicpmo45_native_duplex`). `duplex` (1 or 0) is
 * accepted; this server has one handler. `session_id` and `resume` are accepted and ignored: ids are the server's,
 * and a resume is the `session.resume` event.
 */
export interface RealtimeQuery {
  readonly model?: string;
  readonly autostart?: boolean;
  readonly nativeDuplex?: boolean;
}

const flag = (value: string | null): boolean | undefined =>
  value === null ? undefined : !["0", "false", "no", "off"].includes(value.toLowerCase());

/** Reads the query parameters of an upgrade URL. */
export const readRealtimeQuery = (params: URLSearchParams): RealtimeQuery => {
  const model = params.get("model");
  const autostart = flag(params.get("autostart"));
  const nativeDuplex = flag(params.get("native_duplex") ?? params.get("minicpmo45_native_duplex"));
  return {
    ...(model === null || model === "" ? {} : { model }),
    ...(autostart === undefined ? {} : { autostart }),
    ...(nativeDuplex === undefined ? {} : { nativeDuplex }),
  };
};

/** First message timeout (BEHAVIOUR.md, "Defaults and limits"): 10 s. */
export const FIRST_MESSAGE_TIMEOUT_MS = 10_000;
/**
 * Frames a socket may send while its `session.resume` takes the session over from another node (20 s of 100 ms
 * appends); each one beyond is answered with `input_backpressure` and dropped.
 */
const MAX_FRAMES_WHILE_ADOPTING = 200;

/**
 * Output buffer per socket (BEHAVIOUR.md, "Defaults and limits"): live server events written but not yet handed to
 * the kernel, in bytes of JSON text and in events. Beyond either the socket is detached with `output_backpressure`.
 */
export interface OutputLimits {
  readonly maxBytes: number;
  readonly maxEvents: number;
}

/** 2 MiB / 512 events. */
export const DEFAULT_OUTPUT_LIMITS: OutputLimits = { maxBytes: 2 * 1024 * 1024, maxEvents: 512 };

/**
 * How long a socket the server closes may take over its closing handshake before it is cut (ms): ws would wait 30 s,
 * reading (and buffering, up to a whole message) whatever the client still sends.
 */
const CLOSE_HANDSHAKE_MS = 1000;

/** Closes `socket` with `code` and `reason`, and cuts it if the client has not answered within CLOSE_HANDSHAKE_MS. */
const closeSocket = (socket: WebSocket, code: number | undefined, reason: string): void => {
  socket.close(code, reason);
  setTimeout(() => socket.terminate(), CLOSE_HANDSHAKE_MS).unref();
};

/**
 * Serves one WebSocket at /v1/realtime (DESIGN.md, src/server). The first valid client event either opens a
 * session (admission may refuse it: flat `resource_exhausted`, then the socket closes) or, when it is
 * `session.resume`, re-attaches a live one. Every later frame is decoded by the codec and handed to the session's
 * mailbox; server events arrive through the session's sink only after they are appended. A socket that drops
 * without `session.close` detaches its session; a socket superseded by a resume gets `session.replaced`, is
 * closed, and its later input is ignored. After `session.expired` the socket stays open and further frames are
 * answered with `unknown_session` (BEHAVIOUR.md scenario 13).
 */
export const serveRealtimeSocket = (
  socket: WebSocket,
  engine: Engine,
  log: Logger,
  options: {
    firstMessageTimeoutMs?: number;
    dialect?: Dialect;
    query?: RealtimeQuery;
    outputLimits?: OutputLimits;
    /** Who is at the other end, for the logs: the client's address (as the auth gate counts it) and user agent. */
    remote?: { readonly address: string; readonly userAgent: string | null };
    /**
     * The connection under the WebSocket, as the upgrade handed it to ws (`wss.handleUpgrade`): corked for the events
     * of one drain, through its public `cork`/`uncork`. Absent: each frame is written as ws sends it.
     */
    transport?: Pick<Duplex, "cork" | "uncork">;
  } = {},
): void => {
  const dialect = options.dialect ?? "ga";
  const outputLimits = options.outputLimits ?? DEFAULT_OUTPUT_LIMITS;
  let host: SessionHost | null = null;
  /** `detached`: the socket read too slowly and was let go of; the session goes on and waits for a resume. */
  let state: "new" | "bound" | "replaced" | "expired" | "closed" | "detached" = "new";
  /** False while the session this socket opened on connect has received nothing from the client. */
  let used = true;
  /** Admission refused the session on connect: the first frame may still resume one, or is refused. */
  let refused: AdmissionRefusal | null = null;
  /** Frames that arrived while a session was being taken over from another node, handled once it is held here. */
  let adopting: [RawData, boolean][] | null = null;
  /** The socket has been sent its first event (the session.created of the session opened on connect). */
  let delivered = false;
  /** The first-message timeout passed before that: config_timeout waits for it, so it never comes first. */
  let timedOutBeforeCreated = false;
  /** The first-message timeout passed while a resume was taking the session over from another node. */
  let timedOutWhileAdopting = false;
  /** Counts takeovers started; a takeover given up (past its deadline) is told apart from a later one by it. */
  let adoption = 0;
  let adoptionDeadline: NodeJS.Timeout | null = null;
  const firstMessageMs = options.firstMessageTimeoutMs ?? FIRST_MESSAGE_TIMEOUT_MS;
  const timeOut = (): void => {
    if (adopting !== null) {
      // The client's first event did arrive (a session.resume): its answer waits for the takeover, not the clock,
      // for one more timeout; a store that answers nothing in that time lets the socket go (its frames with it).
      timedOutWhileAdopting = true;
      adoptionDeadline ??= setTimeout(() => {
        if (adopting === null) return;
        adopting = null;
        adoption += 1;
        log.error({ address: options.remote?.address ?? null }, "takeover given up: the session log did not answer");
        refuse(
          "internal_error",
          "the session could not be taken over in time: its log did not answer; resume again",
          null,
        );
        // A session opened on connect and never used ends with the socket.
        if (host !== null && !used) engine.abandon(host, sink);
        state = "closed";
        closeSocket(socket, ERROR_CODES.internal_error.closeCode, "internal_error");
      }, firstMessageMs);
      return;
    }
    timedOutWhileAdopting = false;
    if (state === "bound" && !used && host !== null) {
      // Its session.created is not out yet (a slow store): the session exists, so the client hears of it first.
      if (!delivered) {
        timedOutBeforeCreated = true;
        return;
      }
      // A session opened on connect that heard nothing: it closes and holds no capacity.
      log.info({ sessionId: host.sessionId, code: "config_timeout" }, "session closed unused: no client event");
      socket.send(sessionError("config_timeout", "no client event arrived within the first message timeout"));
      engine.abandon(host, sink);
      state = "closed";
      closeSocket(socket, ERROR_CODES.config_timeout.closeCode, "config_timeout");
      return;
    }
    if (state !== "new") return;
    const code = refused === null ? "config_timeout" : refused.code;
    refuse(code, refused?.message ?? "no session.update arrived within the first message timeout", null);
    // Frames that cross the close open nothing.
    state = "closed";
    closeSocket(socket, ERROR_CODES[code].closeCode, code);
  };
  const firstMessage = setTimeout(timeOut, firstMessageMs);

  /** Live output written to the socket and not yet handed to the kernel (ws calls back once it is). */
  let unsentBytes = 0;
  let unsentEvents = 0;
  let checking = false;
  const written = (size: number) => (): void => {
    unsentBytes -= size;
    unsentEvents -= 1;
  };

  /**
   * A reader slower than the session's output (BEHAVIOUR.md, "Defaults and limits", ours): the socket is detached as
   * after a drop, so the session goes on within the disconnect grace and a resume replays what the reader missed.
   * The error and the closing frame go out beyond the limit (its reserve); a reader that does not take them within
   * a second is cut off, so the server holds no more than the limit for it.
   */
  const overflow = (): void => {
    const current = host;
    if (current === null) return;
    state = "detached";
    log.info(
      { sessionId: current.sessionId, code: "output_backpressure", unsentBytes, unsentEvents },
      "socket detached: the client reads too slowly",
    );
    engine.detach(current, sink, "output_backpressure");
    socket.send(
      sessionError(
        "output_backpressure",
        `more than ${outputLimits.maxBytes} bytes or ${outputLimits.maxEvents} events of output are waiting for this client; resume the session to receive what was missed`,
      ),
    );
    closeSocket(socket, ERROR_CODES.output_backpressure.closeCode, "output_backpressure");
  };

  /**
   * The events of one drain (an answer's audio and transcript deltas, a barge-in's burst) go to the kernel in one
   * write: the TCP socket under ws is corked until the end of this tick (ws writes each frame as it is sent).
   */
  const tcp = options.transport;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    tcp?.uncork();
  };
  const batchWrites = (): void => {
    if (corked || tcp === undefined) return;
    corked = true;
    tcp.cork();
    process.nextTick(uncork);
  };

  const sink: SessionSink = {
    send: (json, replayed = false) => {
      if (socket.readyState !== socket.OPEN || state === "detached") return;
      const text = renderForDialect(json, dialect);
      if (!delivered) {
        delivered = true;
        if (timedOutBeforeCreated) setImmediate(timeOut);
      }
      // A resume's replay is read from the log and already in memory: only live output counts against the limit.
      batchWrites();
      if (replayed) {
        socket.send(text);
        return;
      }
      unsentBytes += text.length;
      unsentEvents += 1;
      socket.send(text, written(text.length));
      // ws calls back on a later tick even for a write the kernel took at once, so a burst of events published in
      // one drain counts in full until then: the limit is checked once the burst is over.
      if (!checking && (unsentBytes > outputLimits.maxBytes || unsentEvents > outputLimits.maxEvents)) {
        checking = true;
        setImmediate(() => {
          checking = false;
          if (state !== "bound") return;
          if (unsentBytes > outputLimits.maxBytes || unsentEvents > outputLimits.maxEvents) overflow();
        });
      }
    },
    replaced: (generation) => {
      state = "replaced";
      if (socket.readyState !== socket.OPEN) return;
      socket.send(sessionReplaced(host?.sessionId ?? "", generation));
      closeSocket(socket, 1000, "session replaced");
    },
    failed: (code, message) => {
      // Nothing after the last durable event went out; the session waits, detached, for a resume from its log.
      log.error({ sessionId: host?.sessionId, code }, "socket let go: the session log failed");
      state = "detached";
      if (socket.readyState !== socket.OPEN) return;
      socket.send(sessionError(code, message));
      closeSocket(socket, ERROR_CODES[code].closeCode, code);
    },
    ended: (lastType, reason) => {
      // The engine logs the session's end (src/engine/lifecycle-log.ts), socket or not.
      if (lastType === "session.expired") {
        state = "expired";
        return;
      }
      state = "closed";
      if (socket.readyState !== socket.OPEN) return;
      if (reason === "runner_failed") closeSocket(socket, 1011, "model runner failed");
      // The server ran short of disk for the session's log: try again later (1013), as a refused admission says.
      else if (reason === "resource_exhausted")
        closeSocket(socket, ERROR_CODES.resource_exhausted.closeCode, "resource_exhausted");
      else closeSocket(socket, 1000, "session closed");
    },
  };

  /** Refuses a handshake (no session holds this socket yet): logs who and why, and tells the client. */
  const refuse = (code: ErrorCode, message: string, eventId: string | null, sessionId: string | null = null): void => {
    log.info({ code, sessionId, address: options.remote?.address ?? null }, "handshake refused");
    socket.send(handshakeError(code, message, eventId));
  };

  const bind = (bound: SessionHost): void => {
    host = bound;
    state = "bound";
    if (used) clearTimeout(firstMessage);
  };

  /** Opens a session for this socket; on a refusal (capacity), says so and closes the socket. */
  const open = (eventId: string | null): SessionHost | null => {
    const opened = engine.open({
      ...(options.query?.model === undefined ? {} : { model: options.query.model }),
      ...(options.query?.nativeDuplex === undefined ? {} : { nativeDuplex: options.query.nativeDuplex }),
    });
    if ("code" in opened) {
      refuse(opened.code, opened.message, eventId);
      closeSocket(socket, ERROR_CODES.resource_exhausted.closeCode, opened.code);
      return null;
    }
    opened.attach(sink);
    // Logged once the session's configuration is decided: its lane and profile are the log's.
    const created = opened.events$.subscribe((envelope) => {
      if (envelope.event.type !== "SessionCreated") return;
      created.unsubscribe();
      log.info(
        {
          sessionId: opened.sessionId,
          address: options.remote?.address ?? null,
          userAgent: options.remote?.userAgent ?? null,
          dialect,
          lane: laneOf(opened.current),
          model: opened.current.config.model,
          profile: opened.current.capabilities.profile ?? null,
        },
        "session opened",
      );
    });
    return opened;
  };

  /**
   * `session.resume` of a session this node does not hold, with other nodes on the store (issue 22, part 4): the
   * session is taken over first (`engine.adopt`), then resumed as any other; the socket's later frames wait.
   */
  const resume = (frame: Extract<DecodedFrame, { type: "session.resume" }>): void => {
    const held = engine.get(frame.sessionId);
    if (engine.nodeId === null || (held !== undefined && !held.isFenced)) {
      resumeHeld(frame);
      return;
    }
    adopting = [];
    adoption += 1;
    const mine = adoption;
    void engine
      .adopt(frame.sessionId, frame.resumeToken)
      .then(
        (adopted) => {
          // Given up past its deadline: the session, taken over or not, waits detached for the client's next resume.
          if (mine !== adoption) return;
          const waiting = adopting ?? [];
          adopting = null;
          // The client went away meanwhile: the session taken over stays detached, its grace running.
          if (socket.readyState !== socket.OPEN) return;
          // adopt refuses with session_resume_expired or invalid_resume_token only (never a journal code).
          if (
            "code" in adopted &&
            (adopted.code === "session_resume_expired" || adopted.code === "invalid_resume_token")
          )
            refuse(adopted.code, adopted.message, frame.eventId, frame.sessionId);
          else resumeHeld(frame);
          for (const [data, isBinary] of waiting) onMessage(data, isBinary);
        },
        (error: unknown) => {
          if (mine !== adoption) return;
          adopting = null;
          log.error({ err: error, sessionId: frame.sessionId }, "takeover failed: the session log could not be read");
          refuse("internal_error", "the session could not be taken over: its log could not be read", frame.eventId);
        },
      )
      .catch((error: unknown) => {
        log.error({ err: error, sessionId: frame.sessionId }, "a resume's takeover ended in an error");
      })
      .finally(() => {
        if (mine !== adoption) return;
        if (adoptionDeadline !== null) clearTimeout(adoptionDeadline);
        adoptionDeadline = null;
        // A refused resume after the timeout leaves a socket with nothing: it ends as the timeout says.
        if (adopting === null && timedOutWhileAdopting && socket.readyState === socket.OPEN) timeOut();
      });
  };

  /** `session.resume` as the socket's first client event; a session opened on connect and unused is abandoned. */
  const resumeHeld = (frame: Extract<DecodedFrame, { type: "session.resume" }>): void => {
    const resumed = engine.resume(frame, sink);
    if ("code" in resumed) {
      if (resumed.code === "journal_gap" || resumed.code === "journal_overflow") {
        log.info(
          { sessionId: frame.sessionId, code: resumed.code, address: options.remote?.address ?? null },
          "resume refused",
        );
        socket.send(resyncRequired(frame.sessionId, resumed.code));
      } else refuse(resumed.code, resumed.message, frame.eventId, frame.sessionId);
      return;
    }
    if (host !== null) {
      engine.abandon(host, sink);
      log.info({ sessionId: host.sessionId }, "session opened on connect closed unused: the socket resumed another");
    }
    used = true;
    clearTimeout(firstMessage);
    bind(resumed);
    // At debug: the engine's "session resumed" line is the lifecycle event at info.
    log.debug(
      { sessionId: resumed.sessionId, generation: resumed.generation, address: options.remote?.address ?? null },
      "socket attached: resume",
    );
  };

  const handshake = (frame: DecodedFrame): void => {
    if (frame.type === "invalid") {
      const code =
        frame.eventType === "session.resume" && frame.code === "bad_event" ? "invalid_session_resume" : frame.code;
      refuse(code, frame.message, frame.eventId);
      return;
    }
    if (frame.type === "session.resume") {
      resume(frame);
      return;
    }
    if (engine.capabilities.refAudio === "required") {
      // The model needs its voice clip before anything else (BEHAVIOUR.md, "Identity"): only a first session.update
      // that carries ref_audio, and that the session would accept, opens it, as in the seed. The socket stays open
      // for that update.
      const refusal =
        frame.type === "session.update" && frame.patch.refAudio
          ? applySessionPatch(defaultSessionConfig(engine.model, engine.capabilities), frame.patch, engine.capabilities)
          : reject(
              "ref_audio_required",
              `${engine.model} needs a voice clip: send session.update with session.ref_audio (a data:audio/wav;base64,... URL) first`,
            );
      if ("code" in refusal) {
        refuse(refusal.code, refusal.message, frame.eventId);
        return;
      }
    }
    if (options.query?.autostart === false) {
      refuse("invalid_session_resume", "this connection was opened with autostart=0: send session.resume first", null);
      return;
    }
    const opened = open(frame.eventId);
    if (opened === null) return;
    bind(opened);
    engine.touch(opened);
    void opened.submit(frame);
  };

  // A session opens when the socket opens, with the deployment's defaults, and session.created is sent at once, as
  // OpenAI's servers do (BEHAVIOUR.md, "Identity", ours) - unless the profile needs ref_audio first or the socket
  // is resume-only (autostart=0): then the first client event is the handshake.
  const openOnConnect = (): void => {
    // A first client event that came first opened (or resumed) the socket's session already.
    if (state !== "new" || socket.readyState !== socket.OPEN) return;
    // At capacity a first session.resume may still take its detached session back; anything else is refused.
    refused = engine.admission();
    if (refused === null) {
      const opened = open(null);
      if (opened !== null) {
        used = false;
        bind(opened);
      }
    }
  };
  // After the upgrade response has gone out on its own: a client that attaches its message handler once the socket
  // is open (LiveKit's plugin does) must not find session.created in the same read as the 101.
  if (engine.capabilities.refAudio !== "required" && options.query?.autostart !== false) setImmediate(openOnConnect);

  socket.on("message", (data, isBinary) => {
    if (adopting === null) onMessage(data, isBinary);
    else if (adopting.length < MAX_FRAMES_WHILE_ADOPTING) adopting.push([data, isBinary]);
    else
      socket.send(
        handshakeError(
          "input_backpressure",
          `more than ${MAX_FRAMES_WHILE_ADOPTING} frames arrived while the resumed session was being taken over; this one was dropped`,
          isBinary ? null : frameEventId(data),
        ),
      );
  });

  function onMessage(data: RawData, isBinary: boolean): void {
    const { text, bytes, kind } = peekFrame(data, isBinary);
    // A binary frame is refused, but its error still echoes the event_id its bytes carry (issue 10, part 9).
    const binaryEventId = isBinary ? frameEventId(data) : null;
    // Frames of a session are decoded in its mailbox, with the configuration the inputs before them left.
    const decode = (config: SessionConfig | null): DecodedFrame =>
      text === null
        ? {
            type: "invalid",
            eventId: binaryEventId,
            code: "invalid_json",
            message: "binary frames are not accepted; send one JSON object per text frame",
            param: null,
            eventType: null,
          }
        : decodeClientFrame(text, bytes, {
            inputRateHz: config?.inputAudio.rate ?? DEFAULT_INPUT_RATE_HZ,
            inputAudio: config?.inputAudio,
          });
    switch (state) {
      case "new":
        handshake(decode(null));
        return;
      case "bound":
        if (host === null) return;
        if (!used) {
          // The socket's first client event may resume another session instead of using the one opened on connect;
          // after a refused resume the session stays unused, and the socket may try again.
          if (kind === "resume") {
            const frame = decode(null);
            if (frame.type === "session.resume" || frame.type === "invalid") {
              handshake(frame);
              return;
            }
          }
          used = true;
          clearTimeout(firstMessage);
        }
        engine.touch(host);
        void host.submit(decode, {
          // A frame over the maximum is refused as event_too_large and buffers nothing: it costs nothing.
          bytes: text === null || bytes > MAX_FRAME_BYTES ? 0 : bytes,
          turn: kind === "commit",
          // Every other frame (binary ones included) is counted against the event rate before it is decoded.
          sniffed: kind === "append" ? "append" : "event",
        });
        return;
      case "expired":
        socket.send(handshakeError("unknown_session", `session ${host?.sessionId ?? ""} has expired`));
        return;
      case "replaced":
      case "closed":
      case "detached":
        return;
      default: {
        const unhandled: never = state;
        throw new Error(`unhandled socket state ${String(unhandled)}`);
      }
    }
  }

  socket.on("close", (code, reason) => {
    clearTimeout(firstMessage);
    const current = host as SessionHost | null;
    if (current !== null && state === "bound" && !current.isClosed) {
      if (!used) {
        // Nothing of the client reached it: there is nothing to resume.
        log.info({ sessionId: current.sessionId }, "session closed unused: the socket closed first");
        engine.abandon(current, sink);
        return;
      }
      // While bound, this server closes the socket only at shutdown (1012): a 1000 is the client's own close, the
      // end a stock OpenAI client means (BEHAVIOUR.md, "Resume", ours). Every other end detaches.
      if (code === 1000) {
        engine.closedByClient(current, sink);
        return;
      }
      log.info(
        { sessionId: current.sessionId, closeCode: code, closeReason: reason.toString() },
        code === 1006 ? "socket dropped; session detached" : "socket closed; session detached",
      );
      engine.detach(current, sink);
    }
  });
  socket.on("error", (error) => log.warn({ err: error }, "socket error"));
};
