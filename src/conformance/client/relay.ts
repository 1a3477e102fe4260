import type { IncomingMessage } from "node:http";
import { type RawData, WebSocket } from "ws";
import { answerResume, BETA_TO_GA, playActions } from "./case-actions.ts";
import type { CaseRun, CaseRuns } from "./case-runs.ts";
import type { ClientCase } from "./cases.ts";

/**
 * One connection through the client conformance peer: the client's socket, relayed frame for frame to a socket of
 * our server (the same path and query without the case, the same subprotocols, the headers that choose the dialect),
 * bound to its case's run on the client's first frame (a `session.resume` belongs to its session's run), with the
 * case's actions played on the server events going out (case-actions.ts). Each socket event is a named handler.
 */

/** What every connection of one peer shares. */
export interface RelayContext {
  readonly cases: readonly ClientCase[];
  /** `ws://HOST:PORT` of our server. */
  readonly upstreamBase: string;
  readonly runs: CaseRuns;
  /** Progress lines: a connection refused. */
  readonly log?: (line: string) => void;
}

/** One relayed connection's state. */
interface Link {
  readonly ctx: RelayContext;
  readonly client: WebSocket;
  readonly upstream: WebSocket;
  /** The case the URL named, or null (the next case in turn). */
  readonly caseId: string | null;
  /** Client frames that came before the upstream socket opened. */
  readonly waiting: [RawData, boolean][];
  run: CaseRun | null;
  bound: boolean;
  /** The session id of the last `session.created` on this connection. */
  lastSessionId: string | null;
}

/**
 * The case a connection names, and the URL it goes to upstream without it: `?case=ID`, or a path that starts with
 * `/case/ID/` (for clients that build the URL themselves from a base URL, as OpenAI's SDK does).
 */
export const forwardedQuery = (request: IncomingMessage): { path: string; caseId: string | null } | null => {
  try {
    const url = new URL(`http://localhost${(request.url ?? "/").replace(/^\/+/, "/")}`);
    let caseId = url.searchParams.get("case");
    url.searchParams.delete("case");
    const prefixed = /^\/case\/([^/]+)(\/.*)$/.exec(url.pathname);
    if (prefixed !== null) {
      caseId = decodeURIComponent(prefixed[1] ?? "");
      url.pathname = prefixed[2] ?? "/";
    }
    return { path: `${url.pathname}${url.search}`, caseId };
  } catch {
    // A URL that does not parse (a bad %-escape): refused, the peer goes on.
    return null;
  }
};

/** The client's subprotocols (an SDK's "realtime", its key), in order: all go upstream. */
const protocolsOf = (request: IncomingMessage): string[] =>
  String(request.headers["sec-websocket-protocol"] ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "");

/** The headers that go upstream: those that choose the dialect (OpenAI-Beta: realtime=v1 asks for the beta spellings). */
const upstreamHeadersOf = (request: IncomingMessage): Record<string, string> => {
  const headers: Record<string, string> = {};
  for (const name of ["openai-beta", "authorization", "user-agent"]) {
    const value = request.headers[name];
    if (typeof value === "string") headers[name] = value;
  }
  return headers;
};

/**
 * Binds the connection to a run on its first frame (`first`: its text, null for a binary one): a `session.resume`
 * to its session's run; a client that reconnects with a new session instead of resuming (LiveKit's plugin does) to
 * the case it named, noted as `new_session` (its frames then go through untouched); else a new run.
 */
const bind = (link: Link, first: string | null): void => {
  if (link.bound) return;
  link.bound = true;
  const { runs } = link.ctx;
  const resume = first === null ? null : /"type"\s*:\s*"session\.resume"/.test(first) ? first : null;
  if (resume !== null) {
    const id = /"session_id"\s*:\s*"([^"]+)"/.exec(resume)?.[1];
    link.run = (id === undefined ? undefined : runs.bySession.get(id)) ?? null;
  }
  // A client that reconnects with a new session instead of resuming comes back to the same case: the case's run
  // notes it, and the new session goes through untouched (the case's actions are done).
  const cut = link.caseId === null ? undefined : runs.runs.findLast((r) => r.case.id === link.caseId && !r.ended);
  if (
    link.run === null &&
    cut !== undefined &&
    cut.sessionId !== null &&
    cut.actions.some((a) => a.do === "drop" || a.do === "close" || a.do === "replace")
  ) {
    cut.actions.push({ do: "new_session", on: "connection", at: Date.now() });
    return;
  }
  if (link.run === null) {
    link.run = runs.start(link.caseId);
    if (link.run !== null && link.lastSessionId !== null) runs.bindSession(link.run, link.lastSessionId);
  }
  if (link.run !== null) link.run.connections += 1;
};

