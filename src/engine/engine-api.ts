import type { Capabilities, DetachReason, DomainEvent, EarlierRules } from "../domain/index.ts";
import type { TurnSpanName } from "../projections/index.ts";
import type { DecodedResume } from "../protocol/index.ts";
import type { EngineLog } from "./lifecycle-log.ts";
import type { EventStore, ModelRunner, NodeLeases, ResamplerFactory, VadModel } from "./ports/index.ts";
import type { SessionHost, SessionSink } from "./session-host.ts";
import type { Scheduler } from "./timers.ts";

/**
 * The engine's interface (DESIGN.md, src/engine): its limits, what it is built from (`EngineDeps`), and the `Engine`
 * the server, the connection and the offline tools call. `createEngine` (engine.ts) builds it.
 */

/** Session limits of BEHAVIOUR.md, "Defaults and limits" (times in s). */
export interface EngineLimits {
  readonly maxSessions: number;
  readonly idleTtlS: number | null;
  readonly disconnectGraceS: number;
  /** Bytes of client frames that may wait in a session's mailbox (16 MiB). */
  readonly maxPendingInputBytes: number;
  /** Commits that may wait in a session's mailbox (4). */
  readonly maxPendingTurns: number;
  /** ms a response may go without model output before it ends failed (30000); a session may set its own. */
  readonly responseTimeoutMs: number;
  /**
   * `max_session_lifetime_s`: seconds a session may live from its opening, however active (null: no limit, the
   * default); then it ends `max_lifetime_expired`.
   */
  readonly maxLifetimeS: number | null;
  /**
   * The resume journal's retention (BEHAVIOUR.md, "Defaults and limits"): missed events are replayed while the
   * session has been detached for at most this many seconds (60); null keeps them for as long as the session lives.
   */
  readonly resumeReplayTtlS: number | null;
  /** At most this many bytes of JSON text replayed by one resume (null: no cap, the default). */
  readonly resumeReplayMaxBytes: number | null;
  /**
   * `limits.events_per_s`: a socket's client events other than audio appends one session may send a second, a token
   * bucket's refill (100; src/engine/event-rate.ts); null: no limit. Beyond it `input_backpressure`, told at most
   * once a second.
   */
  readonly eventsPerS: number | null;
  /** `limits.event_burst`: the bucket's size, events that pass at once (200). */
  readonly eventBurst: number;
  /**
   * `limits.appends_per_s` and `limits.append_burst`: the audio appends one session may send a second (a second
   * bucket: 1000, a burst of 4000; each one is an entry in the log, whatever the audio it carries); null: no limit.
   */
  readonly appendsPerS: number | null;
  readonly appendBurst: number;
}

export const DEFAULT_LIMITS: EngineLimits = {
  maxSessions: 4,
  idleTtlS: 300,
  disconnectGraceS: 30,
  maxPendingInputBytes: 16 * 1024 * 1024,
  maxPendingTurns: 4,
  responseTimeoutMs: 30_000,
  maxLifetimeS: null,
  resumeReplayTtlS: 60,
  resumeReplayMaxBytes: null,
  eventsPerS: 100,
  eventBurst: 200,
  appendsPerS: 1000,
  appendBurst: 4000,
};

export interface EngineDeps {
  readonly store: EventStore;
  readonly runner: ModelRunner;
  readonly vad: VadModel | null;
  readonly createResampler: ResamplerFactory;
  /** Resamples the model's audio to a session's output rate (a filtered resampler); absent: `createResampler`. */
  readonly createOutputResampler?: ResamplerFactory;
  readonly limits?: Partial<EngineLimits>;
  readonly model?: string;
  /** `session_mode` of the deployment: `turn` starts every session in the turn lane unless the client asks. */
  readonly sessionMode?: "duplex" | "turn";
  /** Engine clock, ms since the Unix epoch; injectable for tests. Default: the scheduler's clock. */
  readonly now?: () => number;
  /** What the session timers and the takeover's retry wait run on (src/engine/timers.ts); default: the real clock. */
  readonly scheduler?: Scheduler;
  /**
   * The nodes that share the store (issue 22, part 4), with this node's id; absent or null: a store of one node,
   * which owns every session in it. With leases, a node rebuilds at start only the open sessions it owns or whose
   * owner's lease expired, and takes a session over when a client resumes it here.
   */
  readonly leases?: NodeLeases | null;
  /**
   * A further admission rule, asked after `max_sessions` by `admission` and `open` (issue 32, part 2: the store's
   * free disk space, src/server/disk-guard.ts): a refusal it returns refuses the new session as capacity does.
   */
  readonly admit?: () => AdmissionRefusal | null;
  /** Where the sessions' lifecycle (src/engine/lifecycle-log.ts) and the engine's faults are logged. */
  readonly log?: EngineLog;
  /**
   * Observers for metrics: every group commit, every domain event decided, and for each runner output whose server
   * events went to a socket, the ms from its arrival to their write (the engine's added latency).
   */
  readonly observe?: {
    appended(entries: number, ms: number): void;
    decided(event: DomainEvent): void;
    delivered?(ms: number): void;
    /** A span of the turn ledger (src/projections/turn-ledger.ts) became known for a turn: once per turn and span. */
    turnSpan?(span: TurnSpanName, ms: number): void;
    /** This node took a session over (issue 22): on a client's resume, or from a node whose lease expired. */
    tookOver?(why: "resume" | "lease_expired"): void;
    /** A session here was fenced: another node appended to it (or this node gave it up). */
    fenced?(): void;
    /** A resume's outcome: `resumed`, or the refusal's code. */
    resumed?(outcome: string): void;
  };
}

