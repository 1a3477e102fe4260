import type { SessionConfig } from "../../src/domain/index.ts";
import {
  Connection,
  type ConnectionPort,
  createEngine,
  type Engine,
  type EventStore,
  type ModelRunner,
  type NodeLeases,
  type RecordedEntry,
  type SessionHost,
  type SessionSink,
  streamOf,
} from "../../src/engine/index.ts";
import type { VadModel } from "../../src/engine/ports/index.ts";
import { createResampler, createSpeexStreamResampler } from "../../src/infra/audio/index.ts";
import { parseConfig } from "../../src/infra/config.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/sqlite.ts";
import { createSileroVad } from "../../src/infra/vad/index.ts";
import { type DecodedFrame, decodeClientFrame, peekFrame } from "../../src/protocol/index.ts";
import { engineLimitsOf, runnerOf, serverLogger } from "../../src/server/server-parts.ts";
import { type VirtualClock, virtualClock } from "./virtual-clock.ts";

/**
 * Driving a session host in process, without a socket (the tests of moves, takeovers, restarts and the upstream
 * runner, and the tests of decisions and ordering in test/engine): client frames decoded as the socket decodes them,
 * a sink that records what the client would be sent, a wait for a condition, and `openEngineSession`, one session of
 * an in-process engine over an in-memory store, driven as the realtime socket drives it.
 */

/** A server event as the client would receive it (parsed JSON). */
export type Sent = Record<string, unknown>;

/** `event` as a frame for `SessionHost.submit`, decoded against the session's configuration when it is submitted. */
export const frame =
  (event: Record<string, unknown>) =>
  (config: SessionConfig): DecodedFrame => {
    const text = JSON.stringify(event);
    return decodeClientFrame(text, Buffer.byteLength(text), {
      inputRateHz: config.inputAudio.rate,
      inputAudio: config.inputAudio,
    });
  };

/**
 * A connection port that records what a client would receive (GA names; parsed JSON) and how the connection closed:
 * the frames of the connection's own (`send`) and the session's events (`write`) in one order.
 */
export interface RecordingPort extends ConnectionPort {
  readonly sent: Sent[];
  /** The close the connection asked for, if any. */
  readonly closedWith: { code: number | undefined; reason: string } | null;
}

export const recordingPort = (sent: Sent[] = []): RecordingPort => {
  let closedWith: RecordingPort["closedWith"] = null;
  return {
    sent,
    get closedWith() {
      return closedWith;
    },
    isOpen: () => closedWith === null,
    send: (text) => void sent.push(JSON.parse(text) as Sent),
    write: (json) => void sent.push(JSON.parse(json) as Sent),
    close: (code, reason) => {
      closedWith ??= { code, reason };
    },
  };
};

/** A sink that pushes every event sent into `sent`, and ignores the rest. */
export const sinkInto = (sent: Sent[]): SessionSink => ({
  send: (json) => sent.push(JSON.parse(json) as Sent),
  replaced: () => undefined,
  failed: () => undefined,
  ended: () => undefined,
});

/**
 * Waits until `check` holds, polled every 5 ms; rejects naming `what` after `ms` (a hang, not a timing: nothing is
 * asserted about how long it took).
 */
