import type {
  Command,
  HistoryItem,
  Input,
  RunnerOperation,
  SessionConfig,
  SessionId,
  StageOutput,
} from "../domain/index.ts";
import type { WireEvent } from "../projections/index.ts";
import type { DecodedFrame } from "../protocol/index.ts";
import type { Effect } from "./effects.ts";
import type { EventRateLimits } from "./event-rate.ts";
import type { EventStore, ResamplerFactory, RunnerSession, VadStream } from "./ports/index.ts";

/** The parts of a session host (src/engine/session-host.ts): what it needs of the engine, its journal sizes, refusals. */

/**
 * What a session host needs from the engine (`Host`: the host its callbacks are given, `SessionHost`). `now` is the
 * engine clock in ms since the Unix epoch.
 */
export interface HostDeps<Host> {
  readonly store: EventStore;
  readonly vad: VadStream | null;
  readonly createResampler: ResamplerFactory;
  /**
   * Resamples the model's audio to a session's output rate (BEHAVIOUR.md, "Audio formats"): a filtered resampler,
   * one stream per response; absent: `createResampler`.
   */
  readonly createOutputResampler?: ResamplerFactory;
  /**
   * Opens the model side of the session with the conversation heard so far (`history`); `emit` takes what the
   * runner emits (checked by the host).
   */
  readonly openRunner: (
    sessionId: SessionId,
    config: SessionConfig,
    history: readonly HistoryItem[],
    emit: (output: StageOutput) => void,
  ) => RunnerSession;
  /** Observes a runner that broke its port's contract (for the server's log); the session records and ends it. */
  readonly onRunnerFault?: (host: Host, operation: RunnerOperation, error: unknown) => void;
  readonly now: () => number;
  /** Runs the timer effects among a drain's effects (src/engine/timers.ts), after the runner's; absent: no timers. */
  readonly runTimers?: (host: Host, effects: readonly Effect[]) => void;
  readonly onClosed: (host: Host) => void;
  readonly onAppendFailed: (host: Host, error: unknown) => void;
  /**
   * The session is no longer this node's (issue 22, part 4): an append found the stream moved on (another node took
   * it over: a `WrongExpectedRevisionError`), or the engine gave it up (`relinquish`). Its sockets were let go of;
   * the host writes nothing again.
   */
  readonly onFenced?: (host: Host, reason: string) => void;
  /**
   * Set where another part tells the sockets how the session moved (the engine's takeover watch,
   * src/engine/takeover-watch.ts): an append that finds the stream moved on (another node fenced it or took it over)
   * then fences the host keeping its sockets (`yieldTo`), and calls this; absent, the sockets get
   * `runtime_append_failed` at once (`relinquish`).
   */
  readonly onMovedAway?: (host: Host) => void;
  /**
   * `max_pending_input_bytes_per_session` (bytes of client frames) and `max_pending_turns_per_session` (commits)
   * waiting in the mailbox; beyond them a frame is refused with `input_backpressure`. Absent: no limit.
   */
  readonly inputLimits?: { readonly maxPendingBytes: number; readonly maxPendingTurns: number };
  /**
   * `limits.events_per_s` and `limits.event_burst`: the token bucket that a socket's client events other than audio
   * appends pass (src/engine/event-rate.ts); beyond it a frame is refused with `input_backpressure`, told at most
   * once a second. Absent: no limit.
   */
  readonly eventRate?: EventRateLimits;
  /**
   * `limits.appends_per_s` and `limits.append_burst`: the bucket of a socket's audio appends (a flood of one-sample
   * appends costs an entry each, as any event does); beyond it refused as for `eventRate`. Absent: no limit.
   */
  readonly appendRate?: EventRateLimits;
  /** Observes each group commit: how many entries, and how long the append took (ms). */
  readonly onAppended?: (entries: number, ms: number) => void;
  /** For each runner output whose server events were written to a socket: ms from its arrival to that write. */
  readonly onDelivered?: (ms: number) => void;
  /** Keep the size of every server event sent, so a resume's replay can be measured (`resume_replay_max_bytes`). */
  readonly measureJournal?: boolean;
}

/** Cumulative bytes of JSON text by seq of `events` (index 0: 0). */
export const measure = (events: readonly WireEvent[]): number[] => {
  const journal = [0];
  for (const event of events) addToJournal(journal, event);
  return journal;
};

/** Records `event`'s size in `journal` (cumulative bytes by seq); events without a seq are not journaled. */
export const addToJournal = (journal: number[], event: WireEvent): void => {
  if (event.seq !== null) journal[event.seq] = (journal[event.seq - 1] ?? 0) + event.json.length;
};

/** The input of a client frame refused with `input_backpressure` at `at` (ms): its event_id and type echoed. */
export const rejected = (decoded: DecodedFrame, at: number, message: string): Input => {
  const command: Command = {
    type: "invalid",
    eventId: decoded.eventId,
    code: "input_backpressure",
    message,
    param: null,
    eventType: decoded.type === "invalid" ? decoded.eventType : decoded.type,
  };
  return { type: "CommandReceived", at, data: { command } };
};
