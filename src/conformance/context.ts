import type { ServerEvent } from "../client/index.ts";
import { type Connection, openSocket, SOCKET_CLOSED, type Waiter } from "./connection.ts";

/** A session a scenario opened, tracked so that the runner can close it afterwards (even when detached). */
export interface TrackedSession {
  readonly id: string;
  token: string | null;
  /** The connection it is attached to, or null when its socket dropped. */
  attachedTo: string | null;
  ended: boolean;
  lastSeq: number;
}

/** Everything one scenario run holds: its connections, variables, tracked sessions and what it covered. */
export interface ScenarioContext {
  readonly url: string;
  readonly audioDir: string;
  readonly headers: Record<string, string>;
  readonly vars: Map<string, unknown>;
  readonly connections: Map<string, Connection>;
  readonly sessions: Map<string, TrackedSession>;
  readonly waiter: Waiter;
  readonly startedAt: number;
  /** Server event types observed and client event types sent (while `recording`). */
  readonly observedTypes: Set<string>;
  readonly sentTypes: Set<string>;
  recording: boolean;
  /** Set when the scenario timed out: steps stop at their next wait. */
  aborted: boolean;
}

const str = (value: unknown): string | null => (typeof value === "string" && value !== "" ? value : null);

/** Updates the tracked sessions from one event received on `conn` (session.created, resumed, closed, ...). */
const track = (ctx: ScenarioContext, conn: string, event: ServerEvent): void => {
  const attached = [...ctx.sessions.values()].find((s) => s.attachedTo === conn && !s.ended);
  switch (event.type) {
    case "session.created": {
      const id = str((event.session as { id?: unknown } | undefined)?.id);
      if (id !== null)
        ctx.sessions.set(id, { id, token: str(event.resume_token), attachedTo: conn, ended: false, lastSeq: 0 });
      return;
    }
    case "session.resumed": {
      const id = str(event.session_id);
      const session = id === null ? undefined : ctx.sessions.get(id);
      if (session !== undefined) {
        session.token = str(event.resume_token) ?? session.token;
        session.attachedTo = conn;
      }
      return;
    }
    case "session.closed":
    case "session.expired":
      if (attached !== undefined) attached.ended = true;
      return;
    case "session.replaced":
    case SOCKET_CLOSED:
      if (attached !== undefined) attached.attachedTo = null;
      return;
    default:
      if (attached !== undefined && typeof event.server_event_seq === "number")
        attached.lastSeq = Math.max(attached.lastSeq, event.server_event_seq);
  }
};

/**
 * The connection named `name`, created (not opened) when new.
 */
export const connectionOf = (ctx: ScenarioContext, name: string): Connection => {
  let conn = ctx.connections.get(name);
  if (conn === undefined) {
    conn = { name, client: null, events: [], cursor: 0, maxSeq: 0, open: false };
    ctx.connections.set(name, conn);
  }
  return conn;
};

/**
 * Opens the socket of a connection at the scenario's URL plus `query`, recording the types it receives for
 * coverage and tracking its sessions.
 * @throws the socket's error when the connection fails.
 */
export const connect = async (ctx: ScenarioContext, conn: Connection, query: string | null): Promise<void> => {
  await openSocket(conn, `${ctx.url}${query ?? ""}`, ctx.startedAt, ctx.waiter, ctx.headers);
  const client = conn.client;
  const observe = (event: ServerEvent) => {
    if (ctx.recording) ctx.observedTypes.add(event.type);
    track(ctx, conn.name, event);
  };
  // What arrived with the connection (session.created, from a server that opens the session on connect).
  for (const r of client?.received ?? []) observe(r.event);
  client?.onEvent(observe);
  void client?.closed.then(() => track(ctx, conn.name, { type: SOCKET_CLOSED }));
};

/** Sleeps `ms`, or less when the scenario is aborted. */
export const pause = async (ctx: ScenarioContext, ms: number): Promise<void> => {
  await ctx.waiter.until(() => (ctx.aborted ? true : undefined), ms);
};
