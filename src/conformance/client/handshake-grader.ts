import { appendRefusalsOf, describeRefusals, isAppend, refusalEvidence } from "./appends.ts";
import { type Evidence, type Grader, grade, type Step } from "./grade.ts";

/**
 * The `core.handshake` grader: the client's first `session.update` is accepted, and its audio goes out as whole
 * samples the server takes (how fast it sent them, paced or uploaded, is noted, not graded).
 */

/** Grades the handshake: session.update accepted, audio appends accepted. */
export const handshake: Grader = (_input, steps, t0) => {
  const update = steps.find((s) => s.command?.type === "session.update");
  if (update === undefined) return grade("fail", "the client sent no session.update", []);
  const ev = (s: Step, what: string): Evidence => ({ revision: s.revision, at_ms: s.at - t0, what });
  if (update.rejected !== null)
    return grade("fail", `its first session.update was refused: ${update.rejected}`, [
      ev(update, "session.update refused"),
    ]);
  const appends = steps.filter((s) => isAppend(s.command));
  if (appends.length === 0)
    return grade("harness-broken", "the app sent no audio: the case asks it to stream question_16k.wav", [
      ev(update, "session.update"),
    ]);
  const refusals = appendRefusalsOf(appends);
  if (refusals.length > 0)
    return grade(
      "fail",
      describeRefusals(refusals, appends.length),
      [ev(update, "session.update"), ...refusalEvidence(refusals, t0)],
      ["session.update", "audio"],
      "the server refused its audio appends",
    );
  // Pacing: audio time sent against wall time between the first and the last append.
  const audioMs = appends.reduce((n, s) => {
    const buffered = s.events.find((e) => e.type === "AudioBuffered");
    return n + Number(buffered?.data.durationMs ?? 0);
  }, 0);
  const wallMs = (appends.at(-1)?.at ?? 0) - (appends[0]?.at ?? 0);
  const pace = wallMs <= 0 ? Number.POSITIVE_INFINITY : audioMs / wallMs;
  const paced = pace < 1.5 ? "paced near real time" : "sent faster than real time (a file upload)";
  return grade(
    "pass",
    `session.update accepted; ${appends.length} appends of whole samples, ${Math.round(audioMs)} ms of audio in ${Math.round(wallMs)} ms (${paced})`,
    [
      ev(update, "session.update accepted"),
      ev(appends[0] as Step, "first append"),
      ev(appends.at(-1) as Step, "last append"),
    ],
    ["session.update", "audio"],
    "session.update accepted; audio as whole samples",
  );
};
