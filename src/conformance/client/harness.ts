import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import { type RecordedEntry, streamOf } from "../../engine/index.ts";
import { handshakeError, resyncRequired, sessionReplaced } from "../../protocol/index.ts";
import type { ClientCase } from "./cases.ts";
import { type Grade, gradeCase, type PeerAction } from "./graders.ts";

/**
 * The peer of client conformance (issue 23): our server with the client peer's model (conformance/client-peer.yaml),
 * behind a WebSocket relay on the public port that plays each connection's case: it forwards every frame, and does to
 * the connection what the case's actions say (inject an unknown event, add an unknown field, drop it, close it with a
 * code) when the server event that triggers them goes out. Each connection gets the next case, or the one its URL
 * names (`?case=ID`, or a path under `/case/ID/`); a connection whose first client event is `session.resume` belongs
 * to that session's case.
 * Grading reads each case's session from the server's log once the client is done.
 */
export interface CaseRun {
  readonly case: ClientCase;
  sessionId: string | null;
  readonly actions: PeerAction[];
  /** Counts of the server events sent so far, by type (the actions' `nth`). */
  readonly sent: Map<string, number>;
  readonly done: Set<number>;
  connections: number;
  ended: boolean;
  /** The revision (0-based) from which the session's log is read next, to see it end. */
  readFrom: number;
}

export interface CaseResult {
  readonly id: string;
  readonly rule: string;
  readonly profile: ClientCase["profile"];
  readonly required: ClientCase["required"];
  readonly session_id: string | null;
  readonly grade: Grade;
  /** The peer's actions and the session's log, for re-grading offline (`duplex conform --grade`). */
  readonly actions: readonly PeerAction[];
}

export interface ClientHarness {
  /** `ws://HOST:PORT/v1/realtime`: where the client under test connects. */
  readonly url: string;
  /** Resolves once every case has a session that ended. */
  readonly allEnded: Promise<void>;
  /** Grades every case (one never run is harness-broken), stops the peer, and returns the results in case order. */
  finish(): Promise<{ results: CaseResult[]; logs: Map<string, RecordedEntry[]> }>;
}

export interface ClientHarnessOptions {
  readonly cases: readonly ClientCase[];
  readonly host: string;
  /** The public port (0: any free one). */
  readonly port: number;
  /** The client peer's script (conformance/client-peer.yaml). */
  readonly script: string;
  /** Profiles the client declared it does not do. */
  readonly unsupported: readonly string[];
  /** The sessions' disconnect grace, s (default 20: above the resume bound of 15 s). */
  readonly graceS?: number;
  /**
   * The sessions' idle timeout, s (`idle_ttl_s`; default 40: above the 30 s heartbeat interval the reference's
   * client uses). The `lease.idle` case asks the app to stay silent for longer.
   */
  readonly idleTtlS?: number;
  /** Progress lines: a case started or ended, a connection refused. */
  readonly log?: (line: string) => void;
}

/**
 * The case a connection names, and the URL it goes to upstream without it: `?case=ID`, or a path that starts with
 * `/case/ID/` (for clients that build the URL themselves from a base URL, as OpenAI's SDK does).
 */
