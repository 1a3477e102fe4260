import {
  type HistoryItem,
  type Input,
  type RefAudioInput,
  type RunnerOperation,
  type RunnerUnit,
  type SessionConfig,
  type SessionState,
  type StageOutput,
  stageOutputProblem,
} from "../domain/index.ts";
import { toHistory } from "../projections/index.ts";
import { type Effect, type RunnerEffect, splitEffects } from "./effects.ts";
import { errorMessage } from "./error-message.ts";
import type { OutputAudio } from "./output-audio.ts";
import type { RunnerSession } from "./ports/index.ts";

/** What a runner binding needs from its session host. */
export interface RunnerBindingDeps {
  readonly sessionId: string;
  /** Opens the model side of the session with the conversation heard so far; `emit` takes what the runner emits. */
  readonly openRunner: (
    config: SessionConfig,
    history: readonly HistoryItem[],
    emit: (output: StageOutput) => void,
  ) => RunnerSession;
  /** The session's state after its last drain. */
  readonly state: () => SessionState;
  /** A runner that broke its contract, for the server's log. */
  readonly onFault: (operation: RunnerOperation, error: unknown) => void;
  /** Enqueues a complete input in the session's mailbox (`RunnerFaulted`). */
  readonly enqueue: (input: Input) => void;
  /** Enqueues a runner output, made when it is decided, with the `performance.now()` it arrived at. */
  readonly output: (make: (state: SessionState) => Promise<Input>, arrived: number) => void;
  readonly now: () => number;
  readonly outputAudio: OutputAudio;
}

/**
 * The session's binding to its model runner (DESIGN.md, "Ports": ModelRunner): opens the runner when an effect
 * first needs it, hands it the effects of each drain (submit, abort, configure, resubmit, close), keeps the
 * `ref_audio` clip in force and the unanswered appends a rebuilt session's new runner hears again, and confines a
 * broken contract to this session: a throw, a rejected promise or a malformed output becomes a `RunnerFaulted`
 * input (recorded, then decided: the session ends with a coded error), after which nothing more is handed to the
 * runner and what it emits is dropped.
 */
export class RunnerBinding {
  private runner: RunnerSession | null = null;
  private faulted = false;
  /** The state the effects being run were decided on: what a runner opened for them has heard before them. */
  private decidedOn: SessionState;

  constructor(
    private readonly deps: RunnerBindingDeps,
    /** The `ref_audio` clip in force (bytes in memory; the log holds them once, in the update that set them). */
    private refAudio: RefAudioInput | null,
    /**
     * The appends of the utterances a rebuilt session's model had not answered or was still hearing, for its new
     * runner (`resubmit`).
     */
    private unansweredAppends: readonly Extract<RunnerUnit, { kind: "append" }>[],
  ) {
    this.decidedOn = deps.state();
  }

  /** After a rebuild from the log: the clip and the unanswered appends read back, and a runner that may run again. */
  reset(refAudio: RefAudioInput | null, unansweredAppends: readonly Extract<RunnerUnit, { kind: "append" }>[]): void {
    this.refAudio = refAudio;
    this.unansweredAppends = unansweredAppends;
    this.faulted = false;
    this.decidedOn = this.deps.state();
  }

  /** Lets go of the runner and closes it; its errors are confined as any other call's. */
  drop(): void {
    const runner = this.runner;
    this.runner = null;
    this.guard("close", () => runner?.close());
  }

  /** Closes the runner and waits for it (server shutdown); a failure is reported, never thrown. */
  async stop(): Promise<void> {
    const runner = this.runner;
    this.runner = null;
    try {
      await runner?.close();
    } catch (error) {
      this.deps.onFault("close", error);
    }
  }

