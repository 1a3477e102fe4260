import { Subject } from "rxjs";
import {
  type AudioAppend,
  type Command,
  type DomainEvent,
  decide,
  evolve,
  type Input,
  initialState,
  type SessionConfig,
  type SessionId,
  type SessionState,
} from "../domain/index.ts";
import {
  type EventEnvelope,
  initialWireState,
  reduceWire,
  type WireEvent,
  type WireState,
} from "../projections/index.ts";
import { type DecodedFrame, REDACTED_RESUME_TOKEN } from "../protocol/index.ts";
import { type Effect, effectsOf } from "./effects.ts";
import { decisionEntry, foldLog, inputEntry, type RecoveredLog, streamOf } from "./log.ts";
import type {
  EventStore,
  ExpectedRevision,
  NewEntry,
  Resampler,
  ResamplerFactory,
  RunnerSession,
  VadStream,
} from "./ports/index.ts";

/** What a session host needs from the engine. `now` is the engine clock in ms since the Unix epoch. */
export interface SessionHostDeps {
  readonly store: EventStore;
  readonly vad: VadStream | null;
  readonly createResampler: ResamplerFactory;
  readonly openRunner: (
    sessionId: SessionId,
    emit: (output: Input & { type: "StageOutputReceived" }) => void,
  ) => RunnerSession;
  readonly now: () => number;
  readonly onClosed: (host: SessionHost) => void;
  readonly onAppendFailed: (host: SessionHost, error: unknown) => void;
  /**
   * `max_pending_input_bytes_per_session` (bytes of client frames) and `max_pending_turns_per_session` (commits)
   * waiting in the mailbox; beyond them a frame is refused with `input_backpressure`. Absent: no limit.
   */
  readonly inputLimits?: { readonly maxPendingBytes: number; readonly maxPendingTurns: number };
  /** Observes each group commit: how many entries, and how long the append took (ms). */
  readonly onAppended?: (entries: number, ms: number) => void;
}

/**
 * Where a session's server events go: the socket that holds it. `send` takes the exact JSON text; `replaced` is
 * called on a socket that a resume superseded (it sends `session.replaced` and closes); `ended` after the last
 * event of a session that ended.
 */
export interface SessionSink {
  send(json: string): void;
  replaced(attachmentGeneration: number): void;
  ended(lastType: string): void;
}

interface Pending {
  /** Makes the input, given the state that every input before it in the mailbox led to. */
  readonly input: (state: SessionState) => Promise<Input>;
  /** A barrier is decided in a drain of its own, after everything before it was published (resume). */
  readonly barrier: boolean;
}

const REDACTED_JSON = JSON.stringify(REDACTED_RESUME_TOKEN);

/**
 * One session's single writer (DESIGN.md, rule 5): a mailbox that serialises every input, decides it, appends the
 * input and its decisions in one transaction per drain (group commit), and only then publishes the server events
 * and runs the effects (rule 3, write before send). The resume journal is the log itself: a resume re-renders the
 * recorded decisions through the wire projection (BEHAVIOUR.md, "Resume", ours).
 */
export class SessionHost {
  /** Server events, published after they are appended (for observers; sockets use the sink). */
  readonly wire$ = new Subject<WireEvent>();
  /** Domain events with their metadata, published after append, for projections. */
  readonly events$ = new Subject<EventEnvelope>();
  private state: SessionState;
  private wire: WireState;
  private revision: ExpectedRevision;
  private readonly queue: Pending[] = [];
  private draining: Promise<void> | null = null;
  private runner: RunnerSession | null = null;
  private resampler: { rate: number; resampler: Resampler } | null = null;
  private failed = false;
  private sink: SessionSink | null = null;
  /** The plain resume token of the current attachment, in memory only; the log keeps its SHA-256. */
  private token: string | null;
  /**
   * Generation and token hash as claimed so far: updated at once by `claim`, so that two resumes cannot both win.
   * The hash is null until the first claim of a new session, whose token hash is then the logged one.
   */
  private claimedGeneration: number;
  private claimedTokenSha256: string | null;
  private pendingAttach: { sink: SessionSink; replay: WireEvent[] } | null = null;
  /** Input waiting in the mailbox: frame bytes and commits (BEHAVIOUR.md, "Defaults and limits": backpressure). */
  private pendingBytes = 0;
  private pendingTurns = 0;

