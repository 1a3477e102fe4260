import type { Writable } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Subscription } from "rxjs";
import { z } from "zod";
import { type Engine, type EventStore, type RecordedEntry, STREAM_PREFIX, streamOf } from "../engine/index.ts";
import { encodeWav, pcm16FromBytes } from "../infra/audio/index.ts";
import { escapeMarkup } from "../infra/escape-markup.ts";
import { renderEntryLine, renderSessionFile } from "../infra/event-store/index.ts";
import type { SessionSummaryRow } from "../projections/index.ts";
import { handshakeErrorBody } from "../protocol/index.ts";
import { audioOf, reportOf, responseSamples, timelineOf } from "../replay/index.ts";
import { bdiMarkup, sendPage } from "./page-security.ts";
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

/** Bytes of a live tail's output a reader may leave unread before it is cut off (`GET /v1/sessions/:id/events`). */
export const MAX_TAIL_BUFFER_BYTES = 8 * 1024 * 1024;

/** Entries of a tail's stored part read at a time. */
const TAIL_PAGE_ENTRIES = 500;

/** ms a tail's reader may take to read what was written before it is cut off. */
const TAIL_DRAIN_MS = 30_000;

/** The largest revision a client may name: what every store's revision column holds (PostgreSQL's int4). */
const MAX_REVISION = 2_147_483_647;

/** `text` as a revision (decimal digits, 0 to MAX_REVISION), or null. */
const revisionOf = (text: string): number | null =>
  /^\d{1,10}$/.test(text) && Number(text) <= MAX_REVISION ? Number(text) : null;

/** Resolves true once `out` drains, false when it closes or `timeoutMs` pass first; no listener is left behind. */
const drained = (out: Writable, timeoutMs: number): Promise<boolean> =>
  new Promise<boolean>((resolve) => {
    const done = (value: boolean) => () => {
      clearTimeout(timer);
      out.off("drain", onDrain);
      out.off("close", onClose);
      resolve(value);
    };
    const onDrain = done(true);
    const onClose = done(false);
    const timer = setTimeout(done(false), timeoutMs);
    out.once("drain", onDrain);
    out.once("close", onClose);
  });

/** One row of `GET /v1/sessions`. */
export interface SessionSummary {
  readonly id: string;
  readonly object: "duplex.session";
  readonly opened_at: string;
  readonly duration_s: number;
  readonly state: string;
  /** Held by this server's engine now (attached or detached), not only recorded. */
  readonly live: boolean;
  readonly model: string | null;
  readonly responses: number;
  readonly revision: number;
  readonly error_codes: readonly string[];
}

/** A page of `GET /v1/sessions`. */
export interface SessionPage {
  readonly object: "list";
  readonly data: readonly SessionSummary[];
  readonly has_more: boolean;
  readonly next_cursor: string | null;
}

/** Text a store can compare: no NUL (PostgreSQL's text refuses it) and no lone surrogate; at most 200 characters. */
const isStoreText = (value: string): boolean => !value.includes("\u0000") && !/\p{Cs}/u.test(value);
const storeText = z.string().max(200).refine(isStoreText, "expected text without NUL or lone surrogates");

const listQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  after: z.string().optional(),
  state: z.enum(["open", "detached", "closed", "expired", "failed", "unused", "disconnected"]).optional(),
  since: z.iso.datetime({ offset: true }).optional(),
  until: z.iso.datetime({ offset: true }).optional(),
  model: storeText.optional(),
  error: storeText.optional(),
  order: z.enum(["asc", "desc"]).default("asc"),
});

/** The cursor of a page: where the session after which the next page starts opened, and its stream. */
const cursorOf = (firstAt: number, stream: string): string =>
  Buffer.from(JSON.stringify([firstAt, stream])).toString("base64url");

const readCursor = (cursor: string): [number, string] | null => {
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString()) as unknown;
    return Array.isArray(value) &&
      value.length === 2 &&
      Number.isFinite(value[0]) &&
      typeof value[1] === "string" &&
      value[1].startsWith(STREAM_PREFIX) &&
      isStoreText(value[1])
      ? [value[0], value[1]]
      : null;
  } catch {
    return null;
  }
};

/** A row of the list from the store's summary of the session (src/projections/session-summary.ts). */
const summaryOf = (row: SessionSummaryRow, live: boolean): SessionSummary => ({
  id: row.id,
  object: "duplex.session",
  opened_at: row.opened_at,
  duration_s: row.duration_s,
  state: row.state,
  live,
  model: row.model,
  responses: row.responses,
  revision: row.revision,
  error_codes: row.error_codes,
});

