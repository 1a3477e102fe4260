/**
 * The session's inputs: what reached its mailbox (a command, a runner's output, a timer, a socket attaching or
 * dropping, a recovery, an ownership change, a runner fault, a resource running short), recorded before anything is
 * decided. The decider turns each into domain events (events.ts).
 */
import type { Command } from "./commands.ts";
import type { AudioEncoding, Capabilities } from "./config.ts";
import type { EarlierRules } from "./earlier-rules.ts";
import type { SessionId } from "./ids.ts";
import type { Message } from "./message.ts";
import type { StageOutput } from "./stage.ts";

/**
 * Why a socket was detached from its session (issue 33, part 3): `disconnect`, it dropped (closed without
 * session.close, or a close code other than 1000); `output_backpressure`, the server let go of a client that read
 * its output too slowly (BEHAVIOUR.md, "Defaults and limits"). A resume is told it (`session.resumed.detach_reason`).
 */
export type DetachReason = "disconnect" | "output_backpressure";

/**
 * Inputs: what reached the session's mailbox, recorded before anything is decided (DESIGN.md, "The session
 * stream"). `at` is the engine's clock (ms since the Unix epoch) when the input arrived.
 */
export type Input = (
  | Message<
      "SessionOpened",
      {
        readonly sessionId: SessionId;
        readonly model: string;
        readonly capabilities: Capabilities;
        /** SHA-256 (hex) of the resume token; the token itself never enters the log. */
        readonly resumeTokenSha256: string | null;
        /** The deployment's idle TTL (s), the session's default `idle_timeout_s`; null: none. */
        readonly idleTimeoutS: number | null;
        /** `?native_duplex=` of the connection: opts in or out of the model-native lane; null: the default. */
        readonly nativeDuplex: boolean | null;
        /** The deployment's `response_timeout_ms` (absent in older logs: 30000). */
        readonly responseTimeoutMs?: number;
        /** The deployment's `max_pending_turns_per_session`: deferred responses at most (absent in older logs: 4). */
        readonly maxPendingTurns?: number;
        /**
         * The deployment's `max_session_lifetime_s`: the session ends this many seconds after it opened, however
         * active (absent, in older logs and when it is off: no limit).
         */
        readonly maxLifetimeS?: number;
        /** The rules of the earlier release that recorded the session, as the upcaster fills them (absent: today's). */
        readonly rules?: EarlierRules;
        /**
         * The node that opened the session and owns it first (ownership epoch 1; issue 22, part 4). Absent in older
         * logs and for a store of one node: owned by whichever node serves it.
         */
        readonly node?: string;
      }
    >
  | Message<"CommandReceived", { readonly command: Command }>
  | Message<
      "StageOutputReceived",
      {
        readonly output: StageOutput;
        /**
         * An `audio` output as the client receives it when the session's output format is not the runner's (PCM16
         * at its output rate): converted by the engine (resampled, G.711-encoded) before it was recorded, so a
         * replay renders the same bytes without converting again (BEHAVIOUR.md, "Audio formats"). Absent: the
         * audio goes out as the runner made it.
         */
        readonly delivered?: DeliveredAudio;
      }
    >
  | Message<
      "TimerFired",
      | { readonly timer: "idle_ttl" | "disconnect_grace" | "max_lifetime" }
      | {
          /**
           * The active response made no progress for `response_timeout_ms`: `progress` is what it had made when the
           * timer was armed (see `responseProgressOf`); a response that moved on since ignores the timer.
           */
          readonly timer: "response_timeout";
          readonly progress: string;
        }
    >
  | Message<
      "AttachmentChanged",
      {
        /**
         * `detached`: the socket dropped without session.close; `resumed`: a new socket took the session over;
         * `abandoned`: the session opened on connect was never used (the socket resumed another session, sent
         * nothing within the first message timeout, or closed first); `closed`: the client closed the socket with
         * code 1000, which ends the session as session.close does (BEHAVIOUR.md, "Resume", ours).
         */
        readonly change: "detached" | "resumed" | "abandoned" | "closed";
        readonly generation: number;
        /** SHA-256 (hex) of the rotated resume token (resumed only). */
        readonly resumeTokenSha256: string | null;
        /** The client's `last_received_server_event_seq` (resumed only). */
        readonly lastReceivedSeq: number | null;
        /** Why the socket was let go of (detached only; absent in logs written before it was recorded). */
        readonly reason?: DetachReason;
      }
    >
  /** The session is rebuilt from its log: after a restart, or after an append failed (the runner's work is lost). */
  | Message<"SessionRecovered", { readonly reason: "server_restart" | "append_failed" }>
  /**
   * Another node took the session over (issue 22, part 4: fenced ownership): `node` owns it from here, at ownership
   * `epoch` (the previous owner's plus one; the opening node's is 1). Appended first by the new owner, with the
   * revision it read, so the old owner can append nothing after it. For the session it is a restart: it is rebuilt
   * from its log, as after `SessionRecovered{server_restart}`.
   */
  | Message<"SessionOwned", { readonly node: string; readonly epoch: number }>
  | Message<
      "RunnerFaulted",
      {
        /** Which call of the runner port failed: it threw, rejected, or emitted an output that is not one. */
        readonly operation: RunnerOperation;
        readonly message: string;
      }
    >
  /**
   * The server ran short of what the session needs to go on (issue 32, part 2): the free space on its store's disk
   * fell below `limits.disk_hard_floor_mb`. The session ends while its log can still be written: the client gets
   * `resource_exhausted` with `message`, then `session.closed{reason: resource_exhausted}`.
   */
  | Message<"ResourceExhausted", { readonly resource: "disk"; readonly message: string }>
) & { readonly at: number };

/** Audio in a session's output format: `audio` bytes of `format` at `rate` Hz. */
export interface DeliveredAudio {
  readonly audio: Uint8Array;
  readonly format: AudioEncoding;
  readonly rate: number;
}

/** The calls of the runner port (DESIGN.md, "Ports": ModelRunner), and `emit` for a malformed output. */
export type RunnerOperation = "open" | "submit" | "abort" | "configure" | "close" | "emit";

export type InputType = Input["type"];
export const INPUT_TYPES: readonly InputType[] = [
  "SessionOpened",
  "CommandReceived",
  "StageOutputReceived",
  "TimerFired",
  "AttachmentChanged",
  "SessionRecovered",
  "SessionOwned",
  "RunnerFaulted",
  "ResourceExhausted",
];
