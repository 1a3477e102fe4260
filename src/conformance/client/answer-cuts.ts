import type { Step } from "./grade.ts";

/**
 * Answers cut by a barge-in, as the log tells them: a response ended `cancelled` (reason `barge_in` or
 * `turn_detected`) after some of its audio went out, with how much audio it had been sent (ms, from the
 * `AudioDelivered` decisions). The barge-in and playback graders judge the client's reports against them.
 */

/** How long after a cut the client's report of what it played may come, ms. */
export const REPORT_WITHIN_MS = 2000;

/** An answer a barge-in cut: its ids, when (ms epoch) and at which revision, and its audio sent so far (ms). */
export interface AnswerCut {
  readonly response: string;
  readonly item: string;
  readonly at: number;
  readonly revision: number;
  readonly sentMs: number;
  readonly reason: string;
  /** ms epoch of the step that delivered its first audio. */
  readonly firstAudioAt: number;
}

/**
 * The cuts of a session, with each response's audio sent (ms, by response id), the response of each item (by item
 * id) and the items whose answer completed.
 */
export const cutsOf = (steps: Step[]) => {
  const sent = new Map<string, number>();
  const items = new Map<string, string>();
  const cuts: AnswerCut[] = [];
  const firstAudioAt = new Map<string, number>();
  const completed = new Set<string>();
  for (const s of steps)
    for (const e of s.events) {
      if (e.type === "AudioDelivered") {
        const id = String(e.data.responseId);
        if (!firstAudioAt.has(id)) firstAudioAt.set(id, s.at);
        sent.set(id, (sent.get(id) ?? 0) + Number(e.data.durationMs));
        items.set(String(e.data.itemId), id);
      }
      if (e.type === "ResponseEnded") {
        const id = String(e.data.responseId);
        if (
          e.data.status === "cancelled" &&
          e.data.audioSent === true &&
          ["barge_in", "turn_detected"].includes(String(e.data.reason))
        )
          cuts.push({
            response: id,
            item: String(e.data.itemId),
            at: s.at,
            revision: e.revision,
            sentMs: sent.get(id) ?? 0,
            reason: String(e.data.reason),
            firstAudioAt: firstAudioAt.get(id) ?? s.at,
          });
        else if (e.data.status === "completed") completed.add(String(e.data.itemId));
      }
    }
  return { cuts, sent, items, completed };
};
