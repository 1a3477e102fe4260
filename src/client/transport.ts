import { WebSocket } from "ws";

/**
 * One connection of a DuplexClient: text frames in and out, and its end. A DuplexClient makes a new one for each
 * (re)connection through a `Connect` factory, so tests and benchmarks can put their own transport in (reference,
 * "Using DuplexClient": the `connect` option).
 */
export interface Transport {
  /** Sends one text frame. Frames sent after the transport closed are dropped. */
  send(text: string): void;
  /** Closes with a closing handshake (`code` 1000 by default). */
  close(code?: number, reason?: string): void;
  /** Drops the connection without a closing handshake, as a network failure would. */
  terminate(): void;
  /** Sets the listener of text frames; frames received before it was set are handed to it at once, in order. */
  onMessage(listener: (text: string) => void): void;
  /** Sets the listener called once when the connection is closed, with the WebSocket close code (1006: dropped). */
  onClose(listener: (code: number, reason: string) => void): void;
}

/**
 * Opens a transport to `url`. @throws what the transport raised when the connection cannot be made (for `ws`, a
 * Node.js socket error with `code` ECONNREFUSED, ..., or "Unexpected server response: STATUS").
 */
export type Connect = (url: string) => Promise<Transport>;

/** A `Connect` over `ws` (ws: or wss:); `headers` go on the upgrade request (e.g. `Authorization: Bearer KEY`). */
export const wsConnect =
  (headers: Record<string, string> = {}): Connect =>
  (url) =>
    new Promise((resolve, reject) => {
      const socket = new WebSocket(url, { headers });
      const early: string[] = [];
      let onMessage: ((text: string) => void) | null = null;
      let onClose: ((code: number, reason: string) => void) | null = null;
      let closed: { code: number; reason: string } | null = null;
      socket.on("message", (data) => {
        const text = data.toString();
        if (onMessage === null) early.push(text);
        else onMessage(text);
      });
      socket.once("close", (code, reason) => {
        closed = { code, reason: reason.toString() };
        onClose?.(closed.code, closed.reason);
      });
      // Before open, an error is the connection's failure; after, errors end in a close event, which is what the
      // client reacts to.
      let opened = false;
      socket.on("error", (error) => {
        if (!opened) reject(error);
      });
      socket.once("open", () => {
        opened = true;
        resolve({
          send: (text) => {
            if (socket.readyState === WebSocket.OPEN) socket.send(text);
          },
          close: (code = 1000, reason = "") => {
            if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING)
              socket.close(code, reason);
          },
          terminate: () => socket.terminate(),
          onMessage: (listener) => {
            onMessage = listener;
            for (const text of early.splice(0)) listener(text);
          },
          onClose: (listener) => {
            onClose = listener;
            if (closed !== null) listener(closed.code, closed.reason);
          },
        });
      });
    });
