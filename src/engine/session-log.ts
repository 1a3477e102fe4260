import type { Input } from "../domain/index.ts";
import type { CommittedStep, WireEvent } from "../projections/index.ts";
import { CHAIN_GENESIS, chained } from "./chain.ts";
import type { Effect } from "./effects.ts";
import { streamOf } from "./log.ts";
import type { Pending } from "./mailbox.ts";
import type { EventStore, ExpectedRevision, NewEntry } from "./ports/index.ts";
import {
  foldLog,
  INITIAL_SNAPSHOT,
  type RecoveredLog,
  type SessionSnapshot,
  stepSession,
  withUnansweredAppends,
} from "./step.ts";

/** A mailbox batch, stepped: the session after it, what it appends, its steps in order, effects and server events. */
export interface DecidedBatch {
  readonly snapshot: SessionSnapshot;
  readonly entries: readonly NewEntry[];
  readonly steps: readonly Omit<CommittedStep, "revision">[];
  readonly effects: readonly Effect[];
}

/** An input of the batch could not be taken (a resume's read of the log failed): `untaken` is why. */
export interface UntakenInput {
  readonly untaken: unknown;
}

/**
 * A session's position in its log, as its single writer (src/engine/session-host.ts) holds it: the snapshot after
 * the last committed batch, the stream's revision (`no_stream` before the first append) and the hash chain's head.
 * `decide` steps a batch from the snapshot (pure: `stepSession`), `commit` appends it after the chain head and only
 * then moves the position, `reread` moves it back to what the store holds (after a failed append).
 */
export class SessionLog {
  private current: SessionSnapshot;
  private revision: ExpectedRevision;
  private chainHead: string;

  constructor(
    private readonly sessionId: string,
    private readonly store: EventStore,
    recovered: RecoveredLog | null,
    private readonly onAppended?: (entries: number, ms: number) => void,
  ) {
    this.current = recovered === null ? INITIAL_SNAPSHOT : { state: recovered.state, wire: recovered.wire };
    this.revision = recovered?.revision ?? "no_stream";
    this.chainHead = recovered?.chainHead ?? CHAIN_GENESIS;
  }

  /** The session after the last committed batch. */
  get snapshot(): SessionSnapshot {
    return this.current;
  }

  /**
   * Takes each input of `batch` (awaiting the ones still being prepared) and steps it from the session as it is.
   * An input that is null (a client frame dropped beyond the event rate) is not logged; what reaches a closed session
   * changes nothing and is not logged either (after SessionClosed the log holds at most the runner's fault in closing,
   * RunnerFaulted, a fact about it). Returns `{untaken}` when an input could not be taken (only a resume's read of
   * the log fails here; an append's VAD failing is a refusal).
   */
  async decide(batch: readonly Pending[]): Promise<DecidedBatch | UntakenInput> {
    let snapshot = this.current;
    const entries: NewEntry[] = [];
    const steps: Omit<CommittedStep, "revision">[] = [];
    const effects: Effect[] = [];
    for (const pending of batch) {
      let input: Input | null;
      try {
        input = await pending.input(snapshot.state);
      } catch (error) {
        return { untaken: error };
      }
      if (input === null) continue;
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
   * Appends a decided batch in one transaction (group commit) after the chain head at the expected revision, and
   * makes its snapshot the session's. Returns the revision of its last entry.
   * @throws what the store's append threw (WrongExpectedRevisionError: another writer); the position is unchanged.
   */
  async commit(decided: DecidedBatch): Promise<number> {
    const chain = chained(this.chainHead, decided.entries);
    const started = performance.now();
    const revision = await this.store.append(streamOf(this.sessionId), chain.entries, this.revision);
    this.onAppended?.(decided.entries.length, performance.now() - started);
    this.revision = revision;
    this.chainHead = chain.head;
    this.current = decided.snapshot;
    return revision;
  }

  /**
   * Reads the log again and moves the position to it (after a failed append): returns the log as folded, with the
   * appends that no decision answered yet.
   * @throws what the store's read threw; the position is unchanged.
   */
  async reread(): Promise<RecoveredLog & { readonly replay: readonly WireEvent[] }> {
    const entries = await this.store.read(streamOf(this.sessionId));
    const log = withUnansweredAppends(foldLog(entries), entries);
    this.current = { state: log.state, wire: log.wire };
    this.revision = log.revision < 0 ? "no_stream" : log.revision;
    this.chainHead = log.chainHead;
    return log;
  }
}