const forwardedQuery = (request: IncomingMessage): { path: string; caseId: string | null } | null => {
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

/**
 * A case stopped before its session ended (Ctrl-C mid-case) cannot say the client failed: what it failed to do may
 * still have been coming. Such a `fail` is reported harness-broken.
 */
const stoppedEarly = (grade: Grade, entries: readonly RecordedEntry[]): Grade =>
  grade.verdict === "fail" && !entries.some((e) => e.type === "SessionClosed")
    ? {
        ...grade,
        verdict: "harness-broken",
        message: `the case was stopped before its session ended (${grade.message})`,
        reason: "the case was stopped before its session ended",
      }
    : grade;

/** The beta names of the server events cases trigger on, to their GA names. */
const BETA_TO_GA: Record<string, string> = {
  "response.audio.delta": "response.output_audio.delta",
  "response.audio.done": "response.output_audio.done",
  "response.audio_transcript.delta": "response.output_audio_transcript.delta",
  "response.audio_transcript.done": "response.output_audio_transcript.done",
  "response.text.delta": "response.output_text.delta",
  "response.text.done": "response.output_text.done",
};

/** The GA names of those events, to their beta names. */
const GA_TO_BETA: Record<string, string> = Object.fromEntries(Object.entries(BETA_TO_GA).map(([b, g]) => [g, b]));

/** Starts the peer. @throws Error when a port cannot be bound or the server cannot start. */
export const startClientHarness = async (o: ClientHarnessOptions): Promise<ClientHarness> => {
  const { parseConfig } = await import("../../infra/config.ts");
  const { startServer } = await import("../../server/index.ts");
  const dir = await mkdtemp(join(tmpdir(), "duplex-conform-client-"));
  const server = await startServer(
    parseConfig({
      log_level: "warn",
      listen: { host: "127.0.0.1", port: 0 },
      event_store: { kind: "sqlite", path: join(dir, "duplex.sqlite") },
      runner: { kind: "scripted", script: o.script },
      // A client that does not resume lets its session expire: `graceS` after a drop (the resume bound is 15 s).
      duplex_session: { max_sessions: 64, disconnect_grace_s: o.graceS ?? 20, idle_ttl_s: o.idleTtlS ?? 40 },
    }),
  );
  const upstreamBase = server.url.replace(/\/v1\/realtime$/, "");
  const runs: CaseRun[] = [];
  const bySession = new Map<string, CaseRun>();
  let next = 0;
  let endedAll: () => void = () => undefined;
  const allEnded = new Promise<void>((resolve) => {
    endedAll = resolve;
  });
  const checkEnded = (): void => {
    if (o.cases.every((c) => runs.some((r) => r.case.id === c.id && r.ended))) endedAll();
  };
  const newRun = (caseId: string | null): CaseRun | null => {
    const chosen =
      caseId === null ? o.cases[next++ % Math.max(1, o.cases.length)] : o.cases.find((c) => c.id === caseId);
    if (chosen === undefined) return null;
    const run: CaseRun = {
      case: chosen,
      sessionId: null,
      actions: [],
      sent: new Map(),
      done: new Set(),
      connections: 0,
      ended: false,
      readFrom: 0,
    };
    runs.push(run);
    o.log?.(`case ${chosen.id} started\n`);
    return run;
  };

  // A case ends when its session's log does (closed, expired: however the client left), read every second. One look
  // at a time: a look that outlasts the second (a loaded machine) is not overlapped by the next, which would read
  // from the same revision and skip the end.
  let looking = false;
  const watch = setInterval(() => {
    if (looking) return;
    looking = true;
    void (async () => {
      for (const run of runs) {
        if (run.ended || run.sessionId === null) continue;
        // Only the entries since the last look: the whole log is not read again every second.
        const fresh = await server.store.read(streamOf(run.sessionId), run.readFrom);
        const last = fresh.at(-1);
        if (last === undefined) continue;
        run.readFrom = last.revision + 1;
        if (fresh.some((e) => e.type === "SessionClosed")) {
          run.ended = true;
          o.log?.(`case ${run.case.id} ended (session ${run.sessionId})\n`);
        }
      }
      checkEnded();
    })()
      .catch(() => undefined)
      .finally(() => {
        looking = false;
      });
  }, 1000);
  watch.unref();

  const http = createServer((_request, response) => {
    response
      .writeHead(426, { "content-type": "text/plain" })
      .end("the client conformance peer speaks WebSocket only\n");
  });
  const wss = new WebSocketServer({
    server: http,
    // The client's subprotocols (an SDK's "realtime", its key): the first one is answered, and all go upstream.
    handleProtocols: (protocols) => protocols.values().next().value ?? false,
  });
  wss.on("connection", (client, request) => {
    const query = forwardedQuery(request);
    if (query === null) {
      client.close(1008, "the URL does not parse");
      return;
    }
    const { path, caseId } = query;
    if (caseId !== null && !o.cases.some((c) => c.id === caseId)) {
      o.log?.(`refused a connection: no case ${caseId} (the cases: ${o.cases.map((c) => c.id).join(", ")})\n`);
      client.close(1008, `no case ${caseId}`.slice(0, 120));
      return;
    }
    const protocols = String(request.headers["sec-websocket-protocol"] ?? "")
      .split(",")
      .map((p) => p.trim())
      .filter((p) => p !== "");
    // The headers that choose the dialect (OpenAI-Beta: realtime=v1 asks for the beta spellings) go upstream too.
    const headers: Record<string, string> = {};
    for (const name of ["openai-beta", "authorization", "user-agent"]) {
      const value = request.headers[name];
      if (typeof value === "string") headers[name] = value;
    }
    const upstream = new WebSocket(`${upstreamBase}${path}`, protocols, { headers });
    const waiting: [RawData, boolean][] = [];
    let run: CaseRun | null = null;
    let bound = false;
    let lastSessionId: string | null = null;
    const bind = (first: string | null): void => {
      if (bound) return;
      bound = true;
      const resume = first === null ? null : /"type"\s*:\s*"session\.resume"/.test(first) ? first : null;
      if (resume !== null) {
        const id = /"session_id"\s*:\s*"([^"]+)"/.exec(resume)?.[1];
        run = (id === undefined ? undefined : bySession.get(id)) ?? null;
      }
      // A client that reconnects with a new session instead of resuming (LiveKit's plugin does) comes back to the
      // same case: the case's run notes it, and the new session goes through untouched (the case's actions are done).
      const cut = caseId === null ? undefined : runs.findLast((r) => r.case.id === caseId && !r.ended);
      if (
        run === null &&
        cut !== undefined &&
        cut.sessionId !== null &&
        cut.actions.some((a) => a.do === "drop" || a.do === "close" || a.do === "replace")
      ) {
        cut.actions.push({ do: "new_session", on: "connection", at: Date.now() });
        return;
      }
      if (run === null) {
        run = newRun(caseId);
        if (run !== null && lastSessionId !== null) {
          run.sessionId = lastSessionId;
          bySession.set(lastSessionId, run);
        }
      }
      if (run !== null) run.connections += 1;
    };
    client.on("message", (data, isBinary) => {
      const text = isBinary ? null : data.toString();
      bind(text);
      // A case that refuses resumes, or whose session another connection took over, answers each session.resume
      // itself: the first as the case says, the later ones as the server does an expired session's.
      const current = run as CaseRun | null;
      const refusal = current?.case.actions.find((a) => a.do === "refuse_resume");
      const ended = current?.actions.some((a) => a.do === "refuse_resume" || a.do === "replace") === true;
      if (
        current !== null &&
        (refusal !== undefined || ended) &&
        text !== null &&
        /"type"\s*:\s*"session\.resume"/.test(text.slice(0, 300))
      ) {
        const eventId = /"event_id"\s*:\s*"([^"]+)"/.exec(text)?.[1] ?? null;
        current.actions.push({ do: ended ? "resume_retry" : "refuse_resume", on: "session.resume", at: Date.now() });
        if (!ended && refusal?.answer === "resync_required")
          client.send(resyncRequired(current.sessionId ?? "", "journal_gap"));
        else
          client.send(
            handshakeError("session_resume_expired", "unknown or expired session (conformance: refused)", eventId),
          );
        return;
      }
      if (upstream.readyState === WebSocket.OPEN) upstream.send(data, { binary: isBinary });
      else waiting.push([data, isBinary]);
    });
    upstream.on("open", () => {
      for (const [data, isBinary] of waiting.splice(0)) upstream.send(data, { binary: isBinary });
    });
    upstream.on("message", (data) => {
      const text = data.toString();
      const spelled = /"type"\s*:\s*"([^"]+)"/.exec(text)?.[1] ?? "";
      // Cases name the GA spellings; a beta client (OpenAI-Beta: realtime=v1) gets the beta ones.
      const type = BETA_TO_GA[spelled] ?? spelled;
      if (type === "session.created") {
        lastSessionId = /"id"\s*:\s*"(sess_[^"]+)"/.exec(text)?.[1] ?? lastSessionId;
        if (run !== null && run.sessionId === null && lastSessionId !== null) {
          run.sessionId = lastSessionId;
          bySession.set(lastSessionId, run);
        }
      }
      const current = run as CaseRun | null;
      if (current === null) {
        if (client.readyState === WebSocket.OPEN) client.send(text);
        return;
      }

      const count = (current.sent.get(type) ?? 0) + 1;
      current.sent.set(type, count);
      let out: string | null = text;
      for (const [i, action] of current.case.actions.entries()) {
        if (current.done.has(i) || action.on !== type || action.nth !== count) continue;
        current.done.add(i);
        current.actions.push({ do: action.do, on: type, at: Date.now() });
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
            client.send(sessionReplaced(current.sessionId ?? "", 2));
            client.close(1000, "session replaced");
          } else client.close(action.code, action.reason);
        }
      }
      if (out !== null && client.readyState === WebSocket.OPEN) client.send(out);
    });
    const closeBoth = (): void => {
      if (upstream.readyState === WebSocket.OPEN || upstream.readyState === WebSocket.CONNECTING) upstream.terminate();
      if (client.readyState === WebSocket.OPEN) client.close(1000);
    };
    // A close frame the client sends goes upstream with its code (1000 ends the session, as with the server).
    client.on("close", (code) => {
      if (upstream.readyState === WebSocket.OPEN)
        upstream.close(code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1001);
      else upstream.terminate();
    });
    upstream.on("close", (code, reason) => {
      if (client.readyState === WebSocket.OPEN) client.close(code === 1005 || code === 1006 ? 1011 : code, reason);
    });
    upstream.on("error", closeBoth);
    client.on("error", closeBoth);
  });
  try {
    await new Promise<void>((resolve, reject) => {
      http.once("error", reject);
      http.listen(o.port, o.host, () => resolve());
    });
  } catch (error) {
    clearInterval(watch);
    await server.close();
    await rm(dir, { recursive: true, force: true });
    const code = (error as { code?: string }).code;
    throw new Error(
      code === "EADDRINUSE"
        ? `port ${o.port} on ${o.host} is in use: pick another with --port`
        : (error as Error).message,
    );
  }
  const address = http.address();
  const port = typeof address === "object" && address !== null ? address.port : o.port;

  return {
    url: `ws://${o.host}:${port}/v1/realtime`,
    allEnded,
    async finish() {
      clearInterval(watch);
      for (const c of wss.clients) c.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await new Promise<void>((resolve) => http.close(() => resolve()));
      const logs = new Map<string, RecordedEntry[]>();
      const results: CaseResult[] = [];
      for (const c of o.cases) {
        // The case's last run with a session (a client may have tried it more than once).
        const run = runs.filter((r) => r.case.id === c.id && r.sessionId !== null).at(-1) ?? null;
        const entries = run?.sessionId == null ? [] : await server.store.read(streamOf(run.sessionId));
        if (run?.sessionId != null) logs.set(run.sessionId, entries);
        const grade: Grade =
          run === null
            ? {
                verdict: "harness-broken",
                message: "no connection of the client ran this case",
                reason: "no connection of the client ran this case",
                evidence: [],
                exercised: [],
              }
            : stoppedEarly(gradeCase(c, { entries, actions: run.actions, unsupported: o.unsupported }), entries);
        results.push({
          id: c.id,
          rule: c.rule,
          profile: c.profile,
          required: c.required,
          session_id: run?.sessionId ?? null,
          grade,
          actions: run?.actions ?? [],
        });
      }
      await server.close();
      await rm(dir, { recursive: true, force: true });
      return { results, logs };
    },
  };
};
