import { type Observable, Subject } from "rxjs";
import type { Input, SessionConfig, SessionId, SessionState } from "../domain/index.ts";
import {
  type CommittedStep,
  type EventEnvelope,
  envelopes,
  type WireEvent,
  type WireState,
  wire,
} from "../projections/index.ts";
import type { DecodedFrame } from "../protocol/index.ts";
import { Attachment, type SessionSink } from "./attachment.ts";
import { CHAIN_GENESIS, chained } from "./chain.ts";
import { CommandPreparation } from "./command-preparation.ts";
import type { Effect } from "./effects.ts";
import { errorMessage } from "./error-message.ts";
import { InputRates } from "./event-rate.ts";
import { streamOf } from "./log.ts";
import { type InputCost, Mailbox, type Pending } from "./mailbox.ts";
import { createOutputAudio, type OutputAudio } from "./output-audio.ts";
import { type ExpectedRevision, type NewEntry, WrongExpectedRevisionError } from "./ports/index.ts";
import { RunnerBinding } from "./runner-binding.ts";
import { addToJournal, type HostDeps, measure, rejected } from "./session-host-parts.ts";
import {
  foldLog,
  INITIAL_SNAPSHOT,
  type RecoveredLog,
  type SessionSnapshot,
  stepSession,
  withUnansweredAppends,
} from "./step.ts";

export type { SessionSink } from "./attachment.ts";

/** A mailbox batch, stepped: the session after it, what it appends, its steps in order, effects and server events. */
interface DecidedBatch {
  readonly snapshot: SessionSnapshot;
  readonly entries: readonly NewEntry[];
  readonly steps: readonly Omit<CommittedStep, "revision">[];
  readonly effects: readonly Effect[];
}

/** Why `SessionHost.fail` let the clients go: the code they get, and what failed. */
type Failure =
  | { readonly code: "runtime_append_failed"; readonly what: "appended to" }
  | {
      readonly code: "internal_error";
      readonly what: "read";
    };

const APPEND_FAILED: Failure = { code: "runtime_append_failed", what: "appended to" };
const READ_FAILED: Failure = { code: "internal_error", what: "read" };

/** What a session host needs from the engine (src/engine/session-host-parts.ts). */
export type SessionHostDeps = HostDeps<SessionHost>;

/**
 * One session's single writer (DESIGN.md, rule 5): a mailbox that serialises every input, decides it, appends the
 * input and its decisions in one transaction per drain (group commit), and only then publishes the server events
 * and runs the effects (rule 3, write before send). The resume journal is the log itself: a resume re-renders the
 * recorded decisions through the wire projection (BEHAVIOUR.md, "Resume", ours).
 */
export class SessionHost {
  /**
   * The session's committed stream: each input with its decisions and server events, emitted only after their
   * append, in log order. Its first subscriber is the socket (`publish`); every live view is a projection of it.
   */
  readonly committed$ = new Subject<CommittedStep>();
  /** Domain events with their metadata, after append: `committed$` through `envelopes()`. */
  readonly events$: Observable<EventEnvelope> = this.committed$.pipe(envelopes());
  /** Server events, after append: `committed$` through `wire()` (for observers; sockets use the sink). */
  readonly wire$: Observable<WireEvent> = this.committed$.pipe(wire());
  /** The session's state and wire projection after the last commit. */
  private snapshot: SessionSnapshot;
  private revision: ExpectedRevision;
  /** The chain value of the last entry appended (src/engine/chain.ts). */
  private chainHead: string;
  private readonly mailbox: Mailbox;
  private draining: Promise<void> | null = null;
  private readonly binding: RunnerBinding;
  private readonly preparation: CommandPreparation;
  /**
   * Set when an append failed: the in-memory state may be ahead of the log, so the next drain rebuilds the session
   * from its log first (and records `SessionRecovered{append_failed}`) before it decides anything.
   */
  private faulted = false;
  /** Set once the session is another node's (or given up): nothing is decided or written again. */
  private fenced = false;
  /** The socket that holds the session, its resume token and the claims of resumes (engine/attachment.ts). */
  private readonly attachment: Attachment;
  private get state(): SessionState {
    return this.snapshot.state;
  }
  private get wire(): WireState {
    return this.snapshot.wire;
  }
  /** When the socket was last written server events, during `deliver` (performance.now() ms; null: not yet). */
  private lastWriteAt: number | null = null;
  /** `journal[seq]`: bytes of JSON text of the server events 1..seq; only with `measureJournal`. */
  private journal: number[] | null;
  /** The model's audio in the session's output format, converted as each output is decided. */
  private readonly outputAudio: OutputAudio;
  /** The token buckets of the session's client events and audio appends (`deps.eventRate`, `deps.appendRate`). */
  private readonly rates: InputRates;

