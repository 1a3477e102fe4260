import type { ClientEnd, ConnectionOptions, DuplexClientPhase } from "./connection-types.ts";
import { DuplexConnectionError, DuplexProtocolError, DuplexSessionClosedError, errorEventId } from "./errors.ts";
import type { ServerEvent } from "./event-collector.ts";
import { createEventCollector, type EventCollector } from "./event-collector.ts";
import { createResponseFeed, type ResponseFeed, type ResponseHandle } from "./response-handle.ts";
import { ResumableConnection } from "./resumable-connection.ts";

/** Options of DuplexClient.connect: the session's first `session.update`, and how it connects (ConnectionOptions). */
export interface DuplexClientOptions extends ConnectionOptions {
  /** Sent as the first `session.update`; connect then waits for its `session.updated`. */
  readonly session?: Record<string, unknown>;
}

/**
 * The project's client of /v1/realtime (DESIGN.md, src/client; reference/realtime-duplex-api.md, "Using
 * DuplexClient"), used by `duplex demo`, the tests and users. It opens a session, delivers every server event once
 * and in order (`events`, `onEvent`), resumes by itself after a drop (ResumableConnection: `connection.resumed`
 * marks each resume), sends heartbeats and event acks, and gives each response a handle whose promises resolve with
 * its audio (PCM16 at 24 kHz), transcript, text and end (`createResponse`, `onResponse`, `responses`).
 */
export class DuplexClient {
  /** Every event delivered (server events, and one ConnectionResumed per resume), in order. */
  readonly events: EventCollector = createEventCollector();
  /**
   * Resolves once the client has ended for good: with null after `close()`, else with the error that says why
   * (DuplexSessionClosedError: the session ended, was replaced, needs a resync or could not be resumed;
   * DuplexConnectionError: reconnecting failed).
   */
  readonly closed: Promise<ClientEnd>;
  private readonly link: ResumableConnection;
  private readonly listeners = new Set<(event: ServerEvent, at: number) => void>();
  private readonly responseListeners = new Set<(handle: ResponseHandle) => void>();
  private readonly handles: ResponseHandle[] = [];
  /** Responses streaming, with the `response.create` that asked for each (null: the server started it). */
  private active: { feed: ResponseFeed; eventId: string | null }[] = [];
  /** `response.create`s sent whose `response.created` has not arrived, oldest first. */
  private pendingCreates: { feed: ResponseFeed; eventId: string }[] = [];

  private constructor(url: string, options: ConnectionOptions) {
    this.link = new ResumableConnection(url, options, {
      deliver: (event, at) => this.deliver(event, at),
      ended: (end) => this.ended(end),
    });
    this.closed = this.link.closed;
  }

  /**
   * Connects to `url` (ws: or wss:, e.g. ws://127.0.0.1:8099/v1/realtime; query parameters are kept), sends
   * `options.session` as `session.update` when given, and resolves once `session.created` (and that update's
   * `session.updated`) arrived. The server sends `session.created` as soon as the socket opens, except under a
   * profile that needs `ref_audio` first, where the update opens the session.
   * @throws DuplexConnectionError `connect_failed` (its message says what to do) or `handshake_timeout`;
   *   DuplexProtocolError when the server refuses the session or the update (its error code).
   */
  static async connect(url: string, options: DuplexClientOptions = {}): Promise<DuplexClient> {
    const client = new DuplexClient(url, options);
    await client.link.connect();
    const timeoutMs = options.handshakeTimeoutMs ?? 10_000;
    const update =
      options.session === undefined ? null : client.send({ type: "session.update", session: options.session });
    try {
      const first = await client.events.waitFor((e) => e.type === "session.created" || e.type === "error", {
        since: 0,
        timeoutMs,
      });
      if (first.type === "error") throw DuplexProtocolError.of(first);
      if (update !== null) {
        const answer = await client.events.waitFor(
          (e) => e.type === "session.updated" || (e.type === "error" && errorEventId(e) === update),
          { since: 0, timeoutMs },
        );
        if (answer.type === "error") throw DuplexProtocolError.of(answer);
      }
    } catch (error) {
      const failure =
        error instanceof DuplexProtocolError || error instanceof DuplexConnectionError
          ? error
          : new DuplexConnectionError(
              "handshake_timeout",
              `the server did not open a session: ${(error as Error).message}`,
              { cause: error },
            );
      client.link.end(failure);
      throw failure;
    }
    client.link.opened();
    return client;
  }