const notFound = (reply: FastifyReply, id: string) =>
  reply.code(404).send(handshakeErrorBody("unknown_session", `no session ${id} on this server`));

const badRequest = (reply: FastifyReply, message: string) =>
  reply.code(400).send(handshakeErrorBody("bad_event", message));

/** The routes of the session API, as [method, path, handler] for app.ts to register. */
export const sessionsApi = (options: SessionsApiOptions) => {
  const { engine, store } = options;
  const heartbeatMs = options.heartbeatMs ?? 15_000;

  const isLive = (id: string): boolean => {
    const host = engine.get(id);
    return host !== undefined && !host.isClosed;
  };

  /** A page of `GET /v1/sessions` for `query`, or the message of a 400. */
  const listSessions = async (query: unknown): Promise<SessionPage | { readonly error: string }> => {
    const parsed = listQuery.safeParse(query);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return { error: `${issue?.path.join(".")}: ${issue?.message}` };
    }
    const q = parsed.data;
    const after = q.after === undefined ? null : readCursor(q.after);
    if (q.after !== undefined && after === null) return { error: "after: not a cursor this server gave" };
    // Filtered, ordered and cut by the store over its summary rows (no log is read): `has_more` says that a next
    // row passes the same filters.
    const page = await store.listSummaries({
      prefix: STREAM_PREFIX,
      ...(q.state === undefined ? {} : { state: q.state }),
      ...(q.model === undefined ? {} : { model: q.model }),
      ...(q.error === undefined ? {} : { error: q.error }),
      ...(q.since === undefined ? {} : { since: Date.parse(q.since) }),
      ...(q.until === undefined ? {} : { until: Date.parse(q.until) }),
      order: q.order,
      ...(after === null ? {} : { after: { firstAt: after[0], stream: after[1] } }),
      limit: q.limit,
    });
    const last = page.summaries.at(-1);
    return {
      object: "list",
      data: page.summaries.map((s) => summaryOf(s.summary, isLive(s.summary.id))),
      has_more: page.hasMore,
      next_cursor: page.hasMore && last !== undefined ? cursorOf(last.firstAt, last.stream) : null,
    };
  };

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

  const events = async (
    request: FastifyRequest<{ Params: { id: string }; Querystring: { from?: string } }>,
    reply: FastifyReply,
  ) => {
    const { id } = request.params;
    const stream = streamOf(id);
    const lastEventId = request.headers["last-event-id"];
    const resumeAfter = typeof lastEventId === "string" ? revisionOf(lastEventId) : null;
    if (typeof lastEventId === "string" && resumeAfter === null)
      return badRequest(reply, `Last-Event-ID: a revision (0 to ${MAX_REVISION})`);
    const fromQuery = request.query.from;
    const fromValue = fromQuery === undefined ? null : revisionOf(fromQuery);
    if (fromQuery !== undefined && fromValue === null)
      return badRequest(reply, `from: a revision (0 to ${MAX_REVISION})`);
    const from = resumeAfter !== null ? resumeAfter + 1 : (fromValue ?? 0);
    // The entry before `from` says whether the client already has the session's end; none at all: no session.
    const before = await store.read(stream, Math.max(0, from - 1), 1);
    if (before.length === 0) {
      if ((await store.read(stream, 0, 1)).length === 0) return notFound(reply, id);
      return badRequest(reply, `from ${from}: past the end of session ${id}'s log`);
    }
    let closed = from > 0 && before[0]?.type === "SessionClosed";

    reply.hijack();
    const out = reply.raw;
    out.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-accel-buffering": "no",
      "x-content-type-options": "nosniff",
    });
    const line = (entry: RecordedEntry): string =>
      `event: entry\nid: ${entry.revision}\ndata: ${renderEntryLine(entry)}\n\n`;
    // A live reader that stops reading is cut off once this much waits for it.
    const send = (entry: RecordedEntry): void => {
      out.write(line(entry));
      if (out.writableLength > MAX_TAIL_BUFFER_BYTES) out.destroy();
    };
    // The stored part a page at a time, at the reader's pace: a reader that takes nothing for TAIL_DRAIN_MS is cut
    // off, so a tail never holds more than a page and the socket's buffer.
    let next = from;
    for (;;) {
      const page = await store.read(stream, next, TAIL_PAGE_ENTRIES);
      for (const entry of page) {
        if (out.destroyed) return reply;
        next = entry.revision + 1;
        if (entry.type === "SessionClosed") closed = true;
        if (!out.write(line(entry)) && !(await drained(out, TAIL_DRAIN_MS))) {
          out.destroy();
          return reply;
        }
      }
      if (page.length < TAIL_PAGE_ENTRIES) break;
    }
    if (closed) {
      // A finished session: its log, then the end.
      out.end();
      return reply;
    }
    // A session not ended is followed to its end wherever it runs: on this node, or on another node of the cluster
    // whose appends the store delivers.
    out.write(`event: caught_up\nid: ${next - 1}\ndata: ${JSON.stringify({ revision: next - 1 })}\n\n`);
    let subscription: Subscription | null = null;
    const heartbeat = setInterval(() => out.write(": heartbeat\n\n"), heartbeatMs);
    const end = (): void => {
      clearInterval(heartbeat);
      subscription?.unsubscribe();
      if (!out.writableEnded) out.end();
    };
    // From the revision after the last one sent: the store replays what was appended since the read, then goes
    // live, so nothing is missed and nothing is sent twice.
    subscription = store.subscribe(stream, next).subscribe({
      next: (entry) => {
        if (entry.revision < next) return;
        next = entry.revision + 1;
        send(entry);
        if (entry.type === "SessionClosed") end();
      },
      error: end,
      complete: end,
    });
    out.once("close", end);
    return reply;
  };

  /** `input.wav` and `responses/:response_id.wav`: a session's audio from its log, as WAV (PCM16 mono). */
  const wav = (reply: FastifyReply, name: string, samples: Int16Array, rateHz: number) =>
    reply
      .header("content-type", "audio/wav")
      .header("content-disposition", `inline; filename="${name}"`)
      .send(Buffer.from(encodeWav(samples, rateHz)));

  const inputWav = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const { id } = request.params;
    const entries = await store.read(streamOf(id));
    if (entries.length === 0) return notFound(reply, id);
    const { input } = audioOf(entries);
    return wav(reply, `${id}-input.wav`, pcm16FromBytes(input.pcm16), input.rateHz);
  };

  const responseWav = async (
    request: FastifyRequest<{ Params: { id: string; file: string } }>,
    reply: FastifyReply,
  ) => {
    const { id, file } = request.params;
    const entries = await store.read(streamOf(id));
    if (entries.length === 0) return notFound(reply, id);
    const responseId = file.replace(/\.wav$/, "");
    const response = audioOf(entries).responses.get(responseId);
    if (response === undefined || !file.endsWith(".wav"))
      return reply
        .code(404)
        .send(handshakeErrorBody("response_not_found", `no audio of a response ${responseId} in session ${id}`));
    const samples = responseSamples(response);
    if (!(samples instanceof Int16Array))
      return badRequest(reply, `the response's audio does not decode: ${samples.message}`);
    return wav(reply, `${responseId}.wav`, samples, response.rateHz);
  };

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

  /**
   * `/sessions`: a page of `GET /v1/sessions` (the same query: `state`, `since`, `until`, `model`, `error`, `limit`,
   * `after`; newest first unless `order=asc`), each row a link to its timeline, and a link to the next page.
   */
  const pages = async (request: FastifyRequest<{ Querystring: Record<string, string> }>, reply: FastifyReply) => {
    const query = { order: "desc", ...request.query };
    const page = await listSessions(query);
    if ("error" in page) return badRequest(reply, page.error);
    const rows = page.data
      .map((s) => {
        const cells = [
          `<a href="/sessions/${encodeURIComponent(s.id)}">${bdiMarkup(s.id)}</a>`,
          escapeMarkup(s.opened_at),
          `${s.duration_s.toFixed(1)} s`,
          bdiMarkup(s.state) + (s.live ? " (live)" : ""),
          String(s.responses),
          s.error_codes.map(bdiMarkup).join(", "),
        ];
        return `<tr>${cells.map((c) => `<td>${c}</td>`).join("")}</tr>`;
      })
      .join("\n");
    const next =
      page.next_cursor === null
        ? ""
        : `<p><a id="next" href="/sessions?${escapeMarkup(new URLSearchParams({ ...query, after: page.next_cursor }).toString())}">next page</a></p>`;
    return sendPage(
      reply,
      (nonce) =>
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>duplex sessions</title><link rel="icon" href="data:,"><style nonce="${nonce}">body{font:14px system-ui,sans-serif;margin:16px 20px}td,th{padding:2px 10px;text-align:left}</style></head><body><h1>sessions</h1><table id="sessions"><tr><th>session</th><th>opened</th><th>duration</th><th>state</th><th>responses</th><th>errors</th></tr>${rows}</table>${next}</body></html>`,
    );
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

export { foldsWholeLogs, WHOLE_LOG_QUEUE } from "./whole-log-reads.ts";