  constructor(
    readonly sessionId: SessionId,
    resumeToken: string | null,
    private readonly deps: SessionHostDeps,
    recovered: (RecoveredLog & { readonly replay?: readonly WireEvent[] }) | null = null,
  ) {
    this.mailbox = new Mailbox(deps.inputLimits);
    this.preparation = new CommandPreparation(deps.createResampler, deps.vad);
    this.snapshot = recovered === null ? INITIAL_SNAPSHOT : { state: recovered.state, wire: recovered.wire };
    this.revision = recovered?.revision ?? "no_stream";
    this.chainHead = recovered?.chainHead ?? CHAIN_GENESIS;
    this.attachment = new Attachment(
      resumeToken,
      recovered?.state.attachmentGeneration ?? 1,
      recovered?.state.resumeTokenSha256 ?? null,
    );
    this.journal = deps.measureJournal ? measure(recovered?.replay ?? []) : null;
    // The socket is the committed stream's first subscriber: a step's server events go out before any view moves.
    this.committed$.subscribe((step) => {
      let wrote = false;
      for (const decision of step.decisions)
        for (const event of decision.wire) {
          this.publish(event);
          wrote = true;
        }
      // When the socket got the step's events, before the views that follow it move (`onDelivered`).
      if (wrote) this.lastWriteAt = performance.now();
    });
    this.rates = new InputRates(deps);
    this.outputAudio = createOutputAudio(deps.createOutputResampler ?? deps.createResampler);
    this.binding = new RunnerBinding(
      {
        sessionId,
        openRunner: (config, history, emit) => deps.openRunner(sessionId, config, history, emit),
        state: () => this.state,
        onFault: (operation, error) => deps.onRunnerFault?.(this, operation, error),
        enqueue: (input) => void this.enqueue(input),
        output: (make, arrived) => void this.push(make, false, arrived),
        now: deps.now,
        outputAudio: this.outputAudio,
      },
      recovered?.refAudio ?? null,
      recovered?.unansweredAppends ?? [],
    );
  }

  /** When the last socket let go of the session (ms since the Unix epoch, engine clock); null while one holds it. */
  get detachedAt(): number | null {
    return this.attachment.detachedAt;
  }

  /** A session rebuilt after a restart counts as detached since its last logged input (ms, engine clock). */
  markDetached(at: number): void {
    this.attachment.markDetached(at);
  }

  /** Bytes of JSON text of the server events after `seq` up to the head (0 when not measured). */
  journalBytesAfter(seq: number): number {
    const journal = this.journal;
    if (journal === null) return 0;
    return (journal[this.wire.seq] ?? 0) - (journal[Math.max(0, seq)] ?? 0);
  }

  /** The state after the last drain. */
  get current(): SessionState {
    return this.state;
  }

  get isClosed(): boolean {
    return this.state.phase === "closed";
  }

  /** The last `server_event_seq` published. */
  get headSeq(): number {
    return this.wire.seq;
  }

  /** The generation of the socket that holds (or is about to hold) the session. */
  get generation(): number {
    return this.attachment.generation;
  }

  /** Binds the socket that opened the session. */
  attach(sink: SessionSink): void {
    this.attachment.attach(sink);
  }

  /** Unbinds `sink` if it is still the current one (a superseded socket's drop changes nothing). */
  release(sink: SessionSink): boolean {
    return this.attachment.release(sink, this.deps.now());
  }

  /** Whether `tokenSha256` (hex) is the current token's digest, without claiming anything; `equal` is constant-time. */
  holdsToken(tokenSha256: string, equal: (a: string, b: string) => boolean): boolean {
    return !this.isClosed && this.attachment.holds(tokenSha256, this.state.resumeTokenSha256, equal);
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
    if (!this.holdsToken(tokenSha256, equal)) return null;
    return this.attachment.claim(newToken, newTokenSha256);
  }

