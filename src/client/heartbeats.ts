/**
 * The heartbeats of one connection (reference/realtime-duplex-api.md, "Session lifetime": `session.heartbeat` /
 * `session.heartbeat_ack`). The server answers each heartbeat once, in mailbox order, so answers are matched to
 * heartbeats first in, first out. A heartbeat not answered within `timeoutMs` ms calls `onMissed` once (the client
 * treats it as a drop).
 */
export interface Heartbeats {
  /** Records a heartbeat just sent; resolves on its answer. Rejects with what `dropped` is given. */
  sent(): Promise<void>;
  /** Heartbeats sent and not answered yet. */
  readonly outstanding: number;
  /** Records an answer (`session.heartbeat_ack`): settles the oldest heartbeat. */
  acked(): void;
  /** The connection is gone: every outstanding heartbeat rejects with `error`, and no timeout fires any more. */
  dropped(error: Error): void;
}

/** Heartbeats of a new connection, none sent yet. */
export const createHeartbeats = (timeoutMs: number, onMissed: () => void): Heartbeats => {
  const queue: { resolve: () => void; reject: (e: Error) => void; timer: ReturnType<typeof setTimeout> }[] = [];
  let missed = false;
  return {
    sent: () =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          if (missed) return;
          missed = true;
          onMissed();
        }, timeoutMs);
        timer.unref?.();
        queue.push({ resolve, reject, timer });
      }),
    get outstanding() {
      return queue.length;
    },
    acked: () => {
      const first = queue.shift();
      if (first === undefined) return;
      clearTimeout(first.timer);
      first.resolve();
    },
    dropped: (error) => {
      missed = true;
      for (const entry of queue.splice(0)) {
        clearTimeout(entry.timer);
        entry.reject(error);
      }
    },
  };
};
