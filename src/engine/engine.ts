import { randomBytes } from "node:crypto";
import { distinctUntilChanged } from "rxjs";
import { responseProgressOf, type SessionId } from "../domain/index.ts";
import { spanOf, TURN_SPANS, type TurnSpanName, turnLedger } from "../projections/index.ts";
import type { DecodedResume } from "../protocol/index.ts";
import { equalDigests, sha256Hex } from "./digest.ts";
import { downtimeMsOf } from "./downtime.ts";
import type { Engine, EngineDeps, EngineLimits, ResumeRefusal } from "./engine-api.ts";
import { DEFAULT_LIMITS } from "./engine-api.ts";
import { type LoggedBefore, logLifecycle } from "./lifecycle-log.ts";
import { ownerOf, STREAM_PREFIX, stepsOf } from "./log.ts";
import type { RecordedEntry } from "./ports/index.ts";
import { SessionHost, type SessionSink } from "./session-host.ts";
import { SessionRegistry } from "./sessions.ts";
import { foldLog, type RecoveredLog, withUnansweredAppends } from "./step.ts";
import { adoptSession, sweepSessions, type TakeoverContext } from "./takeover.ts";
import { type TakeoverWatch, watchTakeover } from "./takeover-watch.ts";
import { MAX_TIMER_MS, realScheduler, SessionTimers } from "./timers.ts";

/**
 * ms a node that gave a session up waits for the new owner's resume before its sockets are let go of with
 * `runtime_append_failed` (src/engine/takeover-watch.ts).
 */
const RESUME_WAIT_MS = 2_000;

/**
 * Builds the engine: one `SessionHost` per live session (the registry, src/engine/sessions.ts), their timers (idle
 * TTL, disconnect grace, response timeout) over `deps.scheduler`, takeovers between nodes (src/engine/takeover.ts).
 */
export const createEngine = (deps: EngineDeps): Engine => {
  const limits: EngineLimits = { ...DEFAULT_LIMITS, ...deps.limits };
  const scheduler = deps.scheduler ?? realScheduler;
  const now = deps.now ?? (deps.scheduler === undefined ? Date.now : () => scheduler.now());
  const hosts = new SessionRegistry();
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
          hosts.closed(closed.sessionId);
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
          hosts.fenced(fenced);
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
    hosts.add(host);
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
    hosts.ending(host.sessionId);
    timers.cancel(host.sessionId, "idle_ttl");
    void host.enqueue({
      type: "AttachmentChanged",
      at: now(),
      data: { change, generation: host.generation, resumeTokenSha256: null, lastReceivedSeq: null },
    });
  };

  /** What a takeover needs (src/engine/takeover.ts); null without other nodes on the store. */
  const takeoverContext = (): TakeoverContext | null =>
    leases === null || nodeId === null
      ? null
      : {
          store: deps.store,
          leases,
          nodeId,
          scheduler,
          sessions: hosts,
          rebuild,
          claiming,
          ...(deps.observe === undefined ? {} : { observe: deps.observe }),
        };

  const engine: Engine = {
    capabilities: deps.runner.capabilities,
    model,
    limits,
    admission: () => hosts.admission(limits.maxSessions, deps.admit),
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
    sessions: () => hosts.all(),
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
      const context = takeoverContext();
      if (context === null)
        return { code: "session_resume_expired", message: `unknown or expired session: ${sessionId}` };
      return adoptSession(context, sessionId, resumeToken);
    },
    async sweep() {
      const context = takeoverContext();
      return context === null ? [] : sweepSessions(context);
    },
    endAll(resource, message) {
      const ended: string[] = [];
      for (const host of hosts.all()) {
        if (host.isClosed || host.isFenced) continue;
        void host.enqueue({ type: "ResourceExhausted", at: now(), data: { resource, message } });
        ended.push(host.sessionId);
      }
      return ended;
    },
    relinquishAll(message) {
      for (const host of hosts.all()) {
        stopWatch(host);
        host.relinquish(message);
      }
    },
    nodeId,
    async close() {
      for (const id of timers.sessionIds()) clearTimers(id);
      for (const watch of [...watches.values()]) watch.stop();
      await Promise.all(hosts.all().map((h) => h.stop()));
      hosts.clear();
      await deps.runner.close();
    },
  };
  return engine;
};
