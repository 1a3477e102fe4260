import { randomBytes } from "node:crypto";
import type { Capabilities, DetachReason, SessionId } from "../domain/index.ts";
import type { DecodedResume } from "../protocol/index.ts";
import { equalDigests, sha256Hex } from "./digest.ts";
import { downtimeMsOf } from "./downtime.ts";
import type { Effect, TimerFiring } from "./effects.ts";
import type { AdmissionRefusal, Engine, EngineDeps, EngineLimits, OpenOptions, ResumeRefusal } from "./engine-api.ts";
import { DEFAULT_LIMITS, resumeExpired } from "./engine-api.ts";
import { type HostEvents, hostDepsOf, observeTurnSpans, resumeRefusalOf } from "./engine-hosts.ts";
import { type LoggedBefore, logLifecycle } from "./lifecycle-log.ts";
import { ownerOf, STREAM_PREFIX, stepsOf } from "./log.ts";
import type { NodeLeases, RecordedEntry, VadStream } from "./ports/index.ts";
import { SessionHost, type SessionSink } from "./session-host.ts";
import { SessionRegistry } from "./sessions.ts";
import { foldLog, type RecoveredLog, withUnansweredAppends } from "./step.ts";
import { adoptSession, sweepSessions, type TakeoverContext } from "./takeover.ts";
import { type TakeoverWatch, watchTakeover } from "./takeover-watch.ts";
import { realScheduler, type Scheduler, SessionTimers } from "./timers.ts";

/**
 * ms a node that gave a session up waits for the new owner's resume before its sockets are let go of with
 * `runtime_append_failed` (src/engine/takeover-watch.ts).
 */
const RESUME_WAIT_MS = 2_000;

/**
 * Builds the engine: one `SessionHost` per live session (the registry, src/engine/sessions.ts), their timers (idle
 * TTL, disconnect grace, response timeout) over `deps.scheduler`, takeovers between nodes (src/engine/takeover.ts).
 */
export const createEngine = (deps: EngineDeps): Engine => new SessionEngine(deps);

/** The engine (`Engine`, src/engine/engine-api.ts); its hosts' endings arrive as `HostEvents`. */
class SessionEngine implements Engine, HostEvents {
  readonly capabilities: Capabilities;
  readonly model: string;
  readonly limits: EngineLimits;
  readonly nodeId: string | null;
  private readonly scheduler: Scheduler;
  /** The engine clock, ms since the Unix epoch (the scheduler's when one is injected). */
  private readonly now: () => number;
  private readonly hosts = new SessionRegistry();
  private readonly timers: SessionTimers;
  private readonly leases: NodeLeases | null;
  /** Hosts rebuilt to take a session over whose claim (`SessionOwned`) is not appended yet. */
  private readonly claiming = new WeakSet<SessionHost>();
  /** With other nodes on the store: each host's watch for another node's takeover (src/engine/takeover-watch.ts). */
  private readonly watches = new Map<SessionHost, TakeoverWatch>();

  constructor(private readonly deps: EngineDeps) {
    this.limits = { ...DEFAULT_LIMITS, ...deps.limits };
    const scheduler = deps.scheduler ?? realScheduler;
    this.scheduler = scheduler;
    this.now = deps.now ?? (deps.scheduler === undefined ? Date.now : () => scheduler.now());
    this.timers = new SessionTimers(scheduler);
    this.capabilities = deps.runner.capabilities;
    this.model = deps.model ?? deps.runner.name;
    this.leases = deps.leases ?? null;
    this.nodeId = this.leases?.nodeId ?? null;
  }

  private clearTimers(id: string): void {
    this.timers.cancelAll(id, ["idle_ttl", "disconnect_grace", "response_timeout", "max_lifetime"]);
  }

  runTimers(host: SessionHost, effects: readonly Effect[]): void {
    if (host.isClosed || host.isFenced) return;
    this.timers.run(host.sessionId, effects, this.timerFired(host));
  }

