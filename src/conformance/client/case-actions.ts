import type { WebSocket } from "ws";
import { handshakeError, resyncRequired, sessionReplaced } from "../../protocol/index.ts";
import type { CaseRun } from "./case-runs.ts";

/**
 * What the client conformance peer does to a connection as its case says (cases.ts, `CaseAction`): when the `nth`
 * server event of a type is about to go to the client, inject an event before it, add fields to it, send its twin
 * under the other dialect's name, drop the connection, close it with a code, or replace the session; and, for a case
 * that refuses resumes (or whose session another connection replaced), answer the client's `session.resume` itself.
 */

/** The beta names of the server events cases trigger on, to their GA names. */
export const BETA_TO_GA: Readonly<Record<string, string>> = {
  "response.audio.delta": "response.output_audio.delta",
  "response.audio.done": "response.output_audio.done",
  "response.audio_transcript.delta": "response.output_audio_transcript.delta",
  "response.audio_transcript.done": "response.output_audio_transcript.done",
  "response.text.delta": "response.output_text.delta",
  "response.text.done": "response.output_text.done",
};

/** The GA names of those events, to their beta names. */
const GA_TO_BETA: Record<string, string> = Object.fromEntries(Object.entries(BETA_TO_GA).map(([b, g]) => [g, b]));

/** Whether a client frame's text is a `session.resume` (its type within the first 300 characters). */
const isResume = (text: string): boolean => /"type"\s*:\s*"session\.resume"/.test(text.slice(0, 300));

/**
 * Answers a client's `session.resume` for a case that refuses resumes, or whose session ended for it (refused or
 * replaced): the first as the case says (`session_resume_expired`, or `session.resync_required`), the later ones as
 * the server answers an expired session's. Notes the answer in `run.actions`. Returns whether it answered (the frame
 * then does not go upstream).
 */
export const answerResume = (run: CaseRun | null, client: WebSocket, text: string | null): boolean => {
  const refusal = run?.case.actions.find((a) => a.do === "refuse_resume");
  const ended = run?.actions.some((a) => a.do === "refuse_resume" || a.do === "replace") === true;
  if (run === null || (refusal === undefined && !ended) || text === null || !isResume(text)) return false;
  const eventId = /"event_id"\s*:\s*"([^"]+)"/.exec(text)?.[1] ?? null;
  run.actions.push({ do: ended ? "resume_retry" : "refuse_resume", on: "session.resume", at: Date.now() });
  if (!ended && refusal?.answer === "resync_required") client.send(resyncRequired(run.sessionId ?? "", "journal_gap"));
  else
    client.send(handshakeError("session_resume_expired", "unknown or expired session (conformance: refused)", eventId));
  return true;
};

/**
 * Plays the case's actions due on the server event `text` (its GA type `type`, as spelled on the wire `spelled`):
 * counts it, does each action whose `on` and `nth` it matches (once), notes each in `run.actions`. Returns the frame
 * to forward to the client (with any extra fields), or null when an action ended the connection.
 */
export const playActions = (
  run: CaseRun,
  sockets: { readonly client: WebSocket; readonly upstream: WebSocket },
  event: { readonly type: string; readonly spelled: string; readonly text: string },
): string | null => {
  const { client, upstream } = sockets;
  const { type, spelled, text } = event;
  const count = (run.sent.get(type) ?? 0) + 1;
  run.sent.set(type, count);
  let out: string | null = text;
  for (const [i, action] of run.case.actions.entries()) {
    if (run.done.has(i) || action.on !== type || action.nth !== count) continue;
    run.done.add(i);
    run.actions.push({ do: action.do, on: type, at: Date.now() });
    if (action.do === "refuse_resume") continue;
    if (action.do === "inject") client.send(JSON.stringify(action.event));
    else if (action.do === "twin") {
      // The same event under the other dialect's name: the beta name if the client got the GA one, else the GA.
      const other = spelled === type ? GA_TO_BETA[type] : type;
      if (other !== undefined) client.send(JSON.stringify({ ...JSON.parse(text), type: other }));
    } else if (action.do === "extra_field") out = JSON.stringify({ ...JSON.parse(out ?? text), ...action.field });
    else {
      // The server sees a dropped socket (1006) either way: the session waits, detached, for a resume.
      out = null;
      upstream.terminate();
      if (action.do === "drop") client.terminate();
      else if (action.do === "replace") {
        client.send(sessionReplaced(run.sessionId ?? "", 2));
        client.close(1000, "session replaced");
      } else client.close(action.code, action.reason);
    }
  }
  return out;
};
