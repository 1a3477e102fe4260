import { WebSocket } from "ws";
import { pcm16ToBytes } from "../infra/audio/pcm.ts";
import { type CollectedEvent, createEventCollector, type ServerEvent } from "./event-collector.ts";

/**
 * The project's own client of /v1/realtime (DESIGN.md, src/client): used by the demo, the tests and users. Keeps
 * every received event in order (`received`), lets callers wait for one, and stamps `event_id`s on what it sends.
 */
export class RealtimeClient {
  private readonly collector = createEventCollector();
  /**
   * Every server event received, in order, with the local receive time (ms, `performance.now()` clock): the
   * collector's own array (a caller may empty it to bound a long run).
   */
  readonly received = this.collector.received as CollectedEvent[];
  private readonly listeners = new Set<(event: ServerEvent, at: number) => void>();
  private counter = 0;
  /** Resolves with the close code when the socket closes. */
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(private readonly socket: WebSocket) {
    this.closed = new Promise((resolve) =>
      socket.once("close", (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    socket.on("message", (data) => {
      const event = JSON.parse(data.toString()) as ServerEvent;
      const at = performance.now();
      this.collector.push(event, at);
      for (const listener of this.listeners) listener(event, at);
    });
  }

  /**
   * Connects to `url` (ws: or wss:). `headers` such as `Authorization: Bearer KEY` go on the upgrade request.
   * @throws the socket's error when the connection fails.
   */
  static connect(url: string, options: { headers?: Record<string, string> } = {}): Promise<RealtimeClient> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url, { headers: options.headers ?? {} });
      socket.once("open", () => resolve(new RealtimeClient(socket)));
      socket.once("error", reject);
    });
  }

  /** Calls `listener` for each event received from now on. Returns a function that removes it. */
  onEvent(listener: (event: ServerEvent, at: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Sends a client event, adding an `event_id` when it has none. Returns the `event_id`. */
  send(event: { type: string } & Record<string, unknown>): string {
    this.counter += 1;
    const eventId = typeof event.event_id === "string" ? event.event_id : `evt_client_${this.counter}`;
    this.socket.send(JSON.stringify({ ...event, event_id: eventId }));
    return eventId;
  }

  /** Sends a raw text frame as it is (for tests of bad input). */
  sendRaw(text: string): void {
    this.socket.send(text);
  }

  /** Sends `input_audio_buffer.append` of PCM16 little-endian bytes. */
  appendAudio(pcm16: Uint8Array, extra: Record<string, unknown> = {}): string {
    return this.send({ type: "input_audio_buffer.append", audio: Buffer.from(pcm16).toString("base64"), ...extra });
  }

  /**
   * Sends PCM16 mono `samples` at `sampleRateHz` as `chunkMs` appends, as fast as possible, followed by `tailMs` of
   * silence (as a microphone would go on sending). Returns the number of appends sent.
   */
  appendSamples(samples: Int16Array, options: { sampleRateHz: number; chunkMs?: number; tailMs?: number }): number {
    const chunk = Math.round((options.sampleRateHz * (options.chunkMs ?? 100)) / 1000);
    const all = new Int16Array(samples.length + Math.round((options.sampleRateHz * (options.tailMs ?? 0)) / 1000));
    all.set(samples);
    let sent = 0;
    for (let offset = 0; offset < all.length; offset += chunk, sent += 1) {
      this.appendAudio(pcm16ToBytes(all.subarray(offset, offset + chunk)));
    }
    return sent;
  }

  /**
   * Resolves with the first event received from now on (or already received after index `since`) that has type
   * `type` (or matches the predicate).
   * @throws WaitTimeoutError after `timeoutMs` (default 10 000 ms).
   */
  waitFor(
    type: string | ((event: ServerEvent) => boolean),
    options: { timeoutMs?: number; since?: number } = {},
  ): Promise<ServerEvent> {
    return this.collector.waitFor(type, options);
  }

  /** Types of every event received so far, in order. */
  types(): string[] {
    return this.collector.types();
  }

  /** Drops the connection without a closing handshake (as a network failure would) and waits for it to close. */
  async terminate(): Promise<void> {
    this.socket.terminate();
    await this.closed;
  }

  /** The highest `server_event_seq` received so far (0 when none). */
  lastSeq(): number {
    return this.received.reduce((max, r) => Math.max(max, Number(r.event.server_event_seq ?? 0)), 0);
  }

  /**
   * Closes the socket with a close frame and waits for it to close. Without `code` the frame carries no status (the
   * server reads 1005 and detaches the session); code 1000 ends the session as `session.close` does (BEHAVIOUR.md,
   * "Resume").
   */
  async close(code?: number, reason?: string): Promise<void> {
    if (this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING)
      this.socket.close(code, reason);
    await this.closed;
  }
}