  /** How a timer of `host` that fires becomes its `TimerFired` input, at the engine clock's time. */
  private timerFired(host: SessionHost): (data: TimerFiring) => void {
    return (data) => void host.enqueue({ type: "TimerFired", at: this.now(), data });
  }

  private stopWatch(host: SessionHost): void {
    this.watches.get(host)?.stop();
    this.watches.delete(host);
  }

  closed(host: SessionHost, vad: VadStream | null): void {
    this.stopWatch(host);
    this.clearTimers(host.sessionId);
    this.hosts.closed(host.sessionId);
    vad?.close();
  }

  fenced(host: SessionHost, reason: string, vad: VadStream | null): void {
    // A takeover whose claim lost to another append never held the session: not a session given up.
    if (this.claiming.has(host))
      this.deps.log?.debug({ sessionId: host.sessionId, node: this.nodeId }, "takeover lost to another append");
    else {
      this.deps.log?.warn(
        { sessionId: host.sessionId, node: this.nodeId, reason },
        "session given up: another node owns it",
      );
      this.deps.observe?.fenced?.();
    }
    this.clearTimers(host.sessionId);
    this.hosts.fenced(host);
    vad?.close();
  }

  appendFailed(host: SessionHost, error: unknown): void {
    // The client was let go of; the session waits for a resume, which rebuilds it from its log. The grace lease
    // runs as after a drop: its expiry tries the log again, and a store still failing re-arms it.
    this.deps.log?.error({ err: error, sessionId: host.sessionId }, "session log append failed; client let go");
    this.clearTimers(host.sessionId);
    this.armGrace(host, this.limits.disconnectGraceS * 1000);
  }

  movedAway(host: SessionHost): void {
    const watch = this.watches.get(host);
    if (watch === undefined) host.letGo("the session moved to another node: resume it to reach that node");
    else watch.moved();
  }

  /**
   * A host with its VAD stream, runner binding and timers, registered as live. `earlier`: what the log it was
   * rebuilt from holds (for the lifecycle log's totals).
   */
  private createHost(
    sessionId: SessionId,
    resumeToken: string | null,
    recovered: RecoveredLog | null,
    earlier: LoggedBefore = { logged: [], downtimeMs: 0 },
  ): SessionHost {
    const { deps, nodeId } = this;
    const vad = deps.vad?.createStream() ?? null;
    const hostDeps = hostDepsOf(deps, this.limits, this.now, vad, this, nodeId !== null);
    const host = new SessionHost(sessionId, resumeToken, hostDeps, recovered);
    if (deps.log !== undefined) logLifecycle(host, deps.log, earlier);
    if (nodeId !== null) {
      const from = recovered === null ? 0 : recovered.revision + 1;
      const onEnd = (): void => void this.watches.delete(host);
      const watch = watchTakeover({ store: deps.store, host, nodeId, from, resumeWaitMs: RESUME_WAIT_MS, onEnd });
      this.watches.set(host, watch);
    }
    if (deps.observe !== undefined) {
      const { decided, turnSpan } = deps.observe;
      host.events$.subscribe((envelope) => decided(envelope.event));
      if (turnSpan !== undefined) observeTurnSpans(host, turnSpan);
    }
    this.hosts.add(host);
    return host;
  }

  private armGrace(host: SessionHost, ms: number): void {
    const fire = this.timerFired(host);
    this.timers.arm(host.sessionId, "disconnect_grace", ms, () => fire({ timer: "disconnect_grace" }));
  }

