import { Subject } from "rxjs";
import {
  type AudioAppend,
  type DomainEvent,
  decide,
  evolve,
  type Input,
  initialState,
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
import type { DecodedFrame } from "../protocol/index.ts";
import { type Effect, effectsOf } from "./effects.ts";
import { decisionEntry, inputEntry, streamOf } from "./log.ts";
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
}

type Pending = () => Promise<Input>;

/**
 * One session's single writer (DESIGN.md, rule 5): a mailbox that serialises every input, decides it, appends the
 * input and its decisions in one transaction per drain (group commit), and only then publishes the server events
 * and runs the effects (rule 3, write before send).
 */
export class SessionHost {
  /** Server events, published after they are appended. Hot: subscribe before the first input is enqueued. */
  readonly wire$ = new Subject<WireEvent>();
  /** Domain events with their metadata, published after append, for projections. */
  readonly events$ = new Subject<EventEnvelope>();
  private state: SessionState = initialState;
  private wire: WireState = initialWireState;
  private revision: ExpectedRevision = "no_stream";
  private readonly queue: Pending[] = [];
  private draining: Promise<void> | null = null;
  private runner: RunnerSession | null = null;
  private resampler: { rate: number; resampler: Resampler } | null = null;
  private failed = false;

  constructor(
    readonly sessionId: SessionId,
    /** The plain resume token, held in memory only; the log keeps its SHA-256. */
    readonly resumeToken: string | null,
    private readonly deps: SessionHostDeps,
  ) {}

  /** The state after the last drain. */
  get current(): SessionState {
    return this.state;
  }

  get isClosed(): boolean {
    return this.state.phase === "closed" || this.failed;
  }

  /** Enqueues an input that is already complete (session opened, stage output, timer, attachment). */
  enqueue(input: Input): Promise<void> {
    return this.push(async () => input);
  }

  /** Enqueues a decoded client frame; audio is converted to the runner's rate and run through VAD in order. */
  submit(frame: DecodedFrame): Promise<void> {
    const at = this.deps.now();
    if (frame.type === "session.resume") {
      // A resume on a socket that already holds a session: refused, the session goes on.
      const command = {
        type: "invalid",
        eventId: frame.eventId,
        code: "invalid_session_resume",
        message: "session.resume must be the first message on a new socket",
        param: null,
        eventType: "session.resume",
      } as const;
      return this.push(async () => ({ type: "CommandReceived", at, data: { command } }));
    }
    if (frame.type === "session.event_ack") {
      // The head is stamped when the ack is decided, in mailbox order, so the log records what it was checked against.
      return this.push(async () => ({
        type: "CommandReceived",
        at,
        data: { command: { ...frame, headSeq: this.wire.seq } },
      }));
    }
    if (frame.type !== "input_audio_buffer.append") {
      return this.push(async () => ({ type: "CommandReceived", at, data: { command: frame } }));
    }
    return this.push(async () => ({ type: "CommandReceived", at, data: { command: await this.prepareAppend(frame) } }));
  }

  /** Resolves once every input enqueued so far is decided, appended and published. */
  async settled(): Promise<void> {
    while (this.draining !== null) await this.draining;
  }

  private push(pending: Pending): Promise<void> {
    if (this.failed) return Promise.resolve();
    this.queue.push(pending);
    if (this.draining === null) {
      this.draining = this.drain().finally(() => {
        this.draining = null;
      });
    }
    return this.draining;
  }

  private async prepareAppend(
    frame: Extract<DecodedFrame, { type: "input_audio_buffer.append" }>,
  ): Promise<AudioAppend> {
    const target = this.state.capabilities.inputSampleRateHz;
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

  private async drain(): Promise<void> {
    while (this.queue.length > 0 && !this.failed) {
      const batch = this.queue.splice(0);
      const entries: NewEntry[] = [];
      const outgoing: WireEvent[] = [];
      const envelopes: EventEnvelope[] = [];
      const effects: Effect[] = [];
      let state = this.state;
      let wire = this.wire;
      for (const pending of batch) {
        const input = await pending();
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
        this.revision = await this.deps.store.append(streamOf(this.sessionId), entries, this.revision);
      } catch (error) {
        this.failed = true;
        this.deps.onAppendFailed(this, error);
        await this.runner?.close();
        return;
      }
      this.state = state;
      this.wire = wire;
      for (const event of outgoing) this.wire$.next(event);
      for (const envelope of envelopes) this.events$.next(envelope);
      this.run(effects);
      if (state.phase === "closed") {
        this.wire$.complete();
        this.events$.complete();
        this.deps.onClosed(this);
        return;
      }
    }
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