  constructor(
    readonly sessionId: SessionId,
    resumeToken: string | null,
    private readonly deps: SessionHostDeps,
    recovered: RecoveredLog | null = null,
  ) {
    this.token = resumeToken;
    this.state = recovered?.state ?? initialState;
    this.wire = recovered?.wire ?? initialWireState;
    this.revision = recovered?.revision ?? "no_stream";
    this.claimedGeneration = recovered?.state.attachmentGeneration ?? 1;
    this.claimedTokenSha256 = recovered?.state.resumeTokenSha256 ?? null;
  }

  /** The state after the last drain. */
  get current(): SessionState {
    return this.state;
  }

  get isClosed(): boolean {
    return this.state.phase === "closed" || this.failed;
  }

  /** The last `server_event_seq` published. */
  get headSeq(): number {
    return this.wire.seq;
  }

  /** The generation of the socket that holds (or is about to hold) the session. */
  get generation(): number {
    return this.claimedGeneration;
  }

  /** Binds the socket that opened the session. */
  attach(sink: SessionSink): void {
    this.sink = sink;
  }

  /** Unbinds `sink` if it is still the current one (a superseded socket's drop changes nothing). */
  release(sink: SessionSink): boolean {
    if (this.sink !== sink) return false;
    this.sink = null;
    return true;
  }

  /**
   * Checks a resume token against the current one and, when it matches, rotates it at once: of two concurrent
   * resumes with the same token exactly one wins (BEHAVIOUR.md, "Resume"). Returns the new generation, or null.
   * `tokenSha256` and `newTokenSha256` are hex SHA-256 digests; `equal` compares in constant time.
   */
  claim(
    tokenSha256: string,
    newToken: string,
    newTokenSha256: string,
    equal: (a: string, b: string) => boolean,
  ): number | null {
    const current = this.claimedTokenSha256 ?? this.state.resumeTokenSha256;
    if (this.isClosed || current === null || !equal(tokenSha256, current)) return null;
    this.claimedGeneration += 1;
    this.claimedTokenSha256 = newTokenSha256;
    this.token = newToken;
    return this.claimedGeneration;
  }

  /**
   * Completes a claimed resume in mailbox order: reads the log, re-renders the events after `lastReceivedSeq`,
   * records the attachment, then sends `session.resumed`, the missed events in order, and from then on the live
   * ones to `sink`; the superseded socket gets `session.replaced`.
   */
  resume(generation: number, lastReceivedSeq: number, sink: SessionSink): Promise<void> {
    const at = this.deps.now();
    return this.push(async () => {
      const entries = await this.deps.store.read(streamOf(this.sessionId));
      const { replay } = foldLog(entries);
      this.pendingAttach = {
        sink,
        replay: replay.filter((e) => e.seq !== null && e.seq > lastReceivedSeq && e.seq <= this.wire.seq),
      };
      return {
        type: "AttachmentChanged",
        at,
        data: { change: "resumed", generation, resumeTokenSha256: this.claimedTokenSha256, lastReceivedSeq },
      };
    }, true);
  }

  /** Enqueues an input that is already complete (session opened, stage output, timer, attachment). */
  enqueue(input: Input): Promise<void> {
    return this.push(async () => input);
  }

