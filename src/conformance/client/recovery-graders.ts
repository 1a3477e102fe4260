import { actionOf, broken, type Evidence, type Grader, grade } from "./grade.ts";

/**
 * The graders of what a client does after the unexpected: `core.forward-compat` (an unknown event type and field,
 * or an event under the other dialect's name, beta or GA) and `core.error-recovery` (a non-fatal coded `error`).
 * Both pass when the client goes on with a valid command.
 */

/** Grades forward compatibility: after the peer's injected event, an answer completed and the client went on. */
export const forwardCompat: Grader = (input, steps, t0) => {
  const injected = actionOf(input, ["inject", "extra_field", "twin"]);
  if (injected === null)
    return broken("no response started, so nothing unknown was sent: the app must ask for an answer");
  const twin = injected.do === "twin";
  const what = twin ? `${injected.on} under the other dialect's name` : "an unknown event type and an unknown field";
  const evidence: Evidence[] = [{ revision: null, at_ms: injected.at - t0, what: `peer: ${what}` }];
  const completed = steps.find(
    (s) => s.at >= injected.at && s.events.some((e) => e.type === "ResponseEnded" && e.data.status === "completed"),
  );
  const later = steps.find((s) => s.at > injected.at && s.command !== null && s.rejected === null);
  if (completed !== undefined)
    evidence.push({ revision: completed.revision, at_ms: completed.at - t0, what: "a response completed after it" });
  if (later !== undefined)
    evidence.push({
      revision: later.revision,
      at_ms: later.at - t0,
      what: `the client went on: ${later.command?.type}`,
    });
  if (completed !== undefined && later !== undefined)
    return grade(
      "pass",
      twin
        ? "the client took the other dialect's spelling in its stride and went on"
        : "the client ignored the unknown event and field and went on",
      evidence,
      [twin ? "beta and GA spellings" : "forward compatibility"],
    );
  return grade("fail", `after ${what} the client sent nothing more (or no answer completed)`, evidence, [
    twin ? "beta and GA spellings" : "forward compatibility",
  ]);
};

/** Grades error recovery: a valid command more than 50 ms after the injected non-fatal error. */
export const errorRecovery: Grader = (input, steps, t0) => {
  const injected = actionOf(input, ["inject"]);
  if (injected === null) return broken("no response started, so no error was sent: the app must ask for an answer");
  const evidence: Evidence[] = [{ revision: null, at_ms: injected.at - t0, what: "peer: a non-fatal coded error" }];
  const later = steps.find(
    (s) => s.at > injected.at + 50 && s.command !== null && s.command.type !== "session.close" && s.rejected === null,
  );
  if (later === undefined)
    return grade("fail", "after a non-fatal error the client sent no further valid command", evidence, ["errors"]);
  evidence.push({ revision: later.revision, at_ms: later.at - t0, what: `the client went on: ${later.command?.type}` });
  return grade("pass", "the client went on with a valid command after a non-fatal error", evidence, ["errors"]);
};
