import type { Command } from "../../domain/index.ts";
import { cutsOf, REPORT_WITHIN_MS } from "./answer-cuts.ts";
import { broken, type Evidence, type Grader, grade } from "./grade.ts";

/**
 * The `barge-in.*` grader: after each answer a barge-in cut, the client stops and reports what it played of it
 * (`conversation.item.truncate`'s `audio_end_ms` or `playback.ack`'s `played_ms`), never beyond what it was sent,
 * within REPORT_WITHIN_MS of the cut; and it truncates no answer that nothing cut.
 */

/** The position a playback report names: `audio_end_ms` of a truncate, `played_ms` of a playback.ack. */
const reportOf = (
  command: Command | null,
): { item: string | null; response: string | null; ms: number; kind: string } | null => {
  if (command?.type === "conversation.item.truncate")
    return { item: command.itemId, response: null, ms: command.audioEndMs, kind: "truncate" };
  if (command?.type === "playback.ack")
    return { item: command.itemId, response: command.responseId, ms: command.playedMs, kind: "playback.ack" };
  return null;
};

/**
 * Which clock a report seems to read (informational, issue 23): within 50 ms of what it was sent, the received
 * position; otherwise behind it, a played (or wall-clock) position. The two cannot be told apart from the log: a
 * player that never runs dry plays at the wall clock's pace.
 */
const clockOf = (reportedMs: number, sentMs: number, sinceFirstAudioMs: number): string =>
  Math.abs(reportedMs - sentMs) <= 50
    ? "the received position"
    : `a played or wall-clock position (${Math.round(sentMs - reportedMs)} ms behind what it was sent, ${Math.round(sinceFirstAudioMs - reportedMs)} ms behind the wall clock since the first audio)`;

/** Grades barge-in: each cut answer reported, within what was sent and the bound. */
export const bargeIn: Grader = (_input, steps, t0) => {
  const { cuts, completed } = cutsOf(steps);
  if (cuts.length === 0)
    return broken("no answer was cut: the app must talk over the answer (stream interrupt_16k.wav while it plays)");
  const evidence: Evidence[] = [];
  const exercised = ["barge-in", "truncate"];
  for (const cut of cuts) {
    evidence.push({
      revision: cut.revision,
      at_ms: cut.at - t0,
      what: `${cut.response} cut (${cut.reason}) with ${Math.round(cut.sentMs)} ms sent`,
    });
    // A client that stops on speech_started (as OpenAI's clients do) reports while the overlap is still being
    // judged: a report from the speech that led to the cut counts.
    const speech = steps.findLast(
      (s) => s.at <= cut.at && s.events.some((e) => e.type === "SpeechStarted" || e.type === "SpeechAnnounced"),
    );
    const from = Math.min(cut.at, speech?.at ?? cut.at);
    const report = steps.find((s) => {
      const r = reportOf(s.command);
      return s.at >= from && r !== null && (r.item === cut.item || r.response === cut.response);
    });
    const r = reportOf(report?.command ?? null);
    if (report === undefined || r === null)
      return grade(
        "fail",
        `the client never reported what it played of ${cut.response} after it was cut`,
        evidence,
        exercised,
        "it never reported what it played of an answer that was cut",
      );
    evidence.push({
      revision: report.revision,
      at_ms: report.at - t0,
      what: `${r.kind} at ${r.ms} ms, ${report.at - cut.at} ms after the cut; its clock reads like ${clockOf(r.ms, cut.sentMs, report.at - cut.firstAudioAt)}`,
    });
    if (r.ms > cut.sentMs + 1)
      return grade(
        "fail",
        `it reported ${r.ms} ms played of ${cut.response}, beyond the ${Math.round(cut.sentMs)} ms it was sent`,
        evidence,
        exercised,
        "it reported more played than it was sent",
      );
    if (report.at - cut.at > REPORT_WITHIN_MS)
      return grade(
        "fail",
        `its report came ${report.at - cut.at} ms after the cut (the bound is ${REPORT_WITHIN_MS} ms)`,
        evidence,
        exercised,
        "its report came too long after the cut",
      );
  }
  const needless = steps.find(
    (s) =>
      s.command?.type === "conversation.item.truncate" &&
      completed.has(s.command.itemId) &&
      !cuts.some((c) => c.item === (s.command as { itemId: string }).itemId),
  );
  if (needless !== undefined) {
    evidence.push({
      revision: needless.revision,
      at_ms: needless.at - t0,
      what: "a truncate of an answer nothing cut",
    });
    return grade("fail", "it truncated an answer that nothing cut", evidence, exercised);
  }
  return grade(
    "pass",
    `after each of ${cuts.length} cut(s) it stopped and reported what it played, within the bound`,
    evidence,
    exercised,
    "it stopped and reported what it played, within the bound",
  );
};
