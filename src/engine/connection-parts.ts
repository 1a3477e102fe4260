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
import {
  type DecodedFrame,
  decodeClientFrame,
  MAX_FRAME_BYTES,
  type PeekedFrame,
  type RealtimeQuery,
} from "../protocol/index.ts";
import type { Engine } from "./engine-api.ts";
import type { EngineLog } from "./lifecycle-log.ts";
import type { InputCost } from "./mailbox.ts";
import type { SessionHost } from "./session-host.ts";
import type { Scheduler } from "./timers.ts";

/** The parts of a connection (src/engine/connection.ts): its port, its options, its states, a frame's cost. */

/** First message timeout (BEHAVIOUR.md, "Defaults and limits"): 10 s. */
export const FIRST_MESSAGE_TIMEOUT_MS = 10_000;

/**
 * Where a connection writes (the socket writer, src/server/realtime/socket-writer.ts; a recording port in tests).
 * `send`: a frame of this connection's own (a handshake error, `session.replaced`), already in wire form and not
 * counted against the output limit; `write`: a session's server event (canonical JSON, rendered in the client's
 * dialect by the port; `replayed`: re-sent by a resume, not counted); `close`: the closing handshake, then the cut.
 */
export interface ConnectionPort {
  isOpen(): boolean;
  send(text: string): void;
  write(json: string, replayed: boolean): void;
  close(code: number | undefined, reason: string): void;
}

/** The output a port holds for a slow reader when it passed its limit (bytes of JSON text, events). */
export interface OutputOverflow {
  readonly unsentBytes: number;
  readonly unsentEvents: number;
  readonly maxBytes: number;
  readonly maxEvents: number;
}

/** What a connection is made with; every part optional. */
export interface ConnectionOptions {
  /** The first message timeout (ms); default `FIRST_MESSAGE_TIMEOUT_MS`. */
  readonly firstMessageTimeoutMs?: number;
  readonly query?: RealtimeQuery;
  /** Who is at the other end, for the logs: the client's address (as the auth gate counts it) and user agent. */
  readonly remote?: { readonly address: string; readonly userAgent: string | null };
  /** The client's dialect (`ga` or `beta`), for the `session opened` line. */
  readonly dialect?: string;
  /** The first-message and takeover timers; default the real clock. */
  readonly scheduler?: Scheduler;
  /** Runs `fn` once the current I/O callbacks are done (`setImmediate` by default). */
  readonly defer?: (fn: () => void) => void;
}

/**
 * Where a connection stands: `new` (no session yet), `bound` (a session holds it), `replaced` (a resume elsewhere
 * took its session), `expired` (its session expired: frames are answered `unknown_session`), `closed`, `detached`
 * (it read too slowly, or the log failed: the session goes on and waits for a resume).
 */
export type ConnectionState = "new" | "bound" | "replaced" | "expired" | "closed" | "detached";

/**
 * What a frame costs against the session's input limits, as peeked: a frame over the maximum is refused as
 * `event_too_large` and buffers nothing; a commit is a turn; every frame that does not look like an append (binary
 * ones included) is counted against the event rate before it is decoded.
 */
export const costOf = (frame: Pick<PeekedFrame, "text" | "bytes" | "kind">): InputCost => ({
  bytes: frame.text === null || frame.bytes > MAX_FRAME_BYTES ? 0 : frame.bytes,
  turn: frame.kind === "commit",
  sniffed: frame.kind === "append" ? "append" : "event",
});

/** `frame` decoded against `config` (null: the defaults, before a session holds the connection). */
export const decodeWith =
  (frame: PeekedFrame) =>
  (config: SessionConfig | null): DecodedFrame =>
    frame.text === null
      ? {
          type: "invalid",
          // A binary frame is refused, but its error still echoes the event_id its bytes carry (issue 10, part 9).
          eventId: frame.eventId(),
          code: "invalid_json",
          message: "binary frames are not accepted; send one JSON object per text frame",
          param: null,
          eventType: null,
        }
      : decodeClientFrame(frame.text, frame.bytes, {
          inputRateHz: config?.inputAudio.rate ?? DEFAULT_INPUT_RATE_HZ,
          inputAudio: config?.inputAudio,
        });

/**
 * A model that needs its voice clip before anything else (BEHAVIOUR.md, "Identity"): only a first session.update
 * that carries ref_audio, and that the session would accept, opens it, as in the seed; the connection stays open
 * for that update. Null: `frame` may open the session (or the model needs no clip).
 */
export const refAudioRefusal = (
  engine: Pick<Engine, "capabilities" | "model">,
  frame: DecodedFrame,
): { code: ErrorCode; message: string } | null => {
  if (engine.capabilities.refAudio !== "required") return null;
  const checked =
    frame.type === "session.update" && frame.patch.refAudio
      ? applySessionPatch(defaultSessionConfig(engine.model, engine.capabilities), frame.patch, engine.capabilities)
      : reject(
          "ref_audio_required",
          `${engine.model} needs a voice clip: send session.update with session.ref_audio (a data:audio/wav;base64,... URL) first`,
        );
  return "code" in checked ? checked : null;
};

/**
 * Logs `session opened` (info) once the session's configuration is decided, so its lane and profile are the log's:
 * who opened it (address, user agent), the dialect, lane, model and profile.
 */
export const logWhenCreated = (
  log: EngineLog,
  opened: SessionHost,
  client: { readonly address?: string; readonly userAgent?: string | null; readonly dialect: string },
): void => {
  const created = opened.events$.subscribe((envelope) => {
    if (envelope.event.type !== "SessionCreated") return;
    created.unsubscribe();
    log.info(
      {
        sessionId: opened.sessionId,
        address: client.address ?? null,
        userAgent: client.userAgent ?? null,
        dialect: client.dialect,
        lane: laneOf(opened.current),
        model: opened.current.config.model,
        profile: opened.current.capabilities.profile ?? null,
      },
      "session opened",
    );
  });
};

/**
 * How a connection closes when its session ends (`reason`: the session's close reason): 1011 when the model runner
 * failed; 1013 (try again later, as a refused admission says) when the server ran short of disk for the session's
 * log or the model server refused the session at its capacity (`model_busy`); 1000 otherwise.
 */
export const closeOfEnd = (reason: string | null): { code: number | undefined; reason: string } =>
  reason === "runner_failed"
    ? { code: 1011, reason: "model runner failed" }
    : reason === "resource_exhausted"
      ? { code: ERROR_CODES.resource_exhausted.closeCode, reason: "resource_exhausted" }
      : reason === "model_busy"
        ? { code: ERROR_CODES.duplex_session_busy.closeCode, reason: "duplex_session_busy" }
        : { code: 1000, reason: "session closed" };