  /**
   * A session rebuilt from its log, detached, its grace running from its last entry: after this node's restart
   * (`SessionRecovered`), or taken over from another node (`SessionOwned` at `takeoverEpoch`).
   */
  private readonly rebuild = (
    entries: readonly RecordedEntry[],
    log: ReturnType<typeof withUnansweredAppends>,
    takeoverEpoch: number | null,
  ): SessionHost => {
    const logged = stepsOf(entries).flatMap((step) => step.decisions.map((d) => d.envelope));
    const at = this.now();
    // The log's downtime and this move's (the gap before the entry appended now): the session's duration counts
    // neither, in the node log as in every other view (durationOf, the summary rows).
    const downtimeMs = downtimeMsOf(entries) + Math.max(0, at - (entries.at(-1)?.metadata.at ?? at));
    const host = this.createHost(log.state.sessionId, null, log, { logged, downtimeMs });
    void host.enqueue(
      takeoverEpoch === null || this.nodeId === null
        ? { type: "SessionRecovered", at, data: { reason: "server_restart" } }
        : { type: "SessionOwned", at, data: { node: this.nodeId, epoch: takeoverEpoch } },
    );
    const lastAt = entries.at(-1)?.metadata.at ?? this.now();
    host.markDetached(lastAt);
    this.armGrace(host, Math.max(0, this.limits.disconnectGraceS * 1000 - (this.now() - lastAt)));
    return host;
  };

  /** `Engine.resume` (its outcome counted by the caller). */
  private resumeHere(request: DecodedResume, sink: SessionSink): SessionHost | ResumeRefusal {
    const host = this.hosts.get(request.sessionId);
    const refusal = resumeRefusalOf(host, request, this.limits, this.now());
    if (refusal !== null || host === undefined) return refusal ?? resumeExpired(request.sessionId);
    const token = randomBytes(32).toString("base64url");
    const generation = host.claim(sha256Hex(request.resumeToken), token, sha256Hex(token), equalDigests);
    if (generation === null) {
      return { code: "invalid_resume_token", message: "the resume token is not the current one for this session" };
    }
    this.timers.cancel(host.sessionId, "disconnect_grace");
    void host.resume(generation, request.lastReceivedSeq, sink);
    this.touch(host);
    return host;
  }

  /** The session ends with the socket that held it: opened and never used, or closed by the client with 1000. */
  private endWithSocket(host: SessionHost, sink: SessionSink, change: "abandoned" | "closed"): void {
    if (host.isClosed || !host.release(sink)) return;
    // Its slot is free at once: a client that closed may open its next session before the close is logged.
    this.hosts.ending(host.sessionId);
    this.timers.cancel(host.sessionId, "idle_ttl");
    void host.enqueue({
      type: "AttachmentChanged",
      at: this.now(),
      data: { change, generation: host.generation, resumeTokenSha256: null, lastReceivedSeq: null },
    });
  }

  /** What a takeover needs (src/engine/takeover.ts); null without other nodes on the store. */
  private takeoverContext(): TakeoverContext | null {
    const { leases, nodeId, deps } = this;
    return leases === null || nodeId === null
      ? null
      : {
          store: deps.store,
          leases,
          nodeId,
          scheduler: this.scheduler,
          sessions: this.hosts,
          rebuild: this.rebuild,
          claiming: this.claiming,
          ...(deps.observe === undefined ? {} : { observe: deps.observe }),
        };
  }

  admission(): AdmissionRefusal | null {
    return this.hosts.admission(this.limits.maxSessions, this.deps.admit);
  }

  open(options: OpenOptions = {}): SessionHost | AdmissionRefusal {
    const refusal = this.admission();
    if (refusal !== null) return refusal;
    const { deps, limits, nodeId } = this;
    const sessionId = `sess_${randomBytes(16).toString("hex")}` as SessionId;
    const resumeToken = deps.runner.capabilities.supportsSessionResume ? randomBytes(32).toString("base64url") : null;
    const host = this.createHost(sessionId, resumeToken, null);
    void host.enqueue({
      type: "SessionOpened",
      at: this.now(),
      data: {
        sessionId,
        model: options.model ?? this.model,
        capabilities: deps.runner.capabilities,
        nativeDuplex: options.nativeDuplex ?? (deps.sessionMode === "turn" ? false : null),
        resumeTokenSha256: resumeToken === null ? null : sha256Hex(resumeToken),
        idleTimeoutS: limits.idleTtlS,
        responseTimeoutMs: limits.responseTimeoutMs,
        maxPendingTurns: limits.maxPendingTurns,
        ...(limits.maxLifetimeS === null ? {} : { maxLifetimeS: limits.maxLifetimeS }),
        ...(nodeId === null ? {} : { node: nodeId }),
        ...(options.rules === undefined ? {} : { rules: options.rules }),
      },
    });
    this.touch(host);
    return host;
  }

