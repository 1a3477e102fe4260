import { randomBytes } from "node:crypto";
import { distinctUntilChanged } from "rxjs";
import {
  type Capabilities,
  type DetachReason,
  type DomainEvent,
  responseProgressOf,
  type SessionId,
} from "../domain/index.ts";
import { spanOf, TURN_SPANS, type TurnSpanName, turnLedger } from "../projections/index.ts";
import type { DecodedResume } from "../protocol/index.ts";
import { equalDigests, sha256Hex } from "./digest.ts";
import { downtimeMsOf } from "./downtime.ts";
import { type EngineLog, type LoggedBefore, logLifecycle } from "./lifecycle-log.ts";
import { ownerOf, type SessionOwner, STREAM_PREFIX, stepsOf, streamOf } from "./log.ts";
import type { EventStore, ModelRunner, NodeLeases, RecordedEntry, ResamplerFactory, VadModel } from "./ports/index.ts";
import { SessionHost, type SessionSink } from "./session-host.ts";
import { foldLog, type RecoveredLog, withUnansweredAppends } from "./step.ts";
import { type TakeoverWatch, watchTakeover } from "./takeover-watch.ts";
import { MAX_TIMER_MS, realScheduler, type Scheduler, SessionTimers } from "./timers.ts";

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

/**
 * Reads of a session's log a takeover by resume makes before it gives up: each lost race costs one. With a store
 * that fences (PostgreSQL), the old owner's appends are refused once the stream is fenced, so only another node's
 * takeover at the same moment can make one lose.
 */
const ADOPT_ATTEMPTS = 5;
/**
 * How long a takeover's fence holds (ms, the store's clock): the read, the rebuild and the claim's append take a few
 * ms; a node that dies in between holds the session from its old owner for no longer than this.
 */
const FENCE_MS = 5_000;
/** ms a takeover waits before it tries again while another node's fence holds the session. */
const FENCED_RETRY_MS = 100;
/**
 * ms a node that gave a session up waits for the new owner's resume before its sockets are let go of with
 * `runtime_append_failed` (src/engine/takeover-watch.ts).
 */
const RESUME_WAIT_MS = 2_000;

/** Thrown by `adopt` when the session kept moving to other nodes for every attempt: the client resumes again. */
export class TakeoverLostError extends Error {
  readonly code = "takeover_lost";
  constructor(
    readonly sessionId: string,
    readonly attempts: number,
  ) {
    super(`session ${sessionId}: another node's takeover won each of ${attempts} attempts; resume again`);
    this.name = "TakeoverLostError";
  }
}

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