export const until = async (check: () => boolean, what: string, ms = 10_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

/**
 * Leases of nodes that are all alive (two engines over one store: a takeover happens on a resume, never by expiry):
 * `node`'s lease is always held, and so is every other node's.
 */
export const leasesAlwaysHeld = (node: string): NodeLeases => ({
  nodeId: node,
  leaseMs: 10_000,
  renew: async () => true,
  claim: async () => {},
  holds: async () => true,
  release: async () => {},
});

/** What `openEngineSession` is built from; every part optional. */
export interface EngineSessionOptions {
  /** The runner; absent: the one `config.runner` configures, as `startServer` builds it (the echo by default). */
  readonly runner?: ModelRunner;
  /**
   * A deployment configuration's overrides, as `startTestServer` takes them (the engine's limits, session mode and
   * runner are read from it as `startServer` reads them); `event_store` and `listen` are ignored.
   */
  readonly config?: Record<string, unknown>;
  /** The store; absent: a fresh in-memory SQLite store, closed by `close()`. */
  readonly store?: EventStore;
  /** Real Silero VAD (as the server loads it), optionally wrapped (a gate); absent: no VAD (null). */
  readonly vad?: "silero" | ((silero: VadModel) => VadModel);
  /**
   * The engine's clock and timers (response, idle, grace); absent: the real clock. The session's connection keeps
   * a clock of its own that never moves (its first-message timer never fires).
   */
  readonly clock?: VirtualClock;
}

/** One session of an in-process engine, driven as the realtime socket drives it, with no socket. */
export interface EngineSession {
  readonly engine: Engine;
  readonly host: SessionHost;
  readonly store: EventStore;
  /** Every server event the client would have received, parsed, in order. */
  readonly sent: Sent[];
  /** The types of `sent`, in order. */
  types(): string[];
  /**
   * Submits a client event as the socket submits a text frame (sniffed, costed and decoded the same way), with an
   * `event_id` added when it has none, as the stock client adds one (`evt_client_<n>`). Resolves when it is decided.
   */
  send(event: Record<string, unknown>): Promise<void>;
  /** Sends `input_audio_buffer.append` of PCM16 little-endian bytes, not waiting for it to be decided. */
  appendAudio(pcm16: Uint8Array, extra?: Record<string, unknown>): void;
  /**
   * Sends PCM16 mono `samples` at `sampleRateHz` as `chunkMs` appends (default 100 ms), then `tailMs` of silence, as
   * `RealtimeClient.appendSamples` does, none waited for. Returns the number of appends sent.
   */
  appendSamples(samples: Int16Array, options: { sampleRateHz: number; chunkMs?: number; tailMs?: number }): number;
  /** The first event of `type` sent at index `since` or after; waits for it (rejects after `ms`: a hang). */
  waitFor(type: string, options?: { since?: number; ms?: number }): Promise<Sent>;
  /** The session's log as stored. */
  log(): Promise<RecordedEntry[]>;
  /** Closes the session as a socket closed with 1000 does, then the engine, the store (if its own) and the VAD. */
  close(): Promise<void>;
}

/** An in-process engine as `startServer` builds it, over `options.store` or its own in-memory store. */
export interface HarnessEngine {
  readonly engine: Engine;
  readonly store: EventStore;
  readonly config: ReturnType<typeof parseConfig>;
  /** Closes the engine, the store (if its own) and the VAD. */
  close(): Promise<void>;
}

/** Builds the engine of `openEngineSession` (see `EngineSessionOptions`), for tests that drive their own connections. */
export const harnessEngine = async (options: EngineSessionOptions = {}): Promise<HarnessEngine> => {
  const config = parseConfig({ log_level: "silent", ...options.config });
  const store = options.store ?? createSqliteEventStore({ path: ":memory:" });
  const silero = options.vad === undefined ? null : await createSileroVad();
  const vad = silero === null || options.vad === "silero" ? silero : (options.vad?.(silero) ?? silero);
  const { runner } = await runnerOf(config, options.runner, serverLogger(config));
  const engine = createEngine({
    store,
    runner,
    vad,
    createResampler,
    createOutputResampler: createSpeexStreamResampler,
    model: runner.name,
    sessionMode: config.session_mode,
    limits: engineLimitsOf(config),
    ...(options.clock === undefined ? {} : { scheduler: options.clock }),
  });
  return {
    engine,
    store,
    config,
    async close() {
      await engine.close();
      if (options.store === undefined) await store.close();
      await silero?.close();
    },
  };
};

/**
 * Opens one session on an in-process engine (the session harness, issue 34, part 6), as the realtime socket opens
 * one on connect: the socket's `Connection` over a recording port (what the client would be sent, GA names), each
 * client event peeked and received as the socket hands it a text frame. For tests of decisions, order and the log, not of the socket.
 * @throws Error when the engine refuses the session (capacity).
 */
export const openEngineSession = async (options: EngineSessionOptions = {}): Promise<EngineSession> => {
  const built = await harnessEngine(options);
  const { engine, store, config } = built;
  // The socket's connection rules over a recording port; its first-message timer on a clock that never moves.
  const port = recordingPort();
  const connection = new Connection(engine, port, serverLogger(config), { scheduler: virtualClock() });
  connection.connected();
  const opened = connection.host;
  if (opened === null) throw new Error(`session refused: ${JSON.stringify(port.sent.at(-1) ?? null)}`);
  const host = opened;
  const { sent } = port;
  let counter = 0;
  /** As the socket hands a text frame to its connection: peeked (size, kind), then decoded in the mailbox. */
  const send = (event: Record<string, unknown>): Promise<void> => {
    counter += 1;
    const eventId = typeof event.event_id === "string" ? event.event_id : `evt_client_${counter}`;
    return connection.receive(peekFrame(Buffer.from(JSON.stringify({ ...event, event_id: eventId })), false));
  };
  const appendAudio = (pcm16: Uint8Array, extra: Record<string, unknown> = {}): void => {
    void send({ type: "input_audio_buffer.append", audio: Buffer.from(pcm16).toString("base64"), ...extra });
  };
  const appendSamples: EngineSession["appendSamples"] = (samples, { sampleRateHz, chunkMs = 100, tailMs = 0 }) => {
    const chunk = Math.round((sampleRateHz * chunkMs) / 1000);
    const all = new Int16Array(samples.length + Math.round((sampleRateHz * tailMs) / 1000));
    all.set(samples);
    let count = 0;
    for (let offset = 0; offset < all.length; offset += chunk, count += 1) {
      const part = all.subarray(offset, offset + chunk);
      appendAudio(new Uint8Array(part.buffer, part.byteOffset, part.byteLength));
    }
    return count;
  };
  const waitFor = async (type: string, { since = 0, ms = 10_000 } = {}): Promise<Sent> => {
    const find = () => sent.slice(since).find((e) => e.type === type);
    await until(() => find() !== undefined, type, ms);
    return find() as Sent;
  };
  return {
    engine,
    host,
    store,
    sent,
    types: () => sent.map((e) => String(e.type)),
    send,
    appendAudio,
    appendSamples,
    waitFor,
    log: () => store.read(streamOf(host.sessionId)),
    async close() {
      if (!host.isClosed) connection.closed(1000, "");
      await built.close();
    },
  };
};