  get(sessionId: string): SessionHost | undefined {
    return this.hosts.get(sessionId);
  }

  sessions(): SessionHost[] {
    return this.hosts.all();
  }

  touch(host: SessionHost): void {
    // Before SessionCreated is decided the config is the initial one: the deployment's TTL applies.
    const ttl = host.current.phase === "new" ? this.limits.idleTtlS : host.current.config.idleTimeoutS;
    // Socket activity re-arms the timer a decision armed (`TimerEffect`), the same way.
    this.runTimers(host, [
      ttl === null
        ? { kind: "cancel_timer", timer: "idle_ttl" }
        : { kind: "arm_timer", ms: ttl * 1000, fire: { timer: "idle_ttl" } },
    ]);
  }

  resume(request: DecodedResume, sink: SessionSink): SessionHost | ResumeRefusal {
    const outcome = this.resumeHere(request, sink);
    this.deps.observe?.resumed?.("code" in outcome ? outcome.code : "resumed");
    return outcome;
  }

  detach(host: SessionHost, sink: SessionSink, reason: DetachReason = "disconnect"): void {
    // A session given up to another node keeps nothing here to detach.
    if (host.isClosed || !host.release(sink) || host.isFenced) return;
    void host.enqueue({
      type: "AttachmentChanged",
      at: this.now(),
      data: { change: "detached", generation: host.generation, resumeTokenSha256: null, lastReceivedSeq: null, reason },
    });
    this.armGrace(host, this.limits.disconnectGraceS * 1000);
  }

  abandon(host: SessionHost, sink: SessionSink): void {
    this.endWithSocket(host, sink, "abandoned");
  }

  closedByClient(host: SessionHost, sink: SessionSink): void {
    this.endWithSocket(host, sink, "closed");
  }

  async recover(): Promise<string[]> {
    const { store } = this.deps;
    const recovered: string[] = [];
    for (const info of await store.listStreams(STREAM_PREFIX)) {
      const entries = await store.read(info.stream);
      const log = withUnansweredAppends(foldLog(entries), entries);
      if (log.state.phase !== "open" || this.hosts.has(log.state.sessionId)) continue;
      // With other nodes on the store: this node's own sessions, and those of nodes whose lease ran out.
      const owner = ownerOf(entries);
      const mine = this.leases === null || owner.node === null || owner.node === this.nodeId;
      if (!mine && (await this.leases?.holds(owner.node as string))) continue;
      this.rebuild(entries, log, mine ? null : owner.epoch + 1);
      recovered.push(log.state.sessionId);
    }
    return recovered;
  }

  async adopt(sessionId: string, resumeToken: string): Promise<SessionHost | ResumeRefusal> {
    const held = this.hosts.get(sessionId);
    if (held !== undefined && !held.isFenced) return held;
    const context = this.takeoverContext();
    if (context === null) return resumeExpired(sessionId);
    return adoptSession(context, sessionId, resumeToken);
  }

  async sweep(): Promise<string[]> {
    const context = this.takeoverContext();
    return context === null ? [] : sweepSessions(context);
  }

  endAll(resource: "disk", message: string): string[] {
    const ended: string[] = [];
    for (const host of this.hosts.all()) {
      if (host.isClosed || host.isFenced) continue;
      void host.enqueue({ type: "ResourceExhausted", at: this.now(), data: { resource, message } });
      ended.push(host.sessionId);
    }
    return ended;
  }

  relinquishAll(message: string): void {
    for (const host of this.hosts.all()) {
      this.stopWatch(host);
      host.relinquish(message);
    }
  }

  async close(): Promise<void> {
    for (const id of this.timers.sessionIds()) this.clearTimers(id);
    for (const watch of [...this.watches.values()]) watch.stop();
    await Promise.all(this.hosts.all().map((h) => h.stop()));
    this.hosts.clear();
    await this.deps.runner.close();
  }
}
