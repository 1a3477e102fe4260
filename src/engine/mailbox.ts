import type { Input, SessionState } from "../domain/index.ts";

/** One input waiting in a session's mailbox. */
export interface Pending {
  /**
   * Makes the input, given the state that every input before it in the mailbox led to; null: the client frame is
   * dropped as it is decided (beyond the event rate, told already) and nothing of it is logged.
   */
  readonly input: (state: SessionState) => Promise<Input | null>;
  /** A barrier is decided in a drain of its own, after everything before it was published (resume). */
  readonly barrier: boolean;
  /** `performance.now()` when a runner output arrived (the engine-added latency starts there). */
  readonly arrived?: number;
  /**
   * A client frame. Client frames are decided in arrival order; `ready` is false while its command is still being
   * prepared (an append's resampling and VAD, started on arrival), and then it and the client frames after it wait
   * while the runner's outputs and timers behind them go ahead (issue 11: VAD off the mailbox's critical path).
   */
  readonly client?: { ready: boolean; readonly prepared: Promise<unknown> | null };
  /** May change the configuration a client frame is decoded with: counted in `Mailbox.configuring` until decided. */
  readonly configures?: true;
}

/**
 * A client frame's cost against the input limits: its bytes, whether it is a commit (a turn), and, for a socket's
 * frame, what it looks like before it is decoded (the socket's sniff of its type): `event` is counted against the
 * session's event rate at once (a flood is dropped without being decoded), `append` once it decodes as something
 * else. Absent: not counted (frames the server makes itself, as the chat completions route does from one request).
 */
export interface InputCost {
  readonly bytes: number;
  readonly turn: boolean;
  readonly sniffed?: "append" | "event";
}

/**
 * A session's mailbox (DESIGN.md, rule 5: one writer per session): the inputs waiting to be decided, in order, how
 * much client input waits (bytes and commits, for `input_backpressure`), how many waiting inputs may change the
 * configuration a client frame is decoded with, and the batch a drain takes next. The session host drains it.
 */
export class Mailbox {
  private readonly queue: Pending[] = [];
  private pendingBytes = 0;
  private pendingTurns = 0;
  /** Waiting inputs that may change the configuration: while any waits, appends are not prepared on arrival. */
  private configuringCount = 0;
  /** Set while a drain waits for a client frame being prepared: a new input resumes it. */
  private wake: (() => void) | null = null;

  constructor(
    /** `max_pending_input_bytes_per_session` and `max_pending_turns_per_session`; absent: no limit. */
    private readonly limits?: { readonly maxPendingBytes: number; readonly maxPendingTurns: number },
  ) {}

  get length(): number {
    return this.queue.length;
  }

  /** Whether an input that may change the configuration waits (then appends are prepared when decided). */
  get configuring(): boolean {
    return this.configuringCount > 0;
  }

  /** Why a client frame of `cost` is refused now (`bytes` or `turns` over the limit), or null when it is taken. */
  refusal(cost: InputCost): "bytes" | "turns" | null {
    const limits = this.limits;
    if (limits === undefined) return null;
    if (this.pendingBytes + cost.bytes > limits.maxPendingBytes) return "bytes";
    if (cost.turn && this.pendingTurns + 1 > limits.maxPendingTurns) return "turns";
    return null;
  }

  /** Counts a client frame that was taken; the returned function uncounts it when its input is made. */
  take(cost: InputCost): () => void {
    this.pendingBytes += cost.bytes;
    if (cost.turn) this.pendingTurns += 1;
    return () => {
      this.pendingBytes -= cost.bytes;
      if (cost.turn) this.pendingTurns -= 1;
    };
  }

  push(pending: Pending): void {
    this.queue.push(pending);
    if (pending.configures) this.configuringCount += 1;
    this.wake?.();
  }

  /** Puts `pending` first (a recovery, decided before anything queued after the fault). */
  pushFirst(pending: Pending): void {
    this.queue.unshift(pending);
  }

  /** Inputs of a decided batch that configured: no longer waiting. */
  decided(batch: readonly Pending[]): void {
    for (const pending of batch) if (pending.configures) this.configuringCount -= 1;
  }

  /** Drops every waiting input and what it counted (a failed append: its clients resume from what they got). */
  clear(): void {
    this.queue.length = 0;
    this.pendingBytes = 0;
    this.pendingTurns = 0;
    this.configuringCount = 0;
  }

  /**
   * The next batch: everything up to the first barrier, or the barrier alone; a client frame still being prepared
   * stays, with everything after it but the runner's outputs and timers, which go ahead. Empty when the first input
   * is a client frame still being prepared and nothing may pass it.
   */
  nextBatch(): Pending[] {
    const first = this.queue[0];
    if (first?.barrier) return this.queue.splice(0, 1);
    const batch: Pending[] = [];
    const waiting: Pending[] = [];
    let clientWaits = false;
    for (const [i, pending] of this.queue.entries()) {
      if (pending.barrier) {
        waiting.push(...this.queue.slice(i));
        break;
      }
      // Only the runner's outputs and timers pass a client frame that waits: the session's opening, attachments and
      // faults keep their place behind what the client sent before them.
      const passes = pending.client === undefined && !pending.configures;
      if ((pending.client !== undefined && !pending.client.ready) || (clientWaits && !passes)) {
        clientWaits = true;
        waiting.push(pending);
      } else {
        batch.push(pending);
      }
    }
    this.queue.splice(0, this.queue.length, ...waiting);
    return batch;
  }

  /** Waits until the first waiting client frame is prepared, or a new input arrives (which may go ahead of it). */
  async nextReady(): Promise<void> {
    await Promise.race([
      this.queue[0]?.client?.prepared?.catch(() => undefined),
      new Promise<void>((resolve) => {
        this.wake = resolve;
      }),
    ]);
    this.wake = null;
  }
}
