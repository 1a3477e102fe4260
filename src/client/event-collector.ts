/** A server event as received: its JSON object. */
export type ServerEvent = { readonly type: string } & Readonly<Record<string, unknown>>;

/** Thrown by `waitFor` when no matching event arrived in time; `received` names the last types seen. */
export class WaitTimeoutError extends Error {
  readonly code = "wait_timeout";
  constructor(what: string, timeoutMs: number, received: readonly string[]) {
    super(`no ${what} within ${timeoutMs} ms; last received: ${received.slice(-8).join(", ") || "(nothing)"}`);
    this.name = "WaitTimeoutError";
  }
}

/** One collected event and when it arrived (ms, `performance.now()` clock). */
export interface CollectedEvent {
  readonly event: ServerEvent;
  readonly at: number;
}

/**
 * Every event a client delivered, in the order delivered, with wait-for helpers (reference/realtime-duplex-api.md,
 * "Measure latency": EventCollector). A DuplexClient fills its own (`client.events`); `push` fills one by hand.
 */
export interface EventCollector {
  /** Everything collected, in order. Read-only: the collector owns it. */
  readonly received: readonly CollectedEvent[];
  /** Adds an event (`at` defaults to now) and wakes the waits it matches. */
  push(event: ServerEvent, at?: number): void;
  /** The events, in order. */
  events(): ServerEvent[];
  /** Their types, in order. */
  types(): string[];
  /** How many events of `type` were collected. */
  count(type: string): number;
  /** The `error` events, in order. */
  errors(): ServerEvent[];
  /**
   * The PCM16 little-endian bytes (not samples) of every `response.output_audio.delta` of `responseId`, in order
   * (24 kHz mono on this server: 48 bytes per ms).
   */
  audioBytes(responseId: string): Uint8Array;
  /**
   * Resolves with the first event collected at index `since` or later (default: from now on) of type `type`, or
   * matching the predicate.
   * @throws WaitTimeoutError after `timeoutMs` (default 10 000 ms); the collector's end error (see `end`) when the
   *   collector ends first.
   */
  waitFor(
    type: string | ((event: ServerEvent) => boolean),
    options?: { timeoutMs?: number; since?: number },
  ): Promise<ServerEvent>;
  /** Ends the collector: pending and later waits that find nothing collected reject with `error`. */
  end(error: Error): void;
}

/** A new, empty EventCollector. */
export const createEventCollector = (): EventCollector => {
  const received: CollectedEvent[] = [];
  const waiters = new Set<{
    match: (e: ServerEvent) => boolean;
    resolve: (e: ServerEvent) => void;
    reject: (e: Error) => void;
  }>();
  let ended: Error | null = null;

  const push = (event: ServerEvent, at = performance.now()): void => {
    received.push({ event, at });
    for (const waiter of [...waiters]) {
      if (waiter.match(event)) {
        waiters.delete(waiter);
        waiter.resolve(event);
      }
    }
  };

  const waitFor: EventCollector["waitFor"] = (type, options = {}) => {
    const match = typeof type === "string" ? (e: ServerEvent) => e.type === type : type;
    if (options.since !== undefined) {
      const found = received.slice(options.since).find((r) => match(r.event));
      if (found !== undefined) return Promise.resolve(found.event);
    }
    if (ended !== null) return Promise.reject(ended);
    const timeoutMs = options.timeoutMs ?? 10_000;
    return new Promise((resolve, reject) => {
      const waiter = {
        match,
        resolve: (e: ServerEvent) => {
          clearTimeout(timer);
          resolve(e);
        },
        reject: (error: Error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        const what = typeof type === "string" ? type : "matching event";
        reject(
          new WaitTimeoutError(
            what,
            timeoutMs,
            received.map((r) => r.event.type),
          ),
        );
      }, timeoutMs);
      waiters.add(waiter);
    });
  };

  return {
    received,
    push,
    events: () => received.map((r) => r.event),
    types: () => received.map((r) => r.event.type),
    count: (type) => received.reduce((n, r) => n + (r.event.type === type ? 1 : 0), 0),
    errors: () => received.map((r) => r.event).filter((e) => e.type === "error"),
    audioBytes: (responseId) =>
      Buffer.concat(
        received
          .map((r) => r.event)
          .filter((e) => e.type === "response.output_audio.delta" && e.response_id === responseId)
          .map((e) => Buffer.from(String(e.delta), "base64")),
      ),
    waitFor,
    end: (error) => {
      if (ended !== null) return;
      ended = error;
      for (const waiter of [...waiters]) {
        waiters.delete(waiter);
        waiter.reject(error);
      }
    },
  };
};