  /**
   * Runs the runner's effects among one drain's `effects` (the timers' are the engine's: src/engine/timers.ts),
   * opening the runner first when none is open.
   */
  run(all: readonly Effect[]): void {
    const effects = splitEffects(all).runner;
    for (const effect of effects) {
      if (effect.kind === "configure" && effect.refAudio !== undefined) this.refAudio = effect.refAudio;
      if (this.faulted) {
        if (effect.kind === "close") this.runner = null;
        continue;
      }
      if (this.runner === null && effect.kind !== "close") {
        const opened = this.open(effects);
        if (opened === null) continue;
        this.guard("configure", () => opened.configure(this.deps.state().config, this.refAudio));
      }
      const runner = this.runner;
      switch (effect.kind) {
        case "submit":
          this.guard("submit", () => runner?.submit(effect.unit));
          break;
        case "abort":
          this.guard("abort", () => runner?.abort(effect.epoch));
          break;
        case "configure":
          this.guard("configure", () => runner?.configure(effect.config, this.refAudio));
          break;
        case "resubmit": {
          // The runner is a new one, in the epoch the recovery moved to: it hears the utterance as it was logged. An
          // append is given once, also when it holds the end of one utterance and the start of the next.
          const state = this.deps.state();
          const within = (u: Extract<RunnerUnit, { kind: "append" }>): boolean =>
            u.startMs < effect.toMs &&
            u.startMs + (u.audio.byteLength / 2 / state.capabilities.inputSampleRateHz) * 1000 > effect.fromMs;
          const units = this.unansweredAppends.filter(within);
          this.unansweredAppends = this.unansweredAppends.filter((u) => u.startMs >= effect.toMs);
          for (const unit of units) this.guard("submit", () => runner?.submit({ ...unit, epoch: state.epoch }));
          break;
        }
        case "close":
          this.runner = null;
          this.guard("close", () => runner?.close());
          break;
        default: {
          const unhandled: never = effect;
          throw new Error(`unhandled effect ${JSON.stringify(unhandled)}`);
        }
      }
    }
    this.decidedOn = this.deps.state();
  }

  /** Calls the runner, confining a broken contract to this session (see the class comment). */
  private guard(operation: RunnerOperation, call: () => unknown): void {
    try {
      const result = call();
      if (result instanceof Promise) result.catch((error: unknown) => this.fault(operation, error));
    } catch (error) {
      this.fault(operation, error);
    }
  }

  private fault(operation: RunnerOperation, error: unknown): void {
    if (this.faulted) return;
    this.faulted = true;
    this.deps.onFault(operation, error);
    this.deps.enqueue({
      type: "RunnerFaulted",
      at: this.deps.now(),
      data: { operation, message: errorMessage(error) },
    });
  }

  /**
   * What the runner emits: checked, stamped with the engine clock, and enqueued as an input. Audio is converted to
   * the session's output format when it is decided (a `session.update` ahead of it in the mailbox applies).
   */
  private received(output: StageOutput): void {
    if (this.faulted || this.deps.state().phase === "closed") return;
    const problem = stageOutputProblem(output);
    if (problem !== null) {
      this.fault("emit", new Error(`malformed stage output: ${problem}`));
      return;
    }
    const at = this.deps.now();
    this.deps.output(async (state) => {
      const delivered = this.deps.outputAudio.convert(state, output);
      return { type: "StageOutputReceived", at, data: delivered === null ? { output } : { output, delivered } };
    }, performance.now());
  }

  /**
   * Opens the runner for `effects` with the conversation heard before them: the items their decision created that
   * their units hand over (a user text, a function call's output, an assistant message) are left out of the history,
   * so that the model is given each once (issue 33, part 2: a restarted session's first command was seeded and then sent too).
   */
  private open(effects: readonly RunnerEffect[]): RunnerSession | null {
    try {
      const state = this.deps.state();
      const before = new Set(toHistory(this.decidedOn).map((item) => item.id));
      const texts = effects.flatMap((e) => (e.kind === "submit" && e.unit.kind === "text" ? [e.unit.text] : []));
      const outputs = new Set(
        effects.flatMap((e) =>
          e.kind === "submit" && (e.unit.kind === "function_call_output" || e.unit.kind === "item")
            ? [e.unit.kind === "item" ? e.unit.item.id : e.unit.itemId]
            : [],
        ),
      );
      const handedOver = (item: HistoryItem): boolean => {
        if (before.has(item.id)) return false;
        if (outputs.has(item.id)) return true;
        if (item.type === "function_call_output") return false;
        const at = item.type === "message" && item.role !== "assistant" ? texts.indexOf(item.text) : -1;
        if (at >= 0) texts.splice(at, 1);
        return at >= 0;
      };
      const history = toHistory(state).filter((item) => !handedOver(item));
      this.runner = this.deps.openRunner(state.config, history, (output) => this.received(output));
      return this.runner;
    } catch (error) {
      this.fault("open", error);
      return null;
    }
  }
}