/** A client frame: bind, let the case answer a `session.resume` itself, else forward it (or keep it until open). */
const clientOnMessage = (link: Link, data: RawData, isBinary: boolean): void => {
  const text = isBinary ? null : data.toString();
  bind(link, text);
  if (answerResume(link.run, link.client, text)) return;
  if (link.upstream.readyState === WebSocket.OPEN) link.upstream.send(data, { binary: isBinary });
  else link.waiting.push([data, isBinary]);
};

/** The upstream socket opened: the client frames that waited go out, in order. */
const upstreamOnOpen = (link: Link): void => {
  for (const [data, isBinary] of link.waiting.splice(0)) link.upstream.send(data, { binary: isBinary });
};

/** A server event: note the session of `session.created`, play the case's actions, forward what is left. */
const upstreamOnMessage = (link: Link, data: RawData): void => {
  const { client } = link;
  const text = data.toString();
  const spelled = /"type"\s*:\s*"([^"]+)"/.exec(text)?.[1] ?? "";
  // Cases name the GA spellings; a beta client (OpenAI-Beta: realtime=v1) gets the beta ones.
  const type = BETA_TO_GA[spelled] ?? spelled;
  if (type === "session.created") {
    link.lastSessionId = /"id"\s*:\s*"(sess_[^"]+)"/.exec(text)?.[1] ?? link.lastSessionId;
    if (link.run !== null && link.run.sessionId === null && link.lastSessionId !== null)
      link.ctx.runs.bindSession(link.run, link.lastSessionId);
  }
  if (link.run === null) {
    if (client.readyState === WebSocket.OPEN) client.send(text);
    return;
  }
  const out = playActions(link.run, link, { type, spelled, text });
  if (out !== null && client.readyState === WebSocket.OPEN) client.send(out);
};

/** A close frame the client sends goes upstream with its code (1000 ends the session, as with the server). */
const clientOnClose = (link: Link, code: number): void => {
  if (link.upstream.readyState === WebSocket.OPEN)
    link.upstream.close(code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1001);
  else link.upstream.terminate();
};

/** The server closed: so does the client's socket, a dropped one (1005, 1006) as 1011. */
const upstreamOnClose = (link: Link, code: number, reason: Buffer): void => {
  if (link.client.readyState === WebSocket.OPEN)
    link.client.close(code === 1005 || code === 1006 ? 1011 : code, reason);
};

/** An error on either socket ends both. */
const closeBoth = (link: Link): void => {
  const { client, upstream } = link;
  if (upstream.readyState === WebSocket.OPEN || upstream.readyState === WebSocket.CONNECTING) upstream.terminate();
  if (client.readyState === WebSocket.OPEN) client.close(1000);
};

/**
 * Relays the client's connection `client` (its upgrade `request`) to our server. A URL that does not parse, or that
 * names no case of the peer, is closed with 1008.
 */
export const relayConnection = (ctx: RelayContext, client: WebSocket, request: IncomingMessage): void => {
  const query = forwardedQuery(request);
  if (query === null) {
    client.close(1008, "the URL does not parse");
    return;
  }
  const { path, caseId } = query;
  if (caseId !== null && !ctx.cases.some((c) => c.id === caseId)) {
    ctx.log?.(`refused a connection: no case ${caseId} (the cases: ${ctx.cases.map((c) => c.id).join(", ")})\n`);
    client.close(1008, `no case ${caseId}`.slice(0, 120));
    return;
  }
  const upstream = new WebSocket(`${ctx.upstreamBase}${path}`, protocolsOf(request), {
    headers: upstreamHeadersOf(request),
  });
  const link: Link = { ctx, client, upstream, caseId, waiting: [], run: null, bound: false, lastSessionId: null };
  client.on("message", (data, isBinary) => clientOnMessage(link, data, isBinary));
  upstream.on("open", () => upstreamOnOpen(link));
  upstream.on("message", (data) => upstreamOnMessage(link, data));
  client.on("close", (code) => clientOnClose(link, code));
  upstream.on("close", (code, reason) => upstreamOnClose(link, code, reason));
  upstream.on("error", () => closeBoth(link));
  client.on("error", () => closeBoth(link));
};