  /**
   * Completes a claimed resume in mailbox order: reads the log, re-renders the events after `lastReceivedSeq`,
   * records the attachment, then sends `session.resumed`, the missed events in order, and from then on the live
   * ones to `sink`; the superseded socket gets `session.replaced`.
   */
  resume(generation: number, lastReceivedSeq: number, sink: SessionSink): Promise<void> {
    const at = this.deps.now();
    return this.push(
      async () => {
        // Known before the read: a read that fails lets this socket go too.
        this.attachment.switchTo(sink, []);
        const { replay } = foldLog(await this.deps.store.read(streamOf(this.sessionId)));
        this.attachment.switchTo(
          sink,
          replay.filter((e) => e.seq !== null && e.seq > lastReceivedSeq && e.seq <= this.wire.seq),
        );
        return {
          type: "AttachmentChanged",
          at,
          data: {
            change: "resumed",
            generation,
            resumeTokenSha256: this.attachment.tokenSha256Claimed,
            lastReceivedSeq,
          },
        };
      },
      true,
      undefined,
      undefined,
      true,
    );
  }

  /** Enqueues an input that is already complete (session opened, stage output, timer, attachment). */
  enqueue(input: Input): Promise<void> {
    const output = input.type === "StageOutputReceived";
    return this.push(
      async () => input,
      false,
      output ? performance.now() : undefined,
      undefined,
      !output && input.type !== "TimerFired",
    );
  }

  /**
   * Enqueues a client frame. `frame` is decoded already, or a decoder that the mailbox calls with the session's
   * configuration as the inputs before it left it, so a `session.update` that changes the input format applies to
   * the very next append (arrival order). Audio is then converted to the runner's rate and run through VAD: on
   * arrival when no frame before it that may change the configuration waits, so the runner's outputs need not
   * wait for it (client frames stay in arrival order; see `Pending.client`).
   *
   * Refused before it is accepted, with `input_backpressure` recorded in order and nothing of it buffered: a frame
   * beyond the pending bytes or commits (`inputLimits`), and a socket's frame (`cost.sniffed`) that is not an audio
   * append beyond the event rate (`eventRate`): the first such refusal of a second is recorded and told, the others
   * of that second are dropped without a trace (src/engine/event-rate.ts). A frame the socket took for an event is
   * counted before it is decoded; one it took for an append, once it decodes as something else.
   */
  submit(
    frame: DecodedFrame | ((config: SessionConfig) => DecodedFrame),
    cost: InputCost = { bytes: 0, turn: false },
  ): Promise<void> {
    const at = this.deps.now();
    const limits = this.deps.inputLimits;
    // A socket's frame that does not look like an append is counted against the event rate before it is decoded;
    // one that does (`uncounted`) once it is decoded, unless it is one.
    let uncounted = cost.sniffed === "append";
    if (cost.sniffed === "event" || cost.sniffed === "append") {
      const refused = this.rateLimited(frame, at, cost.sniffed);
      if (refused !== null) return refused;
    }
    const over = this.mailbox.refusal(cost);
    if (over !== null) {
      return this.refuse(
        frame,
        at,
        over === "bytes"
          ? `more than ${limits?.maxPendingBytes} bytes of input are waiting to be processed; slow down`
          : `more than ${limits?.maxPendingTurns} commits are waiting to be processed; slow down`,
      );
    }
    // When every client frame waiting is an append being prepared (none changes the configuration), the state's
    // configuration is the one this frame will be decided under: an append starts its resampling and VAD now.
    let lazy = frame;
    if (!this.mailbox.configuring && !this.faulted) {
      const decoded = typeof frame === "function" ? frame(this.state.config) : frame;
      if (decoded.type === "input_audio_buffer.append") {
        const taken = this.mailbox.take(cost);
        const command = this.preparation.commandOf(decoded, this.state, this.wire.seq);
        const client = { ready: false, prepared: command };
        const settled = (): void => {
          client.ready = true;
          if (this.draining === null && this.mailbox.length > 0 && !this.faulted) void this.startDrain();
        };
        command.then(settled, settled);
        return this.push(
          async () => {
            taken();
            return { type: "CommandReceived", at, data: { command: await command } };
          },
          false,
          undefined,
          client,
        );
      }
      if (uncounted) {
        uncounted = false;
        const refused = this.rateLimited(decoded, at, "event");
        if (refused !== null) return refused;
      }
      lazy = decoded;
    }
    const taken = this.mailbox.take(cost);
    return this.push(
      async (state) => {
        taken();
        const decoded = typeof lazy === "function" ? lazy(state.config) : lazy;
        if (uncounted && decoded.type !== "input_audio_buffer.append") {
          const verdict = this.rates.count(at, "event");
          if (verdict.kind === "drop") return null;
          if (verdict.kind === "tell") return rejected(decoded, at, this.rates.message(verdict.dropped, "event"));
        }
        return {
          type: "CommandReceived",
          at,
          data: { command: await this.preparation.commandOf(decoded, state, this.wire.seq) },
        };
      },
      false,
      undefined,
      { ready: true, prepared: null },
      true,
    );
  }

