import { cutsOf, REPORT_WITHIN_MS } from "./answer-cuts.ts";
import { broken, type Evidence, type Grader, grade, type Step } from "./grade.ts";

/**
 * The `playback.*` grader: the client's `playback.ack`s of each answer grow, never go beyond the audio it was sent,
 * and stop once a barge-in cut the answer (none later than REPORT_WITHIN_MS after the cut).
 */

/** Grades playback acks. */
export const playback: Grader = (input, steps, t0) => {
  const acks = steps.filter((s) => s.command?.type === "playback.ack");
  if (!steps.some((s) => s.events.some((e) => e.type === "AudioDelivered")))
    return broken("no answer's audio went out, so there was nothing to acknowledge: the app must ask for an answer");
  if (acks.length === 0)
    return input.unsupported.includes("playback")
      ? grade("unsupported", "the client declared it does not acknowledge playback", [])
      : grade("fail", "the client sent no playback.ack", []);
  const { cuts, items } = cutsOf(steps);
  const sentAt = new Map<string, number>();
  const last = new Map<string, number>();
  const evidence: Evidence[] = [];
  for (const s of steps) {
    for (const e of s.events)
      if (e.type === "AudioDelivered")
        sentAt.set(String(e.data.responseId), (sentAt.get(String(e.data.responseId)) ?? 0) + Number(e.data.durationMs));
    if (s.command?.type !== "playback.ack") continue;
    const ack = s.command;
    const response = ack.responseId ?? (ack.itemId === null ? null : (items.get(ack.itemId) ?? null));
    if (response === null) continue;
    const where = { revision: s.revision, at_ms: s.at - t0 };
    const sent = sentAt.get(response) ?? 0;
    if (ack.playedMs > sent + 1) {
      evidence.push({
        ...where,
        what: `playback.ack of ${response} at ${ack.playedMs} ms, ${Math.round(sent)} ms sent`,
      });
      return grade(
        "fail",
        `a playback.ack (${ack.playedMs} ms) went beyond what was sent (${Math.round(sent)} ms)`,
        evidence,
        ["playback.ack"],
        "a playback.ack went beyond what was sent",
      );
    }
    const before = last.get(response) ?? 0;
    if (ack.playedMs < before) {
      evidence.push({ ...where, what: `playback.ack of ${response} went back from ${before} to ${ack.playedMs} ms` });
      return grade("fail", "its playback.ack went back", evidence, ["playback.ack"]);
    }
    const cut = cuts.find((c) => c.response === response);
    if (cut !== undefined && s.at - cut.at > REPORT_WITHIN_MS) {
      evidence.push({ ...where, what: `playback.ack of ${response} ${s.at - cut.at} ms after it was cut` });
      return grade("fail", "it acknowledged an answer of the old epoch long after a barge-in cut it", evidence, [
        "playback.ack",
      ]);
    }
    last.set(response, ack.playedMs);
  }
  const first = acks[0] as Step;
  const lastAck = acks.at(-1) as Step;
  evidence.push(
    { revision: first.revision, at_ms: first.at - t0, what: "first playback.ack" },
    { revision: lastAck.revision, at_ms: lastAck.at - t0, what: "last playback.ack" },
  );
  return grade(
    "pass",
    `${acks.length} playback.ack, each growing and within what was sent`,
    evidence,
    ["playback.ack"],
    "each playback.ack grew and stayed within what was sent",
  );
};
