import { broken, type Evidence, type Grader, grade } from "./grade.ts";

/** The `lease.*` grader: heartbeats or traffic keep a quiet session from expiring idle. */

/**
 * The lease (BEHAVIOUR.md, "Session lifetime": `idle_ttl_s`): once the conversation is quiet, heartbeats or other
 * traffic keep the session from expiring idle for longer than its idle timeout (the session object's
 * `idle_timeout_s`, from the log's SessionOpened and SessionConfigured).
 */
export const lease: Grader = (input, steps, t0) => {
  let ttlS: number | null = null;
  for (const e of input.entries) {
    const data = e.data as { idleTimeoutS?: number | null; config?: { idleTimeoutS?: number | null } };
    if (e.type === "SessionOpened" && data.idleTimeoutS !== undefined) ttlS = data.idleTimeoutS;
    if (e.type === "SessionConfigured" && data.config?.idleTimeoutS !== undefined) ttlS = data.config.idleTimeoutS;
  }
  if (ttlS === null) return broken("the session has no idle timeout, so there is no lease to keep");
  const last = input.entries.at(-1);
  const expired = input.entries.find(
    (e) => e.type === "SessionClosed" && (e.data as { reason?: string }).reason === "idle_ttl_expired",
  );
  // Quiet from the last response's end (or the last speech), whichever came last.
  const quietFrom = steps.findLast((s) =>
    s.events.some((e) => e.type === "ResponseEnded" || e.type === "SpeechStopped" || e.type === "InputCommitted"),
  );
  const from = quietFrom?.at ?? t0;
  const heartbeats = steps.filter((s) => s.at > from && s.command?.type === "session.heartbeat").length;
  const other = steps.filter((s) => s.at > from && s.command !== null && s.command.type !== "session.heartbeat").length;
  const evidence: Evidence[] = [];
  if (quietFrom !== undefined)
    evidence.push({ revision: quietFrom.revision, at_ms: from - t0, what: "the conversation went quiet" });
  const kept = `${heartbeats} heartbeat(s) and ${other} other command(s)`;
  if (expired !== undefined) {
    evidence.push({ revision: expired.revision, at_ms: expired.metadata.at - t0, what: "session expired: idle" });
    return grade(
      "fail",
      `the session expired idle ${Math.round((expired.metadata.at - from) / 1000)} s after the conversation went quiet (idle timeout ${ttlS} s; ${kept} in between)`,
      evidence,
      ["lease"],
      "the session expired idle: no heartbeat kept it",
    );
  }
  const quietMs = (last?.metadata.at ?? from) - from;
  if (last !== undefined)
    evidence.push({ revision: last.revision, at_ms: last.metadata.at - t0, what: `session ended (${last.type})` });
  if (quietMs <= ttlS * 1000)
    return broken(
      `the app left ${Math.round(quietMs / 1000)} s after the conversation went quiet: the case asks it to stay, silent, for longer than the idle timeout (${ttlS} s)`,
    );
  return grade(
    "pass",
    `quiet for ${Math.round(quietMs / 1000)} s, past the idle timeout of ${ttlS} s: ${kept} kept the session`,
    evidence,
    heartbeats > 0 ? ["lease", "heartbeat"] : ["lease"],
    "heartbeats or traffic kept the idle session alive",
  );
};
