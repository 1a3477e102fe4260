import type { FastifyReply, FastifyRequest } from "fastify";
import { type Engine, type EventStore, streamOf } from "../engine/index.ts";
import { renderSessionFile } from "../infra/event-store/index.ts";
import { reportOf, timelineOf } from "../replay/index.ts";
import { sendPage } from "./page-security.ts";
import { sessionAudio } from "./session-audio.ts";
import { sessionList } from "./session-list.ts";
import { sessionListPage } from "./session-list-page.ts";
import { badRequest, notFound } from "./session-replies.ts";
import { sessionTail } from "./session-tail.ts";
import { renderTimelinePage } from "./timeline-page.ts";
import { DEFAULT_WHOLE_LOG_READS, type WholeLogReads, wholeLogReads } from "./whole-log-reads.ts";

/**
 * The session API (issue 20, part 2): the log as something people and scripts query, over HTTP, behind the `/v1`
 * auth gate of app.ts. Routes:
 *
 * - `GET /v1/sessions`: live and recorded sessions, oldest first (`order=desc`: newest first), `limit` (1..200,
 *   default 50) a page, `after` the cursor of the page before (`next_cursor`); filtered by `state` (`open`,
 *   `detached`, `closed`, `expired`, `failed`, `unused`, `disconnected`: the first word of the state), `since` and
 *   `until` (ISO 8601, when the session opened), `model`, and `error` (an error code its log holds). Read from the
 *   store's summary row of each session (`listSummaries`, issue 32: no log is read), filtered and paged in the store:
 *   `has_more` is true only when a next page holds a match. `live` is asked of the engine per request.
 * - `GET /v1/sessions/:id`: the session's report (`reportOf`: view, playback ledger, history as heard, turn ledger
 *   and spans, errors) and whether it is live here.
 * - `GET /v1/sessions/:id/export`: its duplex-session file (what `duplex export` writes; `duplex replay` reads it).
 * - `GET /v1/sessions/:id/timeline.json`: what its timeline draws (`timelineOf`: waveform peaks of the input and of
 *   each response, the VAD curve, speech, responses, turns, marks with their revisions), computed here.
 * - `GET /v1/sessions/:id/input.wav`: what the model heard, at its input rate; `GET
 *   /v1/sessions/:id/responses/:response_id.wav`: one response's audio as it was sent (404 `response_not_found`).
 * - `GET /v1/sessions/:id/events`: server-sent events, one per log entry (`event: entry`, `id:` its revision,
 *   `data:` the entry as a session-file line). A finished session streams its log and ends; a live one streams
 *   its log, then `event: caught_up`, then each entry as it is appended (a `: heartbeat` comment every
 *   `heartbeatMs`), and ends after the session's `SessionClosed`. `Last-Event-ID: N` (or `?from=N+1`) resumes
 *   after revision N with no gap and no duplicate.
 *
 * The log holds no API key and only the SHA-256 of resume tokens, so nothing served here can open a session.
 * Unknown ids get 404 `unknown_session` in OpenAI's error envelope.
 */
export interface SessionsApiOptions {
  readonly engine: Engine;
  readonly store: EventStore;
  /** Interval of the `: heartbeat` comments of a live tail, ms (default 15 000). */
  readonly heartbeatMs?: number;
  /** Requests that read a whole log (report, export, timeline, page, audio) running at once, at most (default 2). */
  readonly maxWholeLogReads?: number;
  /** The places those reads share with the server's other whole-log reads (default: of their own, `maxWholeLogReads`). */
  readonly wholeLogReads?: WholeLogReads;
}

/** The routes of the session API, as [method, path, handler] for app.ts to register. */
export const sessionsApi = (options: SessionsApiOptions) => {
  const { engine, store } = options;
  const heartbeatMs = options.heartbeatMs ?? 15_000;

  const isLive = (id: string): boolean => {
    const host = engine.get(id);
    return host !== undefined && !host.isClosed;
  };
  const listSessions = sessionList(store, isLive);
  const events = sessionTail(store, heartbeatMs);
  const pages = sessionListPage(listSessions);

  const list = async (request: FastifyRequest, reply: FastifyReply) => {
    const page = await listSessions(request.query);
    return "error" in page ? badRequest(reply, page.error) : page;
  };

  const show = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const { id } = request.params;
    const entries = await store.read(streamOf(id));
    if (entries.length === 0) return notFound(reply, id);
    return { ...reportOf(entries, "log"), live: isLive(id) };
  };

  const exported = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const { id } = request.params;
    const entries = await store.read(streamOf(id));
    if (entries.length === 0) return notFound(reply, id);
    return reply
      .header("content-type", "application/x-ndjson; charset=utf-8")
      .header("content-disposition", `attachment; filename="${id}.jsonl"`)
      .send(renderSessionFile(streamOf(id), entries));
  };

  const { inputWav, responseWav } = sessionAudio(store);

  const timeline = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const { id } = request.params;
    const entries = await store.read(streamOf(id));
    if (entries.length === 0) return notFound(reply, id);
    return timelineOf(entries, "log");
  };

  /** `/sessions/:id`: the session's timeline page (src/server/timeline-page.ts). */
  const page = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const { id } = request.params;
    const entries = await store.read(streamOf(id));
    if (entries.length === 0) return notFound(reply, id);
    const base = `/v1/sessions/${encodeURIComponent(id)}`;
    const closed = entries.some((e) => e.type === "SessionClosed");
    const timeline = timelineOf(entries, "log");
    const live = isLive(id) && !closed ? { live: { base } } : {};
    return sendPage(reply, (nonce) => renderTimelinePage({ timeline, entries, audio: { base }, ...live, nonce }));
  };

  // The routes that read and fold a whole log: a few at a time (see `oneAtATime`).
  const whole = (options.wholeLogReads ?? wholeLogReads(options.maxWholeLogReads ?? DEFAULT_WHOLE_LOG_READS)).route;
  return {
    list,
    show: whole(show),
    exported: whole(exported),
    events,
    inputWav: whole(inputWav),
    responseWav: whole(responseWav),
    timeline: whole(timeline),
    page: whole(page),
    pages,
  };
};

export type { SessionPage, SessionSummary } from "./session-list.ts";
export { MAX_TAIL_BUFFER_BYTES } from "./session-tail.ts";
export { foldsWholeLogs, WHOLE_LOG_QUEUE } from "./whole-log-reads.ts";
