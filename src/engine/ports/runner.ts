import type {
  Capabilities,
  HistoryItem,
  RefAudioInput,
  RunnerUnit,
  SessionConfig,
  SessionId,
  StageOutput,
} from "../../domain/index.ts";

/**
 * The model stage port (DESIGN.md, "Ports": ModelRunner). A runner declares its capabilities, opens one
 * `RunnerSession` per session, takes units and emits `StageOutput`s stamped with the epoch of the unit they
 * answer. Outputs are inputs of the session: the engine records them before deciding anything.
 */
export interface ModelRunner {
  readonly name: string;
  readonly capabilities: Capabilities;
  /**
   * Opens the model side of a session. `emit` may be called at any time until `close` resolves. `history` is the
   * conversation as heard so far (empty for a new session; a session rebuilt from its log after a restart has one),
   * without the items that the units submitted next hand over themselves (the user text or function call output
   * whose command opened the runner): a runner whose model keeps its own conversation gives it to the model, so that
   * the model knows what was said, each item once.
   */
  open(
    session: {
      readonly sessionId: SessionId;
      readonly config: SessionConfig;
      readonly history?: readonly HistoryItem[];
    },
    emit: (output: StageOutput) => void,
  ): RunnerSession;
  close(): Promise<void>;
}

/**
 * The model side of one session. A model failure is emitted as a `failure` output and fails one response. A call
 * that throws (or returns a promise that rejects), or an emitted value that is not a `StageOutput`, breaks the
 * contract: the engine ends that session with `runtime_data_plane_stream_failed`, and only that session.
 */
export interface RunnerSession {
  /** Hands one unit to the model. */
  submit(unit: RunnerUnit): void;
  /** Aborts all work of epochs older than `epoch` (the session's new epoch). */
  abort(epoch: number): void;
  /**
   * The session's configuration (at the first unit, and after every session.update): instructions, voice, tools,
   * tool choice, temperature, token limit, modalities, and the `ref_audio` clip in force (its bytes; null: none).
   */
  configure(config: SessionConfig, refAudio: RefAudioInput | null): void;
  close(): Promise<void>;
}