  /**
   * Enqueues a client frame. `frame` is decoded already, or a decoder that the mailbox calls with the session's
   * configuration as the inputs before it left it, so a `session.update` that changes the input format applies to
   * the very next append (arrival order). Audio is then converted to the runner's rate and run through VAD.
   */
  submit(
    frame: DecodedFrame | ((config: SessionConfig) => DecodedFrame),
    cost: { readonly bytes: number; readonly turn: boolean } = { bytes: 0, turn: false },
  ): Promise<void> {
    const at = this.deps.now();
    const limits = this.deps.inputLimits;
    const overBytes = limits !== undefined && this.pendingBytes + cost.bytes > limits.maxPendingBytes;
    const overTurns = limits !== undefined && cost.turn && this.pendingTurns + 1 > limits.maxPendingTurns;
    if (overBytes || overTurns) {
      // Refused before it is accepted: nothing of it is buffered, and the refusal is recorded in order.
      const decoded = typeof frame === "function" ? frame(this.state.config) : frame;
      const command: Command = {
        type: "invalid",
        eventId: decoded.eventId,
        code: "input_backpressure",
        message: overBytes
          ? `more than ${limits?.maxPendingBytes} bytes of input are waiting to be processed; slow down`
          : `more than ${limits?.maxPendingTurns} commits are waiting to be processed; slow down`,
        param: null,
        eventType: decoded.type === "invalid" ? decoded.eventType : decoded.type,
      };
      return this.push(async () => ({ type: "CommandReceived", at, data: { command } }));
    }
    this.pendingBytes += cost.bytes;
    if (cost.turn) this.pendingTurns += 1;
    return this.push(async (state) => {
      this.pendingBytes -= cost.bytes;
      if (cost.turn) this.pendingTurns -= 1;
      const decoded = typeof frame === "function" ? frame(state.config) : frame;
      return { type: "CommandReceived", at, data: { command: await this.commandOf(decoded, state) } };
    });
  }

  private async commandOf(frame: DecodedFrame, state: SessionState): Promise<Command> {
    switch (frame.type) {
      case "session.resume":
        // A resume on a socket that already holds a session: refused, the session goes on.
        return {
          type: "invalid",
          eventId: frame.eventId,
          code: "invalid_session_resume",
          message: "session.resume must be the first message on a new socket",
          param: null,
          eventType: "session.resume",
        };
      case "session.event_ack":
        // The head is stamped in mailbox order, so the log records what the ack was checked against.
        return { ...frame, headSeq: this.wire.seq };
      case "input_audio_buffer.append":
        return this.prepareAppend(frame, state);
      default:
        return frame;
    }
  }

  /** Resolves once every input enqueued so far is decided, appended and published. */
  async settled(): Promise<void> {
    while (this.draining !== null) await this.draining;
  }

  /** Stops the runner without deciding anything (server shutdown: the session stays open in the log). */
  async stop(): Promise<void> {
    await this.settled();
    await this.runner?.close();
    this.runner = null;
  }

  private push(input: Pending["input"], barrier = false): Promise<void> {
    if (this.failed) return Promise.resolve();
    this.queue.push({ input, barrier });
    if (this.draining === null) {
      this.draining = this.drain().finally(() => {
        this.draining = null;
      });
    }
    return this.draining;
  }

