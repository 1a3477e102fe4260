import type { Writable } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Subscription } from "rxjs";
import { type EventStore, type RecordedEntry, streamOf } from "../engine/index.ts";
import { renderEntryLine } from "../infra/event-store/index.ts";
import { badRequest, notFound } from "./session-replies.ts";

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

/**
 * `GET /v1/sessions/:id/events` (see sessions-api.ts): the log as Server-Sent Events from `from` (or after
 * `Last-Event-ID`), the stored part a page at a time at the reader's pace, then followed live through the store's
 * subscription (wherever the session runs) until its `SessionClosed`; `: heartbeat` every `heartbeatMs`.
 */
export const sessionTail = (store: EventStore, heartbeatMs: number) => {
  return async (
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
};
