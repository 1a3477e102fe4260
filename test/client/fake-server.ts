import type { Connect, Transport } from "../../src/client/index.ts";

/** One connection of the fake server: what the client sent (parsed), and the server's side of it. */
export interface FakeConnection {
  readonly url: string;
  readonly sent: Record<string, unknown>[];
  /** Sends a server event to the client. */
  push(event: Record<string, unknown>): void;
  /** Closes the connection from the server's side with `code` (1006: as a dropped network). */
  drop(code?: number): void;
  /** True once closed from either side. */
  readonly isClosed: boolean;
}

/**
 * A scripted stand-in for the server, behind the client's `connect` option: `onConnect` is called with each new
 * connection (after the client's listeners are set), `refuse` makes the next connection attempts fail as an
 * unreachable server would. `attempts` counts every attempt, refused or not.
 */
export const fakeServer = (onConnect: (connection: FakeConnection, index: number) => void = () => undefined) => {
  const connections: FakeConnection[] = [];
  const state = { refuse: 0, attempts: 0 };
  const connect: Connect = async (url) => {
    state.attempts += 1;
    if (state.refuse > 0) {
      state.refuse -= 1;
      throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
    }
    let onMessage: (text: string) => void = () => undefined;
    let onClose: (code: number, reason: string) => void = () => undefined;
    let closed = false;
    const close = (code: number) => {
      if (closed) return;
      closed = true;
      setImmediate(() => onClose(code, ""));
    };
    const connection: FakeConnection = {
      url,
      sent: [],
      push: (event) => {
        if (!closed) onMessage(JSON.stringify(event));
      },
      drop: (code = 1006) => close(code),
      get isClosed() {
        return closed;
      },
    };
    const transport: Transport = {
      send: (text) => {
        if (!closed) connection.sent.push(JSON.parse(text) as Record<string, unknown>);
      },
      close: (code = 1000) => close(code),
      terminate: () => close(1006),
      onMessage: (listener) => {
        onMessage = listener;
      },
      onClose: (listener) => {
        onClose = listener;
        // The client sets both listeners at once: the connection is ready for the script.
        const index = connections.length;
        connections.push(connection);
        setImmediate(() => onConnect(connection, index));
      },
    };
    return transport;
  };
  return { connect, connections, state };
};

/** `session.created` as the server sends it on connect. */
export const created = (token = "token-1") => ({
  type: "session.created",
  event_id: "evt_created",
  session: { id: "sess_1", object: "realtime.session" },
  attachment_generation: 1,
  resume_token: token,
});

/** A sequenced server event of `type` with seq `seq`. */
export const ev = (seq: number, type = "conversation.item.added", extra: Record<string, unknown> = {}) => ({
  type,
  event_id: `evt_${seq}`,
  server_event_seq: seq,
  ...extra,
});

/** Resolves once `check` is true (polled every few ms), or rejects after 5 s saying what it waited for. */
export const until = async (what: string, check: () => boolean): Promise<void> => {
  const deadline = Date.now() + 5000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
};