  /**
   * The event rate's verdict on a client frame at `at` (ms): null when it passes; else the frame is refused (told:
   * recorded as `input_backpressure`) or dropped (nothing recorded), and the promise resolves as `submit`'s does.
   */
  private rateLimited(
    frame: DecodedFrame | ((config: SessionConfig) => DecodedFrame),
    at: number,
    kind: "event" | "append",
  ): Promise<void> | null {
    const verdict = this.rates.count(at, kind);
    if (verdict.kind === "pass") return null;
    if (verdict.kind === "drop") return this.draining ?? Promise.resolve();
    return this.refuse(frame, at, this.rates.message(verdict.dropped, kind));
  }

  /** Records a client frame refused with `input_backpressure` before it is accepted: nothing of it is buffered. */
  private refuse(
    frame: DecodedFrame | ((config: SessionConfig) => DecodedFrame),
    at: number,
    message: string,
  ): Promise<void> {
    const decoded = typeof frame === "function" ? frame(this.state.config) : frame;
    return this.push(async () => rejected(decoded, at, message), false, undefined, { ready: true, prepared: null });
  }

  /** Resolves once every input enqueued so far is decided, appended and published. */
  async settled(): Promise<void> {
    while (this.draining !== null) await this.draining;
  }

  /** Stops the runner without deciding anything (server shutdown: the session stays open in the log). */
  async stop(): Promise<void> {
    await this.settled();
    this.outputAudio.close();
    await this.binding.stop();
  }

  private push(
    input: Pending["input"],
    barrier = false,
    arrived?: number,
    client?: Pending["client"],
    configures = false,
  ): Promise<void> {
    // Given up: nothing reaches the log again.
    if (this.fenced) return Promise.resolve();
    this.mailbox.push({
      input,
      barrier,
      ...(arrived === undefined ? {} : { arrived }),
      ...(client === undefined ? {} : { client }),
      ...(configures ? { configures: true } : {}),
    });
    return this.draining ?? this.startDrain();
  }

  /**
   * Drains the mailbox. An input enqueued after the drain's last look at the queue but before it settled (a runner's
   * promise rejecting in a microtask, say) starts the next drain, so no input is left waiting.
   */
  private startDrain(): Promise<void> {
    const draining = this.drain().finally(() => {
      this.draining = null;
      if (this.mailbox.length > 0 && !this.faulted) void this.startDrain();
    });
    this.draining = draining;
    return draining;
  }

  private async drain(): Promise<void> {
    while (this.mailbox.length > 0) {
      if (this.fenced) return;
      if (this.faulted) {
        if (!(await this.rebuild())) return;
        // Decided in a batch of its own: what it ends goes out before anything queued after the fault.
        const at = this.deps.now();
        this.mailbox.pushFirst({
          input: async () => ({ type: "SessionRecovered", at, data: { reason: "append_failed" } }),
          barrier: true,
        });
      }
      const batch = this.mailbox.nextBatch();
      if (batch.length === 0) {
        // Only client frames wait, the first still being prepared: its settling continues this drain, and so does
        // a new input, which may be a runner output that goes ahead of it.
        await this.mailbox.nextReady();
        continue;
      }
      const decided = await this.decideBatch(batch);
      // A resume's read of the log failed: nothing of the batch was appended or sent.
      if (decided === null) return;
      if (decided.entries.length === 0) {
        // All of it reached a closed session: nothing to append, send or close again.
        this.mailbox.decided(batch);
        continue;
      }
      const revision = await this.commit(decided);
      if (revision === null) return;
      // Only now is the state's configuration the one after these inputs: later appends may be prepared on arrival.
      this.mailbox.decided(batch);
      this.deliver(batch, decided, revision);
      if (decided.snapshot.state.phase === "closed") {
        this.close(decided);
        return;
      }
    }
  }

