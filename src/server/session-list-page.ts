import type { FastifyReply, FastifyRequest } from "fastify";
import { escapeMarkup } from "../infra/escape-markup.ts";
import { bdiMarkup, sendPage } from "./page-security.ts";
import type { sessionList } from "./session-list.ts";
import { badRequest } from "./session-replies.ts";

/**
 * `/sessions`: a page of `GET /v1/sessions` (the same query: `state`, `since`, `until`, `model`, `error`, `limit`,
 * `after`; newest first unless `order=asc`), each row a link to its timeline, and a link to the next page.
 */
export const sessionListPage =
  (listSessions: ReturnType<typeof sessionList>) =>
  async (request: FastifyRequest<{ Querystring: Record<string, string> }>, reply: FastifyReply) => {
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
