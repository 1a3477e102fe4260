import type { Logger } from "pino";
import type { Subscription } from "rxjs";
import type { WebSocket } from "ws";
import { ERROR_CODES } from "../domain/index.ts";
import type { Engine, SessionHost } from "../engine/index.ts";
import {
  type DecodedFrame,
  decodeClientFrame,
  handshakeError,
  MAX_FRAME_BYTES,
  REDACTED_RESUME_TOKEN,
} from "../protocol/index.ts";

/** First message timeout (BEHAVIOUR.md, "Defaults and limits"): 10 s. */
export const FIRST_MESSAGE_TIMEOUT_MS = 10_000;

const REDACTED_JSON = JSON.stringify(REDACTED_RESUME_TOKEN);

/** The first `n` bytes of a frame as text (for sniffing the event_id of a frame too large to parse). */
const head = (data: Buffer | ArrayBuffer | Buffer[], n: number): string =>
  (Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data))
    .subarray(0, n)
    .toString();

/**
 * Serves one WebSocket at /v1/realtime (DESIGN.md, src/server): the first valid client event opens a session
 * (admission may refuse it: flat `resource_exhausted` error, then the socket closes); every frame is decoded by the
 * codec and handed to the session's mailbox; server events go out only after they are appended. A socket that
 * drops without `session.close` detaches the session instead of closing it.
 */
export const serveRealtimeSocket = (
  socket: WebSocket,
  engine: Engine,
  log: Logger,
  options: { firstMessageTimeoutMs?: number } = {},
): void => {
  let host: SessionHost | null = null;
  let subscription: Subscription | null = null;
  const firstMessage = setTimeout(() => {
    if (host !== null) return;
    socket.send(handshakeError("config_timeout", "no session.update arrived within the first message timeout"));
    socket.close(ERROR_CODES.config_timeout.closeCode, "config_timeout");
  }, options.firstMessageTimeoutMs ?? FIRST_MESSAGE_TIMEOUT_MS);

  const attach = (opened: SessionHost): void => {
    host = opened;
    clearTimeout(firstMessage);
    const token = opened.resumeToken === null ? "null" : JSON.stringify(opened.resumeToken);
    subscription = opened.wire$.subscribe({
      next: (event) => {
        if (socket.readyState !== socket.OPEN) return;
        socket.send(event.type === "session.created" ? event.json.replace(REDACTED_JSON, token) : event.json);
      },
      complete: () => {
        if (socket.readyState === socket.OPEN) socket.close(1000, "session closed");
      },
    });
    log.info({ sessionId: opened.sessionId }, "session opened");
  };

  socket.on("message", (data, isBinary) => {
    const bytes = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : (data as Buffer).byteLength;
    const inputRateHz = host?.current.config.inputAudio.rate ?? engine.capabilities.inputSampleRateHz;
    const frame: DecodedFrame = isBinary
      ? {
          type: "invalid",
          eventId: null,
          code: "invalid_json",
          message: "binary frames are not accepted; send one JSON object per text frame",
          param: null,
          eventType: null,
        }
      : decodeClientFrame(bytes > MAX_FRAME_BYTES ? head(data, 2048) : data.toString(), bytes, { inputRateHz });
    if (host === null) {
      if (frame.type === "invalid") {
        socket.send(handshakeError(frame.code, frame.message));
        return;
      }
      const opened = engine.open();
      if ("code" in opened) {
        socket.send(handshakeError(opened.code, opened.message));
        socket.close(ERROR_CODES.resource_exhausted.closeCode, opened.code);
        return;
      }
      attach(opened);
    }
    const current = host as SessionHost | null;
    if (current === null) return;
    engine.touch(current);
    void current.submit(frame);
  });

  socket.on("close", () => {
    clearTimeout(firstMessage);
    subscription?.unsubscribe();
    const current = host as SessionHost | null;
    if (current !== null && !current.isClosed) {
      log.info({ sessionId: current.sessionId }, "socket dropped; session detached");
      engine.detach(current);
    }
  });
  socket.on("error", (error) => log.warn({ err: error }, "socket error"));
};
