import { type ResponseId, responseIdFor, type SessionId } from "../domain/index.ts";
import { type EventStore, type RecordedEntry, stepsOf, streamOf } from "../engine/index.ts";
import { resamplePcm16 } from "../infra/audio/index.ts";
import { audioOf, responseSamples } from "../replay/index.ts";
import type { AudioBudget } from "./chat-audio.ts";
import { ChatError } from "./chat-error.ts";

/**
 * The `message.audio.id` of a chat completion's spoken answer, and its way back (issue 33, part 4; OpenAI's
 * multi-turn audio: the id of an answer is sent back as `{role: "assistant", audio: {id}}` in the next request,
 * platform.openai.com/docs/guides/audio). The id is `audio_<hex>_<n>`: the 128-bit hex of the session the request
 * ran as (`sess_<hex>`) and the number of its response (`resp_<tag>_<n>`), so it names both and is as hard to guess
 * as the session id. It is resolved from that session's log, in one bounded read of the store, while the log is
 * retained and at least until the answer's `expires_at`. Every API key of the server reaches every id, as every key
 * reaches every session (`/v1/sessions`): keys are not separated.
 */

/** s an answer's audio id can be referred to, counted from the response's end (the answer's `expires_at`). */
export const ANSWER_AUDIO_TTL_S = 3600;

/**
 * Entries of a session's log one lookup reads, at most: a request of `MAX_CHAT_MESSAGES` items, 300 s of input audio
 * and a long answer in 20 ms chunks fit; a longer log is refused, not read further.
 */
export const MAX_ANSWER_LOG_ENTRIES = 65_536;

const AUDIO_ID = /^audio_([0-9a-f]{32})_([1-9][0-9]{0,8})$/;

/** The audio id of `responseId`'s answer in session `sessionId` (`sess_<32 hex>`): `audio_<32 hex>_<n>`. */
export const audioIdOf = (sessionId: SessionId, responseId: ResponseId | string): string =>
  `audio_${sessionId.slice("sess_".length)}_${responseId.slice(responseId.lastIndexOf("_") + 1)}`;

/** The session and response an audio id names, or null for a string that is not such an id. */
export const parseAudioId = (id: string): { sessionId: SessionId; responseId: ResponseId } | null => {
  const match = AUDIO_ID.exec(id);
  if (match === null) return null;
  const sessionId = `sess_${match[1]}` as SessionId;
  return { sessionId, responseId: responseIdFor(sessionId, Number(match[2])) };
};

/** An earlier answer, as the next request's session is given it: an assistant item with its words and audio. */
export interface EarlierAnswer {
  /** What the answer said (`ResponseEnded.transcript`). */
  readonly transcript: string;
  /** Mono PCM16 little-endian at the rate asked of `answerOf` (bytes). */
  readonly audio: Buffer;
  /** The audio's length, s. */
  readonly seconds: number;
}

/**
 * Counts `seconds` of an earlier answer's audio against the request's `budget`.
 * @throws ChatError 400 `bad_audio` naming `at` when they take the request past `budget.maxS`.
 */
export const chargeAnswer = (budget: AudioBudget, seconds: number, at: string): void => {
  if (budget.usedS + seconds > budget.maxS)
    throw new ChatError(
      400,
      "bad_audio",
      `${at}: the answer's ${seconds.toFixed(1)} s of audio brings the request to ${(budget.usedS + seconds).toFixed(1)} s; a request carries at most ${budget.maxS} s (limits.request_audio_s)`,
      at,
    );
  budget.usedS += seconds;
};

const refused = (at: string, message: string) => new ChatError(400, "bad_event", `${at}: ${message}`, at);

/**
 * The answer `id` names in `entries` (its session's log, as read), resampled to `inputRateHz`, counted against
 * `budget`. Pure: the lookup's read is `resolveAnswer`'s.
 *
 * @param at the field's path in the request (`messages.3.audio.id`), for the error's param.
 * @param nowMs the time of the request, ms since the Unix epoch.
 * @throws ChatError 400 `bad_event` naming `at` when the id is not one, its session is not held (unknown, or its log
 *   no longer retained), its log is longer than `MAX_ANSWER_LOG_ENTRIES`, its response never ended or spoke nothing,
 *   or the id expired (`ANSWER_AUDIO_TTL_S` after the response's end); 400 `bad_audio` when its audio would take
 *   the request past `budget` (`limits.request_audio_s`).
 */
