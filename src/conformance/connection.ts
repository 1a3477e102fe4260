import { RealtimeClient, type ServerEvent } from "../client/index.ts";

/**
 * The pseudo-event a connection records when its socket closes: `{type: "socket.closed", code, reason}`. It is no
 * server event (coverage ignores it); scenarios expect it like any other.
 */
export const SOCKET_CLOSED = "socket.closed";

/** An event received on a connection, with its receive time (ms since the scenario started). */
export interface Observed {
  readonly event: ServerEvent;
  readonly atMs: number;
}

/**
 * One named client connection of a scenario: the project's RealtimeClient, every event it received on its
 * current socket (plus `socket.closed`), and the cursor that `expect` steps move. `maxSeq` (the highest
 * `server_event_seq` received) survives a reconnect, so that a resume can name it.
 */
export interface Connection {
  readonly name: string;
  client: RealtimeClient | null;
  events: Observed[];
  cursor: number;
  maxSeq: number;
  /** True while the socket is open. */
  open: boolean;
}

/**
 * Wakes waiters whenever any connection of a scenario receives something, and lets a step wait for a condition
 * over the received events with a deadline.
 */
export interface Waiter {
  notify(): void;
  /**
   * Evaluates `check` now and after every event until it returns something other than undefined, or until
   * `timeoutMs` passed (then resolves undefined after one last check).
   */
  until<T>(check: () => T | undefined, timeoutMs: number): Promise<T | undefined>;
}

/** A waiter (see {@link Waiter}). */
export const createWaiter = (): Waiter => {
  const wakers = new Set<() => void>();
  return {
    notify() {
      for (const wake of [...wakers]) wake();
    },
    until<T>(check: () => T | undefined, timeoutMs: number): Promise<T | undefined> {
      return new Promise((resolve, reject) => {
        let timer: NodeJS.Timeout | undefined;
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          wakers.delete(wake);
          settle();
        };
        // A check that throws (a pattern written wrongly) rejects the wait instead of throwing in a socket handler.
        const attempt = (last: boolean): boolean => {
          try {
            const value = check();
            if (value === undefined && !last) return false;
            finish(() => resolve(value));
          } catch (error) {
            finish(() => reject(error));
          }
          return true;
        };
        const wake = () => {
          attempt(false);
        };
        if (attempt(false)) return;
        timer = setTimeout(() => attempt(true), timeoutMs);
        wakers.add(wake);
      });
    },
  };
};

/**
 * Opens the socket of `conn` at `url` (a fresh events list and cursor) and records what arrives.
 * @throws the socket's error when the connection fails.
 */
export const openSocket = async (
  conn: Connection,
  url: string,
  startedAt: number,
  waiter: Waiter,
  headers: Record<string, string>,
): Promise<void> => {
  const client = await RealtimeClient.connect(url, { headers });
  const events: Observed[] = [];
  conn.client = client;
  conn.events = events;
  conn.cursor = 0;
  conn.open = true;
  const record = (event: ServerEvent, at: number) => {
    const seq = event.server_event_seq;
    if (typeof seq === "number" && seq > conn.maxSeq) conn.maxSeq = seq;
    events.push({ event, atMs: at - startedAt });
    waiter.notify();
  };
  // A server that opens the session on connect sends session.created before the connection resolves.
  for (const r of client.received) record(r.event, r.at);
  client.onEvent(record);
  void client.closed.then(({ code, reason }) => {
    events.push({ event: { type: SOCKET_CLOSED, code, reason }, atMs: performance.now() - startedAt });
    if (conn.client === client) conn.open = false;
    waiter.notify();
  });
};
