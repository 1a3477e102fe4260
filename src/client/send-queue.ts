import { DuplexConnectionError } from "./errors.ts";

/**
 * The client frames a ResumableConnection keeps while it reconnects (reference/realtime-duplex-api.md, "Reconnect
 * and resume"): sent, in order, once `session.resumed` came; bounded by `maxBytes` (the frames' JSON text length,
 * `maxQueuedBytes` of ConnectionOptions, 16 MiB by default).
 */
export interface SendQueue {
  /**
   * Keeps `text` for after the resume.
   * @throws DuplexConnectionError `send_queue_full` when it would take the queue past `maxBytes`.
   */
  push(text: string): void;
  /** Sends every kept frame with `send`, in order, and empties the queue. */
  flush(send: (text: string) => void): void;
  /** Drops every kept frame (the link has ended). */
  clear(): void;
}

/** An empty queue of at most `maxBytes` of frames. */
export const createSendQueue = (maxBytes: number): SendQueue => {
  const frames: string[] = [];
  let bytes = 0;
  return {
    push(text) {
      if (bytes + text.length > maxBytes)
        throw new DuplexConnectionError("send_queue_full", `more than maxQueuedBytes wait for the reconnect`);
      frames.push(text);
      bytes += text.length;
    },
    flush(send) {
      for (const text of frames.splice(0)) send(text);
      bytes = 0;
    },
    clear() {
      frames.length = 0;
    },
  };
};
