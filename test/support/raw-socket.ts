import WebSocket from "ws";
import type { ServerEvent } from "../../src/client/index.ts";

/**
 * A bare client socket for tests that send what RealtimeClient does not (binary frames, frames past the WebSocket
 * layer's maximum).
 */

/** One socket's view: every server event in arrival order, the close once it comes, and socket errors after the open. */
export interface Peer {
  readonly ws: WebSocket;
  readonly received: ServerEvent[];
  readonly errors: Error[];
  readonly closed: Promise<{ code: number; reason: string }>;
  /** Resolves with the first event at index `since` or later that matches; rejects after `timeoutMs` or a close. */
  waitFor(match: (e: ServerEvent) => boolean, since: number, timeoutMs?: number): Promise<ServerEvent>;
}

/** Connects to `url`; a socket error after the open (a reset under a frame too large) is only recorded. */
export const connectRaw = (url: string): Promise<Peer> =>
  new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const received: ServerEvent[] = [];
    const errors: Error[] = [];
    let opened = false;
    const waiters = new Set<() => void>();
    ws.on("message", (data) => {
      received.push(JSON.parse(String(data)) as ServerEvent);
      for (const check of [...waiters]) check();
    });
    const closed = new Promise<{ code: number; reason: string }>((done) =>
      ws.once("close", (code, reason) => {
        done({ code, reason: String(reason) });
        for (const check of [...waiters]) check();
      }),
    );
    const waitFor = (match: (e: ServerEvent) => boolean, since: number, timeoutMs = 60_000): Promise<ServerEvent> =>
      new Promise((found, fail) => {
        let next = since;
        const check = (): void => {
          for (; next < received.length; next += 1) {
            const event = received[next] as ServerEvent;
            if (match(event)) {
              waiters.delete(check);
              clearTimeout(timer);
              found(event);
              return;
            }
          }
          if (ws.readyState === WebSocket.CLOSED) {
            waiters.delete(check);
            clearTimeout(timer);
            fail(new Error(`the socket closed; last received: ${received.slice(-3).map((e) => e.type)}`));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          fail(new Error(`no matching event within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    ws.once("open", () => {
      opened = true;
      resolve({ ws, received, errors, closed, waitFor });
    });
    ws.on("error", (error) => (opened ? errors.push(error) : reject(error)));
  });