export const createEngine = (deps: EngineDeps): Engine => {
  const limits: EngineLimits = { ...DEFAULT_LIMITS, ...deps.limits };
  const scheduler = deps.scheduler ?? realScheduler;
  const now = deps.now ?? (deps.scheduler === undefined ? Date.now : () => scheduler.now());
  const hosts = new Map<string, SessionHost>();
  /** Sessions whose socket ended them (closed with 1000, or opened and unused): no longer counted by admission. */
  const ending = new Set<string>();
  const timers = new SessionTimers(scheduler);
  const model = deps.model ?? deps.runner.name;
  const leases = deps.leases ?? null;
  const nodeId = leases?.nodeId ?? null;

  const clearTimers = (id: string): void => {
    timers.cancelAll(id, ["idle_ttl", "disconnect_grace"]);
  };

  /** Hosts rebuilt to take a session over whose claim (`SessionOwned`) is not appended yet. */
  const claiming = new WeakSet<SessionHost>();
  /** With other nodes on the store: each host's watch for another node's takeover (src/engine/takeover-watch.ts). */
  const watches = new Map<SessionHost, TakeoverWatch>();
  const stopWatch = (host: SessionHost): void => {
    watches.get(host)?.stop();
    watches.delete(host);
  };
  /**
   * A host with its VAD stream and runner binding, registered as live. `earlier`: what the log it was rebuilt from
   * holds (for the lifecycle log's totals).
   */
  const createHost = (
    sessionId: SessionId,
    resumeToken: string | null,
    recovered: RecoveredLog | null,
    earlier: LoggedBefore = { logged: [], downtimeMs: 0 },
  ): SessionHost => {
    const vad = deps.vad?.createStream() ?? null;
    const host: SessionHost = new SessionHost(
      sessionId,
      resumeToken,
      {
        store: deps.store,
        vad,
        createResampler: deps.createResampler,
        ...(deps.createOutputResampler === undefined ? {} : { createOutputResampler: deps.createOutputResampler }),
        now,
        inputLimits: { maxPendingBytes: limits.maxPendingInputBytes, maxPendingTurns: limits.maxPendingTurns },
        ...(limits.eventsPerS === null ? {} : { eventRate: { perS: limits.eventsPerS, burst: limits.eventBurst } }),
        ...(limits.appendsPerS === null ? {} : { appendRate: { perS: limits.appendsPerS, burst: limits.appendBurst } }),
        openRunner: (id, config, history, emit) => deps.runner.open({ sessionId: id, config, history }, emit),
        onRunnerFault: (faulty, operation, error) =>
          deps.log?.error(
            { err: error, sessionId: faulty.sessionId, operation },
            "model runner broke its contract; its session is ended",
          ),
        onClosed: (closed) => {
          stopWatch(closed);
          clearTimers(closed.sessionId);
          hosts.delete(closed.sessionId);
          ending.delete(closed.sessionId);
          vad?.close();
        },
        ...(deps.observe === undefined ? {} : { onAppended: deps.observe.appended }),
        ...(deps.observe?.delivered === undefined ? {} : { onDelivered: deps.observe.delivered }),
        measureJournal: limits.resumeReplayMaxBytes !== null,
        onFenced: (fenced, reason) => {
          // A takeover whose claim lost to another append never held the session: not a session given up.
          if (claiming.has(fenced))
            deps.log?.debug({ sessionId: fenced.sessionId, node: nodeId }, "takeover lost to another append");
          else {
            deps.log?.warn(
              { sessionId: fenced.sessionId, node: nodeId, reason },
              "session given up: another node owns it",
            );
            deps.observe?.fenced?.();
          }
          clearTimers(fenced.sessionId);
          if (hosts.get(fenced.sessionId) === fenced) hosts.delete(fenced.sessionId);
          ending.delete(fenced.sessionId);
          vad?.close();
        },
        onAppendFailed: (failed, error) => {
          // The client was let go of; the session waits for a resume, which rebuilds it from its log. The grace
          // lease runs as after a drop: its expiry tries the log again, and a store still failing re-arms it.
          deps.log?.error({ err: error, sessionId: failed.sessionId }, "session log append failed; client let go");
          clearTimers(failed.sessionId);
          armGrace(failed, limits.disconnectGraceS * 1000);
        },
        // With other nodes: a refused append waits for the new owner's claim and resume (the watch tells the sockets).
        ...(nodeId === null
          ? {}
          : {
              onMovedAway: (moved: SessionHost) => {
                const watch = watches.get(moved);
                if (watch === undefined) moved.letGo("the session moved to another node: resume it to reach that node");
                else watch.moved();
              },
            }),
      },
      recovered,
    );
    // The response timer: re-armed whenever the active response makes progress, cleared when none is active
    // (BEHAVIOUR.md, "Defaults and limits": response_timeout_ms). Its firing is an input, decided like any other.
    let armed: string | null = null;
    host.events$.subscribe({
      next: () => {
        const progress = responseProgressOf(host.current);
        if (progress === armed) return;
        timers.cancel(sessionId, "response_timeout");
        armed = progress;
        if (progress === null) return;
        timers.arm(sessionId, "response_timeout", host.current.config.responseTimeoutMs, () => {
          void host.enqueue({ type: "TimerFired", at: now(), data: { timer: "response_timeout", progress } });
        });
      },
      complete: () => timers.cancel(sessionId, "response_timeout"),
    });
    // A session.update may change idle_timeout_s: re-arm the idle timer with the new value once it is decided.
    host.events$.subscribe((envelope) => {
      if (envelope.event.type === "SessionConfigured") engine.touch(host);
    });
    if (deps.log !== undefined) logLifecycle(host, deps.log, earlier);
    if (nodeId !== null) {
      const from = recovered === null ? 0 : recovered.revision + 1;
      const onEnd = (): void => void watches.delete(host);
      watches.set(host, watchTakeover({ store: deps.store, host, nodeId, from, resumeWaitMs: RESUME_WAIT_MS, onEnd }));
    }
    if (deps.observe !== undefined) {
      const { decided, turnSpan } = deps.observe;
      host.events$.subscribe((envelope) => decided(envelope.event));
      if (turnSpan !== undefined) observeTurnSpans(host, turnSpan);
    }
    hosts.set(sessionId, host);
    return host;
  };

  /** Feeds each turn's spans to `observe` once they are known, from the session's live turn ledger. */
  const observeTurnSpans = (host: SessionHost, observe: (span: TurnSpanName, ms: number) => void): void => {
    const seen = new Set<string>();
    host.events$.pipe(turnLedger(), distinctUntilChanged()).subscribe((turns) => {
      // Only the last two turns can still change: a turn is done once the next one has a response.
      for (const turn of turns.slice(-2)) {
        for (const [name] of TURN_SPANS) {
          const key = `${turn.index}:${name}`;
          if (seen.has(key)) continue;
          const ms = spanOf(turn, name);
          if (ms === null) continue;
          seen.add(key);
          observe(name, ms);
        }
      }
    });
  };

  const armGrace = (host: SessionHost, ms: number): void => {
    timers.arm(host.sessionId, "disconnect_grace", ms, () => {
      void host.enqueue({ type: "TimerFired", at: now(), data: { timer: "disconnect_grace" } });
    });
  };

  /**
   * A session rebuilt from its log, detached, its grace running from its last entry: after this node's restart
   * (`SessionRecovered`), or taken over from another node (`SessionOwned` at `takeoverEpoch`).
   */
  const rebuild = (
    entries: readonly RecordedEntry[],
    log: ReturnType<typeof withUnansweredAppends>,
    takeoverEpoch: number | null,
  ): SessionHost => {
    const logged = stepsOf(entries).flatMap((step) => step.decisions.map((d) => d.envelope));
    const at = now();
    // The log's downtime and this move's (the gap before the entry appended now): the session's duration counts
    // neither, in the node log as in every other view (durationOf, the summary rows).
    const downtimeMs = downtimeMsOf(entries) + Math.max(0, at - (entries.at(-1)?.metadata.at ?? at));
    const host = createHost(log.state.sessionId, null, log, { logged, downtimeMs });
    void host.enqueue(
      takeoverEpoch === null || nodeId === null
        ? { type: "SessionRecovered", at, data: { reason: "server_restart" } }
        : { type: "SessionOwned", at, data: { node: nodeId, epoch: takeoverEpoch } },
    );
    const lastAt = entries.at(-1)?.metadata.at ?? now();
    host.markDetached(lastAt);
    armGrace(host, Math.max(0, limits.disconnectGraceS * 1000 - (now() - lastAt)));
    return host;
  };

  /**
   * Rebuilds a session that `owner` held and appends this node's claim (`SessionOwned`, the next epoch); resolves
   * once the claim is decided: the host is fenced when another append came first.
   */
  const takeOver = async (
    entries: readonly RecordedEntry[],
    log: ReturnType<typeof withUnansweredAppends>,
    owner: SessionOwner,
  ): Promise<SessionHost> => {
    const host = rebuild(entries, log, owner.epoch + 1);
    claiming.add(host);
    await host.settled();
    claiming.delete(host);
    return host;
  };

  /** `Engine.resume` (its outcome counted by the caller). */
  const resumeHere = (request: DecodedResume, sink: SessionSink): SessionHost | ResumeRefusal => {
    const host = hosts.get(request.sessionId);
    if (host === undefined || host.isClosed) {
      return { code: "session_resume_expired", message: `unknown or expired session: ${request.sessionId}` };
    }
    if (!host.current.capabilities.supportsSessionResume) {
      return { code: "unsupported_session_resume", message: "this model does not support session resume" };
    }
    // The token is verified before anything about the journal is answered (BEHAVIOUR.md, "Resume").
    if (!host.holdsToken(sha256Hex(request.resumeToken), equalDigests)) {
      return { code: "invalid_resume_token", message: "the resume token is not the current one for this session" };
    }
    if (request.lastReceivedSeq > host.headSeq) {
      return {
        code: "journal_gap",
        message: `last_received_server_event_seq ${request.lastReceivedSeq} is beyond the last event sent (${host.headSeq})`,
      };
    }
    const missed = request.lastReceivedSeq < host.headSeq;
    const ttl = limits.resumeReplayTtlS;
    if (missed && ttl !== null && host.detachedAt !== null && now() - host.detachedAt > ttl * 1000) {
      return {
        code: "journal_gap",
        message: `the events after ${request.lastReceivedSeq} are no longer retained: the session has been detached for more than resume_replay_ttl_s (${ttl} s)`,
      };
    }
    const cap = limits.resumeReplayMaxBytes;
    if (missed && cap !== null && host.journalBytesAfter(request.lastReceivedSeq) > cap) {
      return {
        code: "journal_overflow",
        message: `the events after ${request.lastReceivedSeq} are more than resume_replay_max_bytes (${cap}) to replay`,
      };
    }
    const token = randomBytes(32).toString("base64url");
    const generation = host.claim(sha256Hex(request.resumeToken), token, sha256Hex(token), equalDigests);
    if (generation === null) {
      return { code: "invalid_resume_token", message: "the resume token is not the current one for this session" };
    }
    timers.cancel(host.sessionId, "disconnect_grace");
    void host.resume(generation, request.lastReceivedSeq, sink);
    engine.touch(host);
    return host;
  };

  /** The session ends with the socket that held it: opened and never used, or closed by the client with 1000. */
  const endWithSocket = (host: SessionHost, sink: SessionSink, change: "abandoned" | "closed"): void => {
    if (host.isClosed || !host.release(sink)) return;
    // Its slot is free at once: a client that closed may open its next session before the close is logged.
    ending.add(host.sessionId);
    timers.cancel(host.sessionId, "idle_ttl");
    void host.enqueue({
      type: "AttachmentChanged",
      at: now(),
      data: { change, generation: host.generation, resumeTokenSha256: null, lastReceivedSeq: null },
    });
  };

  const engine: Engine = {
    capabilities: deps.runner.capabilities,
    model,
    limits,
    admission() {
      const live = [...hosts.values()].filter((h) => !h.isClosed && !ending.has(h.sessionId)).length;
      return live >= limits.maxSessions
        ? { code: "resource_exhausted", message: `session capacity reached (max_sessions=${limits.maxSessions})` }
        : (deps.admit?.() ?? null);
    },
    open(options = {}) {
      const refusal = engine.admission();
      if (refusal !== null) return refusal;
      const sessionId = `sess_${randomBytes(16).toString("hex")}` as SessionId;
      const resumeToken = deps.runner.capabilities.supportsSessionResume ? randomBytes(32).toString("base64url") : null;
      const host = createHost(sessionId, resumeToken, null);
      void host.enqueue({
        type: "SessionOpened",
        at: now(),
        data: {
          sessionId,
          model: options.model ?? model,
          capabilities: deps.runner.capabilities,
          nativeDuplex: options.nativeDuplex ?? (deps.sessionMode === "turn" ? false : null),
          resumeTokenSha256: resumeToken === null ? null : sha256Hex(resumeToken),
          idleTimeoutS: limits.idleTtlS,
          responseTimeoutMs: limits.responseTimeoutMs,
          maxPendingTurns: limits.maxPendingTurns,
          ...(nodeId === null ? {} : { node: nodeId }),
        },
      });
      engine.touch(host);
      return host;
    },
    get: (sessionId) => hosts.get(sessionId),
    sessions: () => [...hosts.values()],
    touch(host) {
      // Before SessionCreated is decided the config is the initial one: the deployment's TTL applies.
      const ttl = host.current.phase === "new" ? limits.idleTtlS : host.current.config.idleTimeoutS;
      timers.cancel(host.sessionId, "idle_ttl");
      if (ttl === null) return;
      // A timer holds at most 2^31 - 1 ms (about 24.8 days); a longer TTL waits that long, then re-arms.
      timers.arm(host.sessionId, "idle_ttl", ttl * 1000, () => {
        if (ttl * 1000 > MAX_TIMER_MS) engine.touch(host);
        else void host.enqueue({ type: "TimerFired", at: now(), data: { timer: "idle_ttl" } });
      });
    },
    resume(request, sink) {
      const outcome = resumeHere(request, sink);
      deps.observe?.resumed?.("code" in outcome ? outcome.code : "resumed");
      return outcome;
    },
    detach(host, sink, reason = "disconnect") {
      // A session given up to another node keeps nothing here to detach.
      if (host.isClosed || !host.release(sink) || host.isFenced) return;
      void host.enqueue({
        type: "AttachmentChanged",
        at: now(),
        data: {
          change: "detached",
          generation: host.generation,
          resumeTokenSha256: null,
          lastReceivedSeq: null,
          reason,
        },
      });
      armGrace(host, limits.disconnectGraceS * 1000);
    },
    abandon: (host, sink) => endWithSocket(host, sink, "abandoned"),
    closedByClient: (host, sink) => endWithSocket(host, sink, "closed"),
    async recover() {
      const recovered: string[] = [];
      for (const info of await deps.store.listStreams(STREAM_PREFIX)) {
        const entries = await deps.store.read(info.stream);
        const log = withUnansweredAppends(foldLog(entries), entries);
        if (log.state.phase !== "open" || hosts.has(log.state.sessionId)) continue;
        // With other nodes on the store: this node's own sessions, and those of nodes whose lease ran out.
        const owner = ownerOf(entries);
        const mine = leases === null || owner.node === null || owner.node === nodeId;
        if (!mine && (await leases.holds(owner.node as string))) continue;
        rebuild(entries, log, mine ? null : owner.epoch + 1);
        recovered.push(log.state.sessionId);
      }
      return recovered;
    },
    async adopt(sessionId, resumeToken) {
      const held = hosts.get(sessionId);
      if (held !== undefined && !held.isFenced) return held;
      const expired = {
        code: "session_resume_expired",
        message: `unknown or expired session: ${sessionId}`,
      } as const;
      if (leases === null) return expired;
      const stream = streamOf(sessionId);
      /** The log read, checked before anything moves: a wrong token or a closed session moves nothing. */
      const check = (
        entries: readonly RecordedEntry[],
      ): ResumeRefusal | { log: ReturnType<typeof withUnansweredAppends>; owner: SessionOwner } => {
        if (entries.length === 0) return expired;
        const log = withUnansweredAppends(foldLog(entries), entries);
        if (log.state.phase !== "open") return expired;
        const logged = log.state.resumeTokenSha256;
        if (logged === null || !equalDigests(logged, sha256Hex(resumeToken)))
          return { code: "invalid_resume_token", message: "the resume token is not the current one for this session" };
        return { log, owner: ownerOf(entries) };
      };
      // The claim (`SessionOwned`) is appended with the revision read. A store that fences (PostgreSQL) first refuses
      // every later append of the old owner (an answer it still writes to a detached session, say), then the log is
      // read to its end: the claim wins. Without fences, an append of the old owner in between makes the new host
      // lose (it is fenced), and the log is read again with that append in it.
      for (let attempt = 0; attempt < ADOPT_ATTEMPTS; attempt += 1) {
        let entries = await deps.store.read(stream);
        let checked = check(entries);
        if ("code" in checked) return checked;
        const again = hosts.get(sessionId);
        if (again !== undefined && !again.isFenced) return again;
        if (deps.store.fence !== undefined) {
          if ((await deps.store.fence(stream, FENCE_MS)) === null) {
            // Another node's takeover holds the session this moment: its outcome is read at the next attempt.
            await new Promise((resolve) => scheduler.setTimeout(() => resolve(undefined), FENCED_RETRY_MS));
            continue;
          }
          entries = await deps.store.read(stream);
          checked = check(entries);
          if ("code" in checked) return checked;
          // Taken meanwhile by this node (its sweep, or another socket's resume): that host is the one.
          const taken = hosts.get(sessionId);
          if (taken !== undefined && !taken.isFenced) return taken;
        }
        const host = await takeOver(entries, checked.log, checked.owner);
        if (host.isFenced) continue;
        if (host.isClosed) return expired;
        deps.observe?.tookOver?.("resume");
        return host;
      }
      // A live session that kept moving: not an expired one (the client resumes again).
      throw new TakeoverLostError(sessionId, ADOPT_ATTEMPTS);
    },
    async sweep() {
      if (leases === null) return [];
      const taken: string[] = [];
      for (const info of await deps.store.listStreams(STREAM_PREFIX)) {
        const id = info.stream.slice(STREAM_PREFIX.length);
        if (hosts.has(id)) continue;
        // A closed session's last entry says so: its whole log is not read again every sweep.
        const last = (await deps.store.read(info.stream, info.revision)).at(-1);
        if (last === undefined || last.type === "SessionClosed") continue;
        const entries = await deps.store.read(info.stream);
        const owner = ownerOf(entries);
        if (owner.node === nodeId || owner.node === null) continue;
        const log = withUnansweredAppends(foldLog(entries), entries);
        if (log.state.phase !== "open" || hosts.has(log.state.sessionId)) continue;
        if (await leases.holds(owner.node)) continue;
        const host = await takeOver(entries, log, owner);
        if (host.isFenced) continue;
        deps.observe?.tookOver?.("lease_expired");
        taken.push(id);
      }
      return taken;
    },
    endAll(resource, message) {
      const ended: string[] = [];
      for (const host of hosts.values()) {
        if (host.isClosed || host.isFenced) continue;
        void host.enqueue({ type: "ResourceExhausted", at: now(), data: { resource, message } });
        ended.push(host.sessionId);
      }
      return ended;
    },
    relinquishAll(message) {
      for (const host of [...hosts.values()]) {
        stopWatch(host);
        host.relinquish(message);
      }
    },
    nodeId,
    async close() {
      for (const id of timers.sessionIds()) clearTimers(id);
      for (const watch of [...watches.values()]) watch.stop();
      await Promise.all([...hosts.values()].map((h) => h.stop()));
      hosts.clear();
      await deps.runner.close();
    },
  };
  return engine;
};
