import { audioRate } from "./audio-rate-grader.ts";
import { bargeIn } from "./barge-in-grader.ts";
import type { ClientCase, GraderName } from "./cases.ts";
import { broken, type Grade, type GradeInput, type Grader, type Step, stepsFor } from "./grade.ts";
import { handshake } from "./handshake-grader.ts";
import { lease } from "./lease-grader.ts";
import { playback } from "./playback-grader.ts";
import { errorRecovery, forwardCompat } from "./recovery-graders.ts";
import { noRetry, resume } from "./resume-graders.ts";

/**
 * Grading a client from its session's log (issue 23): each grader is a projection over the log's steps (the client's
 * commands as the server received them, and what the server decided and sent), with what the peer did to the
 * connection (`PeerAction`s, timed on the same clock as the log). A grade names the log revisions that decided it.
 * One file per rule judged: handshake, audio rate, recovery (forward compatibility, errors), barge-in, playback,
 * resume (and no retry), lease; this one maps each case's `grader` to its function.
 */

export { REPORT_WITHIN_MS } from "./answer-cuts.ts";
export { referenceTone, TONE_HZ, tonePitchOf } from "./audio-rate-grader.ts";
export type { Evidence, Grade, GradeInput, PeerAction, Verdict } from "./grade.ts";
export { RESUME_WITHIN_MS } from "./resume-graders.ts";

const GRADER_FUNCTIONS: Record<GraderName, Grader> = {
  "no-retry": noRetry,
  lease,
  handshake,
  "audio-rate": audioRate,
  "forward-compat": forwardCompat,
  "error-recovery": errorRecovery,
  "barge-in": bargeIn,
  playback,
  resume,
};

/**
 * Grades `input` (a session's log and what the peer did) by `clientCase`'s grader. A log that cannot be read grades
 * harness-broken. Pure.
 */
export const gradeCase = (clientCase: ClientCase, input: GradeInput): Grade => {
  const t0 = input.entries[0]?.metadata.at ?? 0;
  let steps: Step[];
  try {
    steps = stepsFor(input.entries);
  } catch (error) {
    return broken(`the session's log could not be read: ${(error as Error).message}`);
  }
  if (steps.length === 0) return broken("the client opened no session");
  return GRADER_FUNCTIONS[clientCase.grader](input, steps, t0);
};