  /** `connecting`, `open`, `reconnecting` (between a drop and `session.resumed`), `closing`, `closed`. */
  get phase(): DuplexClientPhase {
    return this.link.phase;
  }
  /** The session's id (`sess_...`), from `session.created`. */
  get sessionId(): string {
    return this.link.sessionId;
  }
  /** The current resume token (rotated by every resume); null when the model does not support resume. */
  get resumeToken(): string | null {
    return this.link.resumeToken;
  }
  /** The current attachment generation: 1 after `session.created`, +1 per resume. */
  get attachmentGeneration(): number {
    return this.link.attachmentGeneration;
  }
  /** The highest `server_event_seq` delivered (0: none yet). */
  get lastReceivedSeq(): number {
    return this.link.lastReceivedSeq;
  }
  /** Automatic resumes so far. */
  get resumes(): number {
    return this.link.resumes;
  }
  /** Server events received again after a resume and not delivered (their seq had been delivered). */
  get duplicatesDropped(): number {
    return this.link.duplicatesDropped;
  }
  /** Every response handle so far, in the order their `response.created` arrived. */
  get responses(): readonly ResponseHandle[] {
    return this.handles;
  }

  /** Calls `listener` with each event delivered from now on. Returns a function that removes it. */
  onEvent(listener: (event: ServerEvent, at: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Calls `listener` with the handle of each response created from now on (`response.created`). */
  onResponse(listener: (handle: ResponseHandle) => void): () => void {
    this.responseListeners.add(listener);
    return () => this.responseListeners.delete(listener);
  }

  /**
   * Sends a client event, adding an `event_id` (`evt_client_N`) when it has none; returns the `event_id`. While
   * reconnecting the frame waits and is sent after the resume (reference, "Work with raw events": `send`).
   * @throws DuplexSessionClosedError once the client is closing or closed; DuplexConnectionError `send_queue_full`
   *   when more than `maxQueuedBytes` wait for a reconnect.
   */
  send(event: { type: string } & Record<string, unknown>): string {
    return this.link.send(event);
  }

  /** Sends `input_audio_buffer.append` of `audio`: bytes in the session's input format (e.g. PCM16 LE). */
  appendAudio(audio: Uint8Array, extra: Record<string, unknown> = {}): string {
    return this.send({ type: "input_audio_buffer.append", audio: Buffer.from(audio).toString("base64"), ...extra });
  }

  /**
   * Sends `audio` (bytes in the session's input format) as appends of `chunkMs` (default 100 ms), paced in real
   * time unless `realtime` is false (then as fast as possible, yielding every 20 appends) (reference, "Stream audio
   * and commit a turn": stream_pcm). `bytesPerSecond`: rate times bytes per sample (PCM16 at 16 kHz: 32 000);
   * `bytesPerSample` (default 2) keeps each append whole samples. `onAppend(index, at)` is called before each
   * append. An aborted `signal` stops the stream before its next append. Returns the number of appends sent.
   * @throws what `send` throws (the client ended while streaming).
   */
  async streamAudio(
    audio: Uint8Array,
    options: {
      bytesPerSecond: number;
      chunkMs?: number;
      realtime?: boolean;
      bytesPerSample?: number;
      onAppend?: (index: number, at: number) => void;
      signal?: AbortSignal;
    },
  ): Promise<number> {
    const chunkMs = options.chunkMs ?? 100;
    const align = options.bytesPerSample ?? 2;
    const chunk = Math.max(align, Math.round((options.bytesPerSecond * chunkMs) / 1000 / align) * align);
    const start = performance.now();
    let n = 0;
    for (let offset = 0; offset < audio.length; offset += chunk, n += 1) {
      if (options.signal?.aborted === true) break;
      options.onAppend?.(n, performance.now());
      this.appendAudio(audio.subarray(offset, offset + chunk));
      if (options.realtime === false) {
        if (n % 20 === 19) await new Promise((resolve) => setTimeout(resolve, 1));
        continue;
      }
      const due = start + (n + 1) * chunkMs - performance.now();
      if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
    }
    return n;
  }

  /** Sends `input_audio_buffer.commit` (with `response_create` when given). */
  commit(options: { createResponse?: boolean } = {}): string {
    return this.send({
      type: "input_audio_buffer.commit",
      ...(options.createResponse === undefined ? {} : { response_create: options.createResponse }),
    });
  }

  /**
   * Sends `response.create` (with `response` as its `response` object when given) and returns the handle of the
   * next response the server creates (reference, "Consume responses"). The handle rejects with a
   * DuplexProtocolError when the server answers the create with an error (e.g. `response_already_active`). A
   * response the server started on its own (server VAD, a deferred commit) before it handled the create comes
   * first and takes the handle, which then rejects with that error.
   */
  createResponse(response?: Record<string, unknown>): ResponseHandle {
    const feed = createResponseFeed();
    const eventId = this.send({ type: "response.create", ...(response === undefined ? {} : { response }) });
    this.pendingCreates.push({ feed, eventId });
    return feed.handle;
  }

  /**
   * Resolves with the handle of the next response created from now on (`response.created`), whoever started it.
   * @throws WaitTimeoutError after `timeoutMs` (default 30 000); the client's end error when it ends first.
   */
  async nextResponse(timeoutMs = 30_000): Promise<ResponseHandle> {
    const index = this.handles.length;
    await this.events.waitFor("response.created", { since: this.events.received.length, timeoutMs });
    return this.handles[index] as ResponseHandle;
  }

  /** Sends `response.cancel` (of `responseId`, or the active response). */
  cancelResponse(responseId?: string): string {
    return this.send({ type: "response.cancel", ...(responseId === undefined ? {} : { response_id: responseId }) });
  }

  /**
   * Sends `playback.ack` (reference, "Playback truth"): `playedMs`, ms of the response's audio played so far
   * (cumulative); `committedMs`, what history keeps (default: played).
   */
  ackPlayback(responseId: string, playedMs: number, committedMs?: number): string {
    return this.send({
      type: "playback.ack",
      response_id: responseId,
      played_ms: playedMs,
      ...(committedMs === undefined ? {} : { committed_ms: committedMs }),
    });
  }

  /**
   * Sends `session.heartbeat` and resolves on its `session.heartbeat_ack`: the session's mailbox is ordered, so by
   * then the server has handled every event sent before it.
   * @throws DuplexConnectionError `connection_lost` when the connection drops first, or is not open (a missing
   *   answer within `heartbeatTimeoutMs` counts as a drop).
   */
  heartbeat(): Promise<void> {
    return this.link.heartbeat();
  }

  /** Drops the current connection without a closing handshake, as a network failure would (tests, chaos). */
  dropConnection(): void {
    this.link.dropConnection();
  }

  /**
   * Ends the session: sends `session.close`, waits up to `timeoutMs` (default 5000) for `session.closed`, closes
   * the connection; `closed` resolves with null. While reconnecting it only stops (the server keeps the session
   * detached until its grace runs out).
   */
  close(timeoutMs = 5000): Promise<void> {
    return this.link.close(timeoutMs);
  }

  private deliver(event: ServerEvent, at: number): void {
    let created: ResponseHandle | null = null;
    if (event.type === "response.created") {
      const pending = this.pendingCreates.shift();
      const feed = pending?.feed ?? createResponseFeed();
      feed.bind(event);
      this.active.push({ feed, eventId: pending?.eventId ?? null });
      this.handles.push(feed.handle);
      created = feed.handle;
    }
    if (event.type === "error") {
      const id = errorEventId(event);
      const refused = [...this.pendingCreates, ...this.active].find((p) => p.eventId !== null && p.eventId === id);
      if (refused !== undefined) {
        refused.feed.fail(DuplexProtocolError.of(event));
        this.pendingCreates = this.pendingCreates.filter((p) => p !== refused);
        this.active = this.active.filter((p) => p !== refused);
      }
    }
    this.active = this.active.filter((a) => !a.feed.feed(event, at));
    this.events.push(event, at);
    for (const listener of this.listeners) listener(event, at);
    if (created !== null) for (const listener of this.responseListeners) listener(created);
  }

  private ended(end: ClientEnd): void {
    const error = end ?? new DuplexSessionClosedError("client_closed", "the client closed the session");
    this.events.end(error);
    for (const p of [...this.pendingCreates, ...this.active]) p.feed.fail(error);
    this.pendingCreates = [];
    this.active = [];
  }
}
