import type { Capabilities, RunnerUnit, SessionConfig, SessionId, StageOutput } from "../../domain/index.ts";

/**
 * The model stage port (DESIGN.md, "Ports": ModelRunner). A runner declares its capabilities, opens one
 * `RunnerSession` per session, takes units and emits `StageOutput`s stamped with the epoch of the unit they
 * answer. Outputs are inputs of the session: the engine records them before deciding anything.
 */
export interface ModelRunner {
  readonly name: string;
  readonly capabilities: Capabilities;
  /** Opens the model side of a session. `emit` may be called at any time until `close` resolves. */
  open(
    session: { readonly sessionId: SessionId; readonly config: SessionConfig },
    emit: (output: StageOutput) => void,
  ): RunnerSession;
  close(): Promise<void>;
}

export interface RunnerSession {
  /** Hands one unit to the model. Never throws; a failure is emitted as a `failure` output. */
  submit(unit: RunnerUnit): void;
  /** Aborts all work of epochs older than `epoch` (the session's new epoch). */
  abort(epoch: number): void;
  /** The session's configuration changed (session.update). */
  configure(config: SessionConfig): void;
  close(): Promise<void>;
}