  private async prepareAppend(
    frame: Extract<DecodedFrame, { type: "input_audio_buffer.append" }>,
    state: SessionState,
  ): Promise<AudioAppend> {
    const target = state.capabilities.inputSampleRateHz;
    if (this.resampler === null || this.resampler.rate !== frame.sampleRateHz) {
      this.resampler = { rate: frame.sampleRateHz, resampler: this.deps.createResampler(frame.sampleRateHz, target) };
    }
    const source = new Int16Array(
      frame.pcm16.buffer.slice(frame.pcm16.byteOffset, frame.pcm16.byteOffset + frame.pcm16.byteLength),
    );
    const samples = this.resampler.resampler.push(source);
    const vad = this.deps.vad === null ? [] : await this.deps.vad.process(samples);
    let sum = 0;
    for (const s of samples) sum += (s / 32768) ** 2;
    const rms = samples.length === 0 ? 0 : Math.sqrt(sum / samples.length);
    return {
      type: "input_audio_buffer.append",
      eventId: frame.eventId,
      audio: new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength),
      isSpeech: frame.isSpeech,
      vad,
      rms: Math.round(rms * 1e6) / 1e6,
    };
  }

  /** The next batch: everything up to the first barrier, or the barrier alone. */
  private nextBatch(): Pending[] {
    const first = this.queue[0];
    if (first?.barrier) return this.queue.splice(0, 1);
    const barrier = this.queue.findIndex((p) => p.barrier);
    return this.queue.splice(0, barrier < 0 ? this.queue.length : barrier);
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0 && !this.failed) {
      const batch = this.nextBatch();
      const entries: NewEntry[] = [];
      const outgoing: WireEvent[] = [];
      const envelopes: EventEnvelope[] = [];
      const effects: Effect[] = [];
      let state = this.state;
      let wire = this.wire;
      for (const pending of batch) {
        const input = await pending.input(state);
        const before = state;
        entries.push(inputEntry(input, before));
        const events: DomainEvent[] = decide(before, input);
        for (const event of events) {
          state = evolve(state, event);
          const envelope: EventEnvelope = {
            event,
            metadata: { at: input.at, epoch: state.epoch, turnId: state.turnId },
          };
          wire = reduceWire(wire, envelope);
          entries.push(decisionEntry(envelope, wire.emitted));
          outgoing.push(...wire.emitted);
          envelopes.push(envelope);
        }
        effects.push(...effectsOf(input, events, before, state));
      }
      try {
        const started = performance.now();
        this.revision = await this.deps.store.append(streamOf(this.sessionId), entries, this.revision);
        this.deps.onAppended?.(entries.length, performance.now() - started);
      } catch (error) {
        this.failed = true;
        this.deps.onAppendFailed(this, error);
        await this.runner?.close();
        return;
      }
      this.state = state;
      this.wire = wire;
      for (const event of outgoing) this.publish(event);
      this.pendingAttach = null;
      for (const envelope of envelopes) this.events$.next(envelope);
      this.run(effects);
      if (state.phase === "closed") {
        this.sink?.ended(outgoing.at(-1)?.type ?? "session.closed");
        this.sink = null;
        this.wire$.complete();
        this.events$.complete();
        this.deps.onClosed(this);
        return;
      }
    }
  }

  /** Sends one appended server event to the socket; a resume switches sockets here, in stream order. */
  private publish(event: WireEvent): void {
    this.wire$.next(event);
    const token = this.token === null ? "null" : JSON.stringify(this.token);
    if (event.type === "session.resumed" && this.pendingAttach !== null) {
      const { sink, replay } = this.pendingAttach;
      this.sink?.replaced(this.state.attachmentGeneration - 1);
      this.sink = sink;
      sink.send(event.json.replace(REDACTED_JSON, token));
      // Tokens inside replayed events were rotated away since: they go out as null.
      for (const missed of replay) sink.send(missed.json.replace(REDACTED_JSON, "null"));
      return;
    }
    this.sink?.send(event.type === "session.created" ? event.json.replace(REDACTED_JSON, token) : event.json);
  }

  private run(effects: readonly Effect[]): void {
    for (const effect of effects) {
      if (this.runner === null && effect.kind !== "close") {
        this.runner = this.deps.openRunner(this.sessionId, (output) => void this.enqueue(output));
        this.runner.configure(this.state.config);
      }
      switch (effect.kind) {
        case "submit":
          this.runner?.submit(effect.unit);
          break;
        case "abort":
          this.runner?.abort(effect.epoch);
          break;
        case "configure":
          this.runner?.configure(effect.config);
          break;
        case "close":
          void this.runner?.close();
          this.runner = null;
          break;
        default: {
          const unhandled: never = effect;
          throw new Error(`unhandled effect ${JSON.stringify(unhandled)}`);
        }
      }
    }
  }
}
