import { actionOf, broken, type Evidence, type Grader, grade } from "./grade.ts";

/**
 * The `resume.*` graders: after a dropped connection the client resumes the same session with its token within
 * RESUME_WITHIN_MS, its `session.event_ack`s only growing; and once the server said the session cannot go on there,
 * it does not try that session again (`noRetry`).
 */

/** How long after a dropped connection the client's resume may come, ms. */
export const RESUME_WITHIN_MS = 15_000;

/** Grades resume: a SessionResumed within the bound after the drop, and event acks accepted and growing. */
export const resume: Grader = (input, steps, t0) => {
  const dropped = actionOf(input, ["drop", "close"]);
  if (dropped === null)
    return broken("no answer's audio went out, so the connection was not dropped: the app must ask for an answer");
  const evidence: Evidence[] = [
    { revision: null, at_ms: dropped.at - t0, what: `peer: ${dropped.do} with ${dropped.on}` },
  ];
  const resumed = steps.find(
    (s) => s.at >= dropped.at && s.input === "AttachmentChanged" && s.events.some((e) => e.type === "SessionResumed"),
  );
  if (resumed === undefined) {
    if (input.unsupported.includes("resume"))
      return grade("unsupported", "the client declared it does not resume", evidence);
    const fresh = input.actions.find((a) => a.do === "new_session" && a.at >= dropped.at);
    if (fresh === undefined)
      return grade("fail", "the client did not resume the session after the connection dropped", evidence);
    evidence.push({ revision: null, at_ms: fresh.at - t0, what: "the client connected again with a new session" });
    return grade(
      "fail",
      `the client opened a new session ${fresh.at - dropped.at} ms after the drop instead of resuming this one (what it had been sent since its last ack is lost to it)`,
      evidence,
      [],
      "it opened a new session instead of resuming",
    );
  }
  evidence.push({
    revision: resumed.revision,
    at_ms: resumed.at - t0,
    what: `resumed ${resumed.at - dropped.at} ms after the drop`,
  });
  if (resumed.at - dropped.at > RESUME_WITHIN_MS)
    return grade(
      "fail",
      `it resumed ${resumed.at - dropped.at} ms after the drop (the bound is ${RESUME_WITHIN_MS} ms)`,
      evidence,
      ["resume"],
      "it resumed too late",
    );
  // Its acks: never beyond what was sent (invalid_event_ack), never back.
  let lastSeq = 0;
  for (const s of steps) {
    if (s.command?.type !== "session.event_ack") continue;
    const where = { revision: s.revision, at_ms: s.at - t0 };
    if (s.rejected !== null) {
      evidence.push({ ...where, what: `session.event_ack ${s.command.seq} refused: ${s.rejected}` });
      return grade(
        "fail",
        `an event ack was refused (${s.rejected})`,
        evidence,
        ["resume", "event ack"],
        "an event ack was refused",
      );
    }
    if (s.command.seq < lastSeq) {
      evidence.push({ ...where, what: `session.event_ack went back from ${lastSeq} to ${s.command.seq}` });
      return grade("fail", "its event acks went back: it handed an event to its app twice", evidence, [
        "resume",
        "event ack",
      ]);
    }
    lastSeq = s.command.seq;
  }
  return grade("pass", "it resumed with its token within the bound, and its event acks only grew", evidence, [
    "resume",
    "event ack",
  ]);
};

/**
 * After the server said the session cannot go on here (`session_resume_expired` or `session.resync_required` to a
 * resume, `session.replaced` to a socket another one superseded), the client does not try that session again.
 */
export const noRetry: Grader = (input, _steps, t0) => {
  const dropped = actionOf(input, ["drop", "close", "replace"]);
  if (dropped === null)
    return broken("no answer's audio went out, so the connection was not cut: the app must ask for an answer");
  const evidence: Evidence[] = [
    { revision: null, at_ms: dropped.at - t0, what: `peer: ${dropped.do} with ${dropped.on}` },
  ];
  const ended = dropped.do === "replace" ? dropped : input.actions.find((a) => a.do === "refuse_resume");
  const fresh = input.actions.find((a) => a.do === "new_session");
  if (ended === undefined)
    return input.unsupported.includes("resume")
      ? grade("unsupported", "the client declared it does not resume", evidence)
      : grade(
          "informational",
          `the client did not try to resume${fresh === undefined ? "" : " (it opened a new session)"}, so it could not retry a refused token`,
          evidence,
          [],
          "it did not try to resume",
        );
  if (ended !== dropped) evidence.push({ revision: null, at_ms: ended.at - t0, what: "peer: session.resume refused" });
  const retries = input.actions.filter((a) => a.do === "resume_retry");
  for (const r of retries)
    evidence.push({ revision: null, at_ms: r.at - t0, what: "the client sent session.resume again" });
  const told = dropped.do === "replace" ? "session.replaced" : "the refused resume";
  if (retries.length > 0)
    return grade(
      "fail",
      `after ${told} it tried the same session again ${retries.length} time(s)`,
      evidence,
      ["resume"],
      "it retried a session the server said it cannot resume",
    );
  if (input.unsupported.includes("resume"))
    return grade("unsupported", "the client declared it does not resume", evidence);
  return grade("pass", `after ${told} it did not try the session again`, evidence, ["resume"]);
};