export const answerOf = (
  id: string,
  entries: readonly RecordedEntry[],
  options: { readonly at: string; readonly nowMs: number; readonly inputRateHz: number; readonly budget: AudioBudget },
): EarlierAnswer => {
  const { at, nowMs, inputRateHz, budget } = options;
  const named = parseAudioId(id);
  if (named === null) {
    // Quoted in part: an error never echoes more of a request than its first characters (a 5 MB id was echoed whole).
    const shown =
      id.length > 64 ? `${JSON.stringify(id.slice(0, 64))}... (${id.length} characters)` : JSON.stringify(id);
    throw refused(at, `${shown} is not the audio id of an answer of this server (audio_<32 hex>_<n>)`);
  }
  if (entries.length === 0)
    throw refused(at, `${id} names no answer held here: its session is unknown, or its log is no longer retained`);
  if (entries.length >= MAX_ANSWER_LOG_ENTRIES)
    throw refused(
      at,
      `${id}: the log of its session holds ${MAX_ANSWER_LOG_ENTRIES} entries or more; its answer is not looked up`,
    );
  let ended: { transcript: string; status: string; at: number } | null = null;
  for (const step of stepsOf(entries))
    for (const { envelope } of step.decisions)
      if (envelope.event.type === "ResponseEnded" && envelope.event.data.responseId === named.responseId)
        ended = {
          transcript: envelope.event.data.transcript,
          status: envelope.event.data.status,
          at: envelope.metadata.at,
        };
  if (ended === null)
    throw refused(at, `${id} names no answer held here: its session has no response ${named.responseId} that ended`);
  const expiresAtS = Math.floor(ended.at / 1000) + ANSWER_AUDIO_TTL_S;
  if (Math.floor(nowMs / 1000) > expiresAtS)
    throw refused(
      at,
      `${id} expired at ${new Date(expiresAtS * 1000).toISOString()} (an answer's audio is held ${ANSWER_AUDIO_TTL_S} s after it)`,
    );
  if (ended.status !== "completed" && ended.status !== "incomplete")
    throw refused(at, `${id} names a response that ended ${ended.status}: it gave no answer`);
  const delivered = audioOf(entries).responses.get(named.responseId);
  const samples = delivered === undefined ? null : responseSamples(delivered);
  if (delivered === undefined || !(samples instanceof Int16Array) || samples.length === 0)
    throw refused(at, `${id} names an answer that spoke no audio`);
  const seconds = samples.length / delivered.rateHz;
  chargeAnswer(budget, seconds, at);
  const pcm = resamplePcm16(samples, delivered.rateHz, inputRateHz);
  return { transcript: ended.transcript, audio: Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength), seconds };
};

/**
 * Resolves `id` from the store: one read of its session's stream, at most `MAX_ANSWER_LOG_ENTRIES` entries, then
 * `answerOf`. No read is made for a string that is not an audio id.
 * @throws ChatError as `answerOf`; 500 `internal_error` (the store's message kept inside, as `cause`) when the read
 *   fails or the log does not fold (a log newer than this server).
 */
export const resolveAnswer = async (
  store: EventStore,
  id: string,
  options: Parameters<typeof answerOf>[2],
  /** Logs read already by this request, by session id: ids of one session cost one read. */
  logs: Map<string, readonly RecordedEntry[]> = new Map(),
): Promise<EarlierAnswer> => {
  const named = parseAudioId(id);
  if (named === null) return answerOf(id, [], options);
  let entries: readonly RecordedEntry[];
  try {
    entries = logs.get(named.sessionId) ?? (await store.read(streamOf(named.sessionId), 0, MAX_ANSWER_LOG_ENTRIES));
    logs.set(named.sessionId, entries);
  } catch (error) {
    throw new ChatError(500, "internal_error", `${options.at}: the log of ${id}'s session could not be read`, null, {
      cause: error,
    });
  }
  try {
    return answerOf(id, entries, options);
  } catch (error) {
    if (error instanceof ChatError) throw error;
    throw new ChatError(500, "internal_error", `${options.at}: the log of ${id}'s session could not be read`, null, {
      cause: error,
    });
  }
};