/**
 * What the connection asked for before its first event (query parameters, reference "Endpoint and transport"):
 * the model name the session reports, and `native_duplex` (the model-native lane) when given.
 */
export interface OpenOptions {
  readonly model?: string;
  readonly nativeDuplex?: boolean;
  /**
   * The rules of an earlier release to decide by (a recorded session re-driven live, src/replay/redrive.ts, decides
   * as its recording did); absent: today's.
   */
  readonly rules?: EarlierRules;
}

/** Why `open` refused a session. */
export type AdmissionRefusal = { readonly code: "resource_exhausted"; readonly message: string };

/** Why `resume` refused a resume (BEHAVIOUR.md scenario 12), or that replay from the requested seq is impossible. */
export type ResumeRefusal = {
  readonly code:
    | "invalid_resume_token"
    | "session_resume_expired"
    | "unsupported_session_resume"
    | "journal_gap"
    | "journal_overflow";
  readonly message: string;
};

/** The refusal of a resume of a session that is not live (unknown, closed, expired): `session_resume_expired`. */
export const resumeExpired = (sessionId: string): ResumeRefusal => ({
  code: "session_resume_expired",
  message: `unknown or expired session: ${sessionId}`,
});

/**
 * The session host of the server (DESIGN.md, src/engine): admission, one `SessionHost` per live session, the
 * timers that turn into inputs (idle TTL, disconnect grace), and the runner binding.
 */
export interface Engine {
  readonly capabilities: Capabilities;
  /** The model id sessions report by default (the profile's, else the runner's name). */
  readonly model: string;
  readonly limits: EngineLimits;
  /**
   * Opens a session: allocates its id (`sess_` + 128 random bits) and resume token (32 random bytes, URL-safe
   * base64, only its SHA-256 is logged), and enqueues `SessionOpened`. Refuses beyond `maxSessions`.
   */
  open(options?: OpenOptions): SessionHost | AdmissionRefusal;
  /**
   * Why a new session would be refused now (`max_sessions` live sessions, or `deps.admit`'s refusal), or null when
   * one may open.
   */
  admission(): AdmissionRefusal | null;
  get(sessionId: string): SessionHost | undefined;
  /** Live sessions. */
  sessions(): SessionHost[];
  /** Marks a client command: re-arms the idle TTL. */
  touch(host: SessionHost): void;
  /**
   * Re-attaches a live session to a new socket (BEHAVIOUR.md, "Resume"): checks the token in constant time,
   * rotates it at once (of two concurrent resumes exactly one wins), and in mailbox order sends `session.resumed`,
   * every event after `lastReceivedSeq`, then the live ones. Returns the host, or why it refused.
   */
  resume(request: DecodedResume, sink: SessionSink): SessionHost | ResumeRefusal;
  /**
   * The socket `sink` dropped without session.close: unless a resume already superseded it, the session waits
   * `disconnectGraceS` for a resume, then expires.
   */
  detach(host: SessionHost, sink: SessionSink, reason?: DetachReason): void;
  /**
   * Closes a session the socket `sink` opened on connect and never used (BEHAVIOUR.md, "Identity", ours): the socket
   * resumed another session, sent nothing within the first message timeout, or closed first. `sink` is released
   * first, so the socket hears nothing of it; the session ends `unused` and holds no capacity.
   */
  abandon(host: SessionHost, sink: SessionSink): void;
  /**
   * The client closed the socket `sink` with code 1000: the session ends as session.close ends it, `client_closed`
   * (BEHAVIOUR.md, "Resume", ours), and holds no capacity for the grace. `sink` is released first.
   */
  closedByClient(host: SessionHost, sink: SessionSink): void;
  /**
   * Rebuilds every session the store holds open (a restart is a disconnect for every client, BEHAVIOUR.md
   * "Resume", ours): their state and wire projection are folded from the log, an active response is cancelled,
   * and each waits for a resume for what is left of its grace lease. Returns the recovered session ids.
   */
  recover(): Promise<string[]>;
  /**
   * Makes sure the session `sessionId` is held here before a resume (issue 22, part 4): a session another node owns
   * (or owned) is taken over, after its log's resume token matches `resumeToken` (compared as SHA-256 digests): rebuilt from its log and its
   * `SessionOwned{this node, epoch + 1}` appended with the revision read, so the old owner can append nothing after
   * it (a concurrent append of the old owner fails the takeover instead). Resolves when the session is held here, or
   * with why it is not (unknown or closed: `session_resume_expired`; another token: `invalid_resume_token`).
   */
  adopt(sessionId: string, resumeToken: string): Promise<SessionHost | ResumeRefusal>;
  /**
   * Takes over every open session whose owner's lease has expired (issue 22, part 4): a node that died or lost its
   * store. Each waits for its client's resume for what is left of its grace, as after a restart. Returns their ids.
   */
  sweep(): Promise<string[]>;
  /**
   * Gives up every session held here without writing (this node lost its store past its lease: another node takes
   * them over): their clients are told (`runtime_append_failed`) and let go of, to resume elsewhere.
   */
  relinquishAll(message: string): void;
  /**
   * Ends every live session because the server ran short of `resource` (issue 32, part 2: the store's disk below
   * `limits.disk_hard_floor_mb`), while their logs can still be written: each decides `ResourceExhausted`, its client
   * gets `resource_exhausted` with `message` and `session.closed`, and its socket is closed (1013). Returns the ids
   * of the sessions told to end.
   */
  endAll(resource: "disk", message: string): string[];
  /** This node's id (issue 22): `SessionOpened.node` of the sessions it opens. */
  readonly nodeId: string | null;
  /** Waits for every session's mailbox and closes the runners; the store is the caller's to close. */
  close(): Promise<void>;
}
