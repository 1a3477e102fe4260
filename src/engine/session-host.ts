import { type Observable, Subject } from "rxjs";
import type { Input, SessionId, SessionState } from "../domain/index.ts";
import {
  type CommittedStep,
  type EventEnvelope,
  envelopes,
  type WireEvent,
  type WireState,
  wire,
} from "../projections/index.ts";
import type { SessionSink } from "./attachment.ts";
import { CommandPreparation } from "./command-preparation.ts";
import { errorMessage } from "./error-message.ts";
import { streamOf } from "./log.ts";
import { type InputCost, Mailbox, type Pending } from "./mailbox.ts";
import { createOutputAudio, type OutputAudio } from "./output-audio.ts";
import { WrongExpectedRevisionError } from "./ports/index.ts";
import { RunnerBinding } from "./runner-binding.ts";
import type { HostDeps } from "./session-host-parts.ts";
import { type ClientFrame, InputAdmission } from "./session-input.ts";
import { type DecidedBatch, SessionLog } from "./session-log.ts";
import { SessionSockets } from "./session-sockets.ts";
import { foldLog, type RecoveredLog } from "./step.ts";

export type { SessionSink } from "./attachment.ts";

/** Why `SessionHost.fail` let the clients go: the code they get, and what failed. */
type Failure =
  | { readonly code: "runtime_append_failed"; readonly what: "appended to" }
  | { readonly code: "internal_error"; readonly what: "read" };

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
export class SessionHost extends SessionSockets {
  /**
   * The session's committed stream: each input with its decisions and server events, emitted only after their
   * append, in log order. Its first subscriber is the socket (`publish`); every live view is a projection of it.
   */
  readonly committed$ = new Subject<CommittedStep>();
  /** Domain events with their metadata, after append: `committed$` through `envelopes()`. */
  readonly events$: Observable<EventEnvelope> = this.committed$.pipe(envelopes());
  /** Server events, after append: `committed$` through `wire()` (for observers; sockets use the sink). */
  readonly wire$: Observable<WireEvent> = this.committed$.pipe(wire());
  /** The session's position in its log: snapshot, revision, chain head (src/engine/session-log.ts). */
  private readonly log: SessionLog;
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
  protected get state(): SessionState {
    return this.log.snapshot.state;
  }
  protected get wire(): WireState {
    return this.log.snapshot.wire;
  }
  /** When the socket was last written server events, during `deliver` (performance.now() ms; null: not yet). */
  private lastWriteAt: number | null = null;
  /** The model's audio in the session's output format, converted as each output is decided. */
  private readonly outputAudio: OutputAudio;
  /** The client frames' way in: limits, refusals, appends prepared on arrival (src/engine/session-input.ts). */
  private readonly admission: InputAdmission;

  constructor(
    readonly sessionId: SessionId,
    resumeToken: string | null,
    private readonly deps: SessionHostDeps,
    recovered: (RecoveredLog & { readonly replay?: readonly WireEvent[] }) | null = null,
  ) {
    super(resumeToken, recovered, deps.measureJournal === true, deps.now);
    this.mailbox = new Mailbox(deps.inputLimits);
    this.preparation = new CommandPreparation(deps.createResampler, deps.vad);
    this.log = new SessionLog(sessionId, deps.store, recovered, deps.onAppended);
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
    this.admission = new InputAdmission(
      {
        state: () => this.state,
        headSeq: () => this.wire.seq,
        faulted: () => this.faulted,
        push: (pending) => this.push(pending),
        idle: () => this.draining ?? Promise.resolve(),
        wake: () => {
          if (this.draining === null && this.mailbox.length > 0 && !this.faulted) void this.startDrain();
        },
      },
      deps,
      this.mailbox,
      this.preparation,
    );
    this.outputAudio = createOutputAudio(deps.createOutputResampler ?? deps.createResampler);
    this.binding = new RunnerBinding(
      {
        sessionId,
        openRunner: (config, history, emit) => deps.openRunner(sessionId, config, history, emit),
        state: () => this.state,
        onFault: (operation, error) => deps.onRunnerFault?.(this, operation, error),
        enqueue: (input) => void this.enqueue(input),
        output: (make, arrived) => void this.push({ input: make, barrier: false, arrived }),
        now: deps.now,
        outputAudio: this.outputAudio,
      },
      recovered?.refAudio ?? null,
      recovered?.unansweredAppends ?? [],
    );
  }

  /** The state after the last drain. */
  get current(): SessionState {
    return this.state;
  }

  /**
   * Completes a claimed resume in mailbox order: reads the log, re-renders the events after `lastReceivedSeq`,
   * records the attachment, then sends `session.resumed`, the missed events in order, and from then on the live
   * ones to `sink`; the superseded socket gets `session.replaced`.
   */
  resume(generation: number, lastReceivedSeq: number, sink: SessionSink): Promise<void> {
    const at = this.deps.now();
    return this.push({
      input: async () => {
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
      barrier: true,
      configures: true,
    });
  }

  /** Enqueues an input that is already complete (session opened, stage output, timer, attachment). */
  enqueue(input: Input): Promise<void> {
    const output = input.type === "StageOutputReceived";
    return this.push({
      input: async () => input,
      barrier: false,
      ...(output ? { arrived: performance.now() } : {}),
      ...(!output && input.type !== "TimerFired" ? { configures: true } : {}),
    });
  }

  /**
   * Enqueues a client frame. `frame` is decoded already, or a decoder that the mailbox calls with the session's
   * configuration as the inputs before it left it, so a `session.update` that changes the input format applies to
   * the very next append (arrival order). Audio is then converted to the runner's rate and run through VAD: on
   * arrival when no frame before it that may change the configuration waits, so the runner's outputs need not
   * wait for it (client frames stay in arrival order; see `Pending.client`). Refused before it is accepted, with
   * `input_backpressure`, beyond the input limits and rates (src/engine/session-input.ts).
   */
  submit(frame: ClientFrame, cost: InputCost = { bytes: 0, turn: false }): Promise<void> {
    return this.admission.submit(frame, cost);
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

  /** Queues `pending` and starts a drain unless one runs; resolves as the drain that decides it does. */
  private push(pending: Pending): Promise<void> {
    // Given up: nothing reaches the log again.
    if (this.fenced) return Promise.resolve();
    this.mailbox.push(pending);
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
      const decided = await this.log.decide(batch);
      // A resume's read of the log failed: nothing of the batch was appended or sent.
      if ("untaken" in decided) {
        this.fail(decided.untaken, READ_FAILED);
        return;
      }
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
   * Appends a decided batch (`SessionLog.commit`: one transaction after the chain head). Returns the revision of its
   * last entry, or null when the append failed (the clients are let go of; see `fail`).
   */
  private async commit(decided: DecidedBatch): Promise<number | null> {
    try {
      return await this.log.commit(decided);
    } catch (error) {
      this.fail(error, APPEND_FAILED);
      return null;
    }
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
    this.deps.runTimers?.(this, decided.effects);
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
      const log = await this.log.reread();
      this.binding.reset(log.refAudio, log.unansweredAppends ?? []);
      this.remeasure(log.replay);
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
}