  /**
   * Takes each input of `batch` (awaiting the ones still being prepared) and steps it (`stepSession`, pure) from the
   * session as it is. Returns null when an input could not be taken (only a resume's read of the log fails here; an
   * append's VAD failing is a refusal): the clients are let go of as after a failed append.
   */
  private async decideBatch(batch: readonly Pending[]): Promise<DecidedBatch | null> {
    let snapshot = this.snapshot;
    const entries: NewEntry[] = [];
    const steps: Omit<CommittedStep, "revision">[] = [];
    const effects: Effect[] = [];
    for (const pending of batch) {
      let input: Input | null;
      try {
        input = await pending.input(snapshot.state);
      } catch (error) {
        this.fail(error, READ_FAILED);
        return null;
      }
      // A client frame dropped as it was decided (beyond the event rate, unanswered): nothing of it is logged.
      if (input === null) continue;
      // What reaches a closed session (a runner output that was on its way) changes nothing and is not logged:
      // after SessionClosed the log holds at most the runner's fault in closing (RunnerFaulted), a fact about it.
      if (snapshot.state.phase === "closed" && input.type !== "RunnerFaulted") continue;
      const step = stepSession(snapshot, input);
      snapshot = step.snapshot;
      for (const entry of step.entries) entries.push(entry);
      for (const effect of step.effects) effects.push(effect);
      steps.push({ input, decisions: step.decisions, state: snapshot.state });
    }
    return { snapshot, entries, steps, effects };
  }

  /**
   * Appends a decided batch in one transaction (group commit) after the chain head, and makes its snapshot the
   * session's. Returns the revision of its last entry, or null when the append failed (the clients are let go of;
   * see `fail`).
   */
  private async commit(decided: DecidedBatch): Promise<number | null> {
    const chain = chained(this.chainHead, decided.entries);
    let revision: number;
    try {
      const started = performance.now();
      revision = await this.deps.store.append(streamOf(this.sessionId), chain.entries, this.revision);
      this.deps.onAppended?.(decided.entries.length, performance.now() - started);
    } catch (error) {
      this.fail(error, APPEND_FAILED);
      return null;
    }
    this.revision = revision;
    this.chainHead = chain.head;
    this.snapshot = decided.snapshot;
    return revision;
  }

  /**
   * After the append (rule 3, write before send): emits each step on the committed stream, in log order (the socket
   * is its first subscriber: the server events go out now), then runs the effects.
   */
  private deliver(batch: readonly Pending[], decided: DecidedBatch, lastRevision: number): void {
    const held = this.attachment.held;
    this.lastWriteAt = null;
    // The revision of each step's input: the batch's entries end at the revision the append returned.
    let revision = lastRevision - decided.entries.length + 1;
    for (const step of decided.steps) {
      this.committed$.next({ revision, ...step });
      revision += 1 + step.decisions.length;
    }
    const written = this.lastWriteAt;
    if (held && written !== null && this.deps.onDelivered !== undefined) {
      for (const pending of batch) if (pending.arrived !== undefined) this.deps.onDelivered(written - pending.arrived);
    }
    this.attachment.switched();
    this.binding.run(decided.effects);
  }

  /** The batch closed the session: its socket is told how, and the session's streams end. */
  private close(decided: DecidedBatch): void {
    const decisions = decided.steps.flatMap((step) => step.decisions);
    const closed = decisions.findLast((d) => d.envelope.event.type === "SessionClosed")?.envelope.event;
    this.attachment.ended(
      decisions.flatMap((d) => d.wire).at(-1)?.type ?? "session.closed",
      closed?.type === "SessionClosed" ? closed.data.reason : null,
    );
    this.outputAudio.close();
    this.committed$.complete();
    this.deps.onClosed(this);
  }

  /**
   * Gives the session up without writing (issue 22, part 4): its sockets get `runtime_append_failed` with `message`
   * and are closed (a client resumes, through its proxy, on the node that owns the session now), its runner is
   * stopped, and nothing is decided or appended again. For a fence (another node appended) and for a node that lost
   * its store.
   */
  relinquish(message: string): void {
    if (this.yieldTo(message)) this.letGo(message);
  }

