import { equalDigests, sha256Hex } from "./digest.ts";
import { type EngineDeps, type ResumeRefusal, resumeExpired } from "./engine-api.ts";
import { ownerOf, type SessionOwner, STREAM_PREFIX, streamOf } from "./log.ts";
import type { EventStore, NodeLeases, RecordedEntry } from "./ports/index.ts";
import type { SessionHost } from "./session-host.ts";
import type { SessionRegistry } from "./sessions.ts";
import { foldLog, withUnansweredAppends } from "./step.ts";
import type { Scheduler } from "./timers.ts";

/**
 * Takeovers between nodes on one store (issue 22; issue 34, part 4): a `session.resume` of a session another node
 * held (`adoptSession`), and a sweep of the sessions of nodes whose lease ran out (`sweepSessions`). Either rebuilds
 * the session from its log and appends this node's claim (`SessionOwned`, the next epoch); a claim that loses to
 * another append leaves its host fenced.
 */

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

/** A session log folded, with the appends it left unanswered (what a rebuild starts from). */
export type FoldedLog = ReturnType<typeof withUnansweredAppends>;

/** What takeovers need of their engine. */
export interface TakeoverContext {
  readonly store: EventStore;
  readonly leases: NodeLeases;
  readonly nodeId: string;
  readonly scheduler: Scheduler;
  readonly sessions: SessionRegistry;
  /** Rebuilds a session from its log, detached, and enqueues this node's claim at `takeoverEpoch`. */
  readonly rebuild: (entries: readonly RecordedEntry[], log: FoldedLog, takeoverEpoch: number) => SessionHost;
  /** Hosts rebuilt to take a session over whose claim is not decided yet (a lost claim is not a session given up). */
  readonly claiming: WeakSet<SessionHost>;
  readonly observe?: EngineDeps["observe"];
}

/**
 * Rebuilds a session that `owner` held and appends this node's claim (`SessionOwned`, the next epoch); resolves
 * once the claim is decided: the host is fenced when another append came first.
 */
const takeOver = async (
  context: TakeoverContext,
  entries: readonly RecordedEntry[],
  log: FoldedLog,
  owner: SessionOwner,
): Promise<SessionHost> => {
  const host = context.rebuild(entries, log, owner.epoch + 1);
  context.claiming.add(host);
  await host.settled();
  context.claiming.delete(host);
  return host;
};

/** A host held here and not fenced: the one a resume reaches without a takeover. */
const heldHere = (context: TakeoverContext, sessionId: string): SessionHost | undefined => {
  const held = context.sessions.get(sessionId);
  return held !== undefined && !held.isFenced ? held : undefined;
};

/** The log read, checked before anything moves: a wrong token or a closed session moves nothing. */
const checkLog = (
  entries: readonly RecordedEntry[],
  resumeToken: string,
  expired: ResumeRefusal,
): ResumeRefusal | { log: FoldedLog; owner: SessionOwner } => {
  if (entries.length === 0) return expired;
  const log = withUnansweredAppends(foldLog(entries), entries);
  if (log.state.phase !== "open") return expired;
  const logged = log.state.resumeTokenSha256;
  if (logged === null || !equalDigests(logged, sha256Hex(resumeToken)))
    return { code: "invalid_resume_token", message: "the resume token is not the current one for this session" };
  return { log, owner: ownerOf(entries) };
};

/**
 * `Engine.adopt` with other nodes on the store, for a session not held here (the engine checks that first): takes
 * `sessionId` over for a resume with `resumeToken`. The claim
 * (`SessionOwned`) is appended with the revision read. A store that fences (PostgreSQL) first refuses every later
 * append of the old owner (an answer it still writes to a detached session, say), then the log is read to its end:
 * the claim wins. Without fences, an append of the old owner in between makes the new host lose (it is fenced), and
 * the log is read again with that append in it.
 * @throws TakeoverLostError when another node's takeover won each of `ADOPT_ATTEMPTS` attempts.
 */
export const adoptSession = async (
  context: TakeoverContext,
  sessionId: string,
  resumeToken: string,
): Promise<SessionHost | ResumeRefusal> => {
  const expired = resumeExpired(sessionId);
  const { store } = context;
  const stream = streamOf(sessionId);
  for (let attempt = 0; attempt < ADOPT_ATTEMPTS; attempt += 1) {
    let entries = await store.read(stream);
    let checked = checkLog(entries, resumeToken, expired);
    if ("code" in checked) return checked;
    const again = heldHere(context, sessionId);
    if (again !== undefined) return again;
    if (store.fence !== undefined) {
      if ((await store.fence(stream, FENCE_MS)) === null) {
        // Another node's takeover holds the session this moment: its outcome is read at the next attempt.
        await new Promise((resolve) => context.scheduler.setTimeout(() => resolve(undefined), FENCED_RETRY_MS));
        continue;
      }
      entries = await store.read(stream);
      checked = checkLog(entries, resumeToken, expired);
      if ("code" in checked) return checked;
      // Taken meanwhile by this node (its sweep, or another socket's resume): that host is the one.
      const taken = heldHere(context, sessionId);
      if (taken !== undefined) return taken;
    }
    const host = await takeOver(context, entries, checked.log, checked.owner);
    if (host.isFenced) continue;
    if (host.isClosed) return expired;
    context.observe?.tookOver?.("resume");
    return host;
  }
  // A live session that kept moving: not an expired one (the client resumes again).
  throw new TakeoverLostError(sessionId, ADOPT_ATTEMPTS);
};

/** `Engine.sweep`: takes over the open sessions of nodes whose lease ran out; returns their ids. */
export const sweepSessions = async (context: TakeoverContext): Promise<string[]> => {
  const { store, sessions } = context;
  const taken: string[] = [];
  for (const info of await store.listStreams(STREAM_PREFIX)) {
    const id = info.stream.slice(STREAM_PREFIX.length);
    if (sessions.has(id)) continue;
    // A closed session's last entry says so: its whole log is not read again every sweep.
    const last = (await store.read(info.stream, info.revision)).at(-1);
    if (last === undefined || last.type === "SessionClosed") continue;
    const entries = await store.read(info.stream);
    const owner = ownerOf(entries);
    if (owner.node === context.nodeId || owner.node === null) continue;
    const log = withUnansweredAppends(foldLog(entries), entries);
    if (log.state.phase !== "open" || sessions.has(log.state.sessionId)) continue;
    if (await context.leases.holds(owner.node)) continue;
    const host = await takeOver(context, entries, log, owner);
    if (host.isFenced) continue;
    context.observe?.tookOver?.("lease_expired");
    taken.push(id);
  }
  return taken;
};
