import { createHash, randomBytes } from "node:crypto";
import type { Capabilities, SessionId } from "../domain/index.ts";
import type { EventStore, ModelRunner, ResamplerFactory, VadModel } from "./ports/index.ts";
import { SessionHost } from "./session-host.ts";

/** Session limits of BEHAVIOUR.md, "Defaults and limits" (times in s). */
export interface EngineLimits {
  readonly maxSessions: number;
  readonly idleTtlS: number | null;
  readonly disconnectGraceS: number;
}

export const DEFAULT_LIMITS: EngineLimits = { maxSessions: 4, idleTtlS: 300, disconnectGraceS: 30 };

export interface EngineDeps {
  readonly store: EventStore;
  readonly runner: ModelRunner;
  readonly vad: VadModel | null;
  readonly createResampler: ResamplerFactory;
  readonly limits?: Partial<EngineLimits>;
  readonly model?: string;
  /** Engine clock, ms since the Unix epoch; injectable for tests. */
  readonly now?: () => number;
  readonly log?: { warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
}

/** Why `open` refused a session. */
export type AdmissionRefusal = { readonly code: "resource_exhausted"; readonly message: string };

/**
 * The session host of the server (DESIGN.md, src/engine): admission, one `SessionHost` per live session, the
 * timers that turn into inputs (idle TTL, disconnect grace), and the runner binding.
 */
export interface Engine {
  readonly capabilities: Capabilities;
  readonly limits: EngineLimits;
  /**
   * Opens a session: allocates its id (`sess_` + 128 random bits) and resume token (32 random bytes, URL-safe
   * base64, only its SHA-256 is logged), and enqueues `SessionOpened`. Refuses beyond `maxSessions`.
   */
  open(): SessionHost | AdmissionRefusal;
  get(sessionId: string): SessionHost | undefined;
  /** Live sessions. */
  sessions(): SessionHost[];
  /** Marks a client command: re-arms the idle TTL. */
  touch(host: SessionHost): void;
  /** The socket dropped without session.close: the session waits `disconnectGraceS` for a resume, then expires. */
  detach(host: SessionHost): void;
  /** Waits for every session's mailbox and closes the runners; the store is the caller's to close. */
  close(): Promise<void>;
}

export const createEngine = (deps: EngineDeps): Engine => {
  const limits: EngineLimits = { ...DEFAULT_LIMITS, ...deps.limits };
  const now = deps.now ?? Date.now;
  const hosts = new Map<string, SessionHost>();
  const timers = new Map<string, { idle?: NodeJS.Timeout; grace?: NodeJS.Timeout }>();
  const model = deps.model ?? deps.runner.name;

  const clearTimers = (id: string): void => {
    const t = timers.get(id);
    if (t?.idle) clearTimeout(t.idle);
    if (t?.grace) clearTimeout(t.grace);
    timers.delete(id);
  };

  const engine: Engine = {
    capabilities: deps.runner.capabilities,
    limits,
    open() {
      const live = [...hosts.values()].filter((h) => !h.isClosed).length;
      if (live >= limits.maxSessions) {
        return { code: "resource_exhausted", message: `session capacity reached (max_sessions=${limits.maxSessions})` };
      }
      const sessionId = `sess_${randomBytes(16).toString("hex")}` as SessionId;
      const resumeToken = deps.runner.capabilities.supportsSessionResume ? randomBytes(32).toString("base64url") : null;
      const vadStream = deps.vad?.createStream() ?? null;
      const host = new SessionHost(sessionId, resumeToken, {
        store: deps.store,
        vad: vadStream,
        createResampler: deps.createResampler,
        now,
        openRunner: (id, emit) =>
          deps.runner.open({ sessionId: id, config: host.current.config }, (output) =>
            emit({ type: "StageOutputReceived", at: now(), data: { output } }),
          ),
        onClosed: (closed) => {
          clearTimers(closed.sessionId);
          hosts.delete(closed.sessionId);
        },
        onAppendFailed: (failed, error) => {
          deps.log?.error({ err: error, sessionId: failed.sessionId }, "session log append failed; session stopped");
          clearTimers(failed.sessionId);
          hosts.delete(failed.sessionId);
        },
      });
      hosts.set(sessionId, host);
      void host.enqueue({
        type: "SessionOpened",
        at: now(),
        data: {
          sessionId,
          model,
          capabilities: deps.runner.capabilities,
          resumeTokenSha256: resumeToken === null ? null : createHash("sha256").update(resumeToken).digest("hex"),
        },
      });
      engine.touch(host);
      return host;
    },
    get: (sessionId) => hosts.get(sessionId),
    sessions: () => [...hosts.values()],
    touch(host) {
      const ttl = host.current.config.idleTimeoutS ?? limits.idleTtlS;
      const t = timers.get(host.sessionId) ?? {};
      if (t.idle) clearTimeout(t.idle);
      if (ttl !== null) {
        t.idle = setTimeout(
          () => void host.enqueue({ type: "TimerFired", at: now(), data: { timer: "idle_ttl" } }),
          ttl * 1000,
        );
        t.idle.unref();
      }
      timers.set(host.sessionId, t);
    },
    detach(host) {
      if (host.isClosed) return;
      void host.enqueue({ type: "AttachmentChanged", at: now(), data: { change: "detached", generation: 1 } });
      const t = timers.get(host.sessionId) ?? {};
      t.grace = setTimeout(
        () => void host.enqueue({ type: "TimerFired", at: now(), data: { timer: "disconnect_grace" } }),
        limits.disconnectGraceS * 1000,
      );
      t.grace.unref();
      timers.set(host.sessionId, t);
    },
    async close() {
      for (const id of [...timers.keys()]) clearTimers(id);
      await Promise.all([...hosts.values()].map((h) => h.settled()));
      hosts.clear();
      await deps.runner.close();
    },
  };
  return engine;
};