  /**
   * Gives the session up to the node that takes it over (issue 33, part 2), keeping its sockets until `replaced` or
   * `letGo` tells them how it moved: its runner is stopped, what waits in the mailbox is dropped, and nothing is
   * decided, appended or sent again (frames that still arrive are dropped). Returns false when it was given up
   * already.
   */
  yieldTo(reason: string): boolean {
    if (this.fenced) return false;
    this.fence(reason);
    return true;
  }

  /**
   * After `yieldTo`: another node's socket resumed the session, so every socket here gets `session.replaced` (with
   * the generation the log gave the one that held it) and is closed (BEHAVIOUR.md, "Moves lose nothing").
   */
  replaced(): void {
    this.attachment.replacedElsewhere(this.state.attachmentGeneration, this.deps.now());
  }

  /**
   * After `yieldTo`: the session moved without a resume (a node that took it while this one's lease had run out):
   * every socket here gets `runtime_append_failed` with `message`, and resumes through its proxy.
   */
  letGo(message: string): void {
    this.attachment.fail("runtime_append_failed", message, this.state.attachmentGeneration, this.deps.now());
  }

  /** Fences the session here: nothing is decided or appended again; the engine is told (`onFenced`). */
  private fence(reason: string): void {
    this.fenced = true;
    this.faulted = true;
    this.mailbox.clear();
    this.binding.drop();
    this.outputAudio.close();
    this.committed$.complete();
    this.deps.onFenced?.(this, reason);
  }

  /** Given up (`relinquish`) or fenced: another node's now. */
  get isFenced(): boolean {
    return this.fenced;
  }

  /**
   * A failed append (BEHAVIOUR.md, "Errors": runtime_append_failed), or a resume's failed read of the log
   * (internal_error; the recovery is recorded as `append_failed` all the same). Nothing of the batch was sent, and
   * what waited behind it is dropped (its client is let go of and resumes from what it received). The runner's work
   * is lost with it, and the resume token and generation fall back to the logged ones: a resume claimed in the
   * failed batch was never answered.
   */
  private fail(error: unknown, failure: Failure): void {
    // Given up already: an append that was in flight then failing changes nothing.
    if (this.fenced) return;
    if (error instanceof WrongExpectedRevisionError) {
      // One writer per stream: a revision that moved on (or a fence) is another node that takes the session over.
      const message = "the session moved to another node: resume it to reach that node";
      const moved = this.deps.onMovedAway;
      if (moved === undefined) this.relinquish(message);
      else if (this.yieldTo(message)) moved(this);
      return;
    }
    this.faulted = true;
    this.mailbox.clear();
    const message = `the session log could not be ${failure.what}: ${errorMessage(error)}`;
    this.attachment.fail(failure.code, message, this.state.attachmentGeneration, this.deps.now());
    this.binding.drop();
    this.deps.onAppendFailed(this, error);
  }

  /**
   * Rebuilds state, wire projection, revision and clip from the log after a failed append. Returns false (and stays
   * faulted, with the queue dropped) when the log cannot be read either.
   */
  private async rebuild(): Promise<boolean> {
    try {
      const entries = await this.deps.store.read(streamOf(this.sessionId));
      const log = withUnansweredAppends(foldLog(entries), entries);
      this.snapshot = { state: log.state, wire: log.wire };
      this.revision = log.revision < 0 ? "no_stream" : log.revision;
      this.chainHead = log.chainHead;
      this.binding.reset(log.refAudio, log.unansweredAppends ?? []);
      if (this.journal !== null) this.journal = measure(log.replay);
      // Appends dropped with the queue may have reached the resampler and the VAD: both start afresh, as after a
      // restart.
      this.preparation.reset();
      this.faulted = false;
      return true;
    } catch (error) {
      this.mailbox.clear();
      this.deps.onAppendFailed(this, error);
      return false;
    }
  }

  /** Sends one appended server event to the socket; a resume switches sockets here, in stream order. */
  private publish(event: WireEvent): void {
    if (this.journal !== null) addToJournal(this.journal, event);
    this.attachment.publish(event, this.state.attachmentGeneration);
  }
}
