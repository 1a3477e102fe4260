import { RealtimeClient, type ServerEvent } from "../client/index.ts";
import { createWaiter } from "./connection.ts";
import type { ScenarioContext } from "./context.ts";
import { type Coverage, coverageOf } from "./coverage.ts";
import { StepFailure, type StepFailureInfo, summarize } from "./failure.ts";
import { AUDIO_DIR } from "./files.ts";
import { matches } from "./pattern.ts";
import type { Scenario, Step } from "./scenario.ts";
import { executeSteps } from "./steps.ts";

/**
 * The outcome of one scenario: `pass`; `fail`; `known_failure` (failed, and marked `known_failure` in its file);
 * `unexpected_pass` (marked `known_failure`, yet passed: the mark should go); `skipped` (the server lacks what
 * `requires` asks for).
 */
export type ScenarioStatus = "pass" | "fail" | "known_failure" | "unexpected_pass" | "skipped";

/** One scenario's result: its status, how long it took (ms) and, when it failed, where and why. */
export interface ScenarioResult {
  readonly name: string;
  readonly behaviour: string | null;
  readonly description: string;
  readonly status: ScenarioStatus;
  readonly duration_ms: number;
  /** Why it was skipped, or the known failure's reason. */
  readonly reason: string | null;
  readonly failure: StepFailureInfo | null;
}

/** What the server said of itself in the probe session: its model and session.created's session object. */
export interface ServerInfo {
  readonly model: string | null;
  readonly session: Readonly<Record<string, unknown>> | null;
  /** Why the probe failed, when it did. */
  readonly error: string | null;
}

/** A whole run: the server, every scenario's result, and the catalogue coverage. Times in ms. */
export interface RunReport {
  readonly url: string;
  readonly server: ServerInfo;
  readonly duration_ms: number;
  readonly results: readonly ScenarioResult[];
  readonly coverage: Coverage;
}

/** Options of a run. */
export interface RunOptions {
  /** The realtime endpoint, e.g. `ws://127.0.0.1:8099/v1/realtime`. */
  readonly url: string;
  /** The folder of the audio files scenarios stream (default `../shared/audio` beside the package). */
  readonly audioDir?: string;
  /** Variables that override the scenarios' defaults (e.g. `max_sessions`). */
  readonly vars?: Readonly<Record<string, unknown>>;
  /** Headers of every WebSocket upgrade, e.g. `Authorization: Bearer KEY`. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Called after each scenario (progress). */
  readonly onResult?: (result: ScenarioResult) => void;
}

/** Whether a result lets a run succeed: passed, or skipped for lack of a capability. */
export const isOk = (result: ScenarioResult): boolean => result.status === "pass" || result.status === "skipped";

const withTimeout = <T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> =>
  Promise.race([promise, new Promise<T>((res) => setTimeout(() => res(fallback), ms).unref())]);

/** Closes a client within a second, terminating it when the closing handshake does not finish. */
const closeClient = async (client: RealtimeClient): Promise<void> => {
  const closed = await withTimeout(
    client.close().then(() => true),
    1000,
    false,
  );
  if (!closed) await client.terminate().catch(() => undefined);
};

/**
 * Opens one session to learn what the server offers (session.created's session: model, capabilities), then
 * closes it. Never throws: a failure is reported in `error`.
 */
export const probeServer = async (url: string, headers: Readonly<Record<string, string>> = {}): Promise<ServerInfo> => {
  let client: RealtimeClient | null = null;
  try {
    client = await RealtimeClient.connect(url, { headers: { ...headers } });
    client.send({ type: "session.update", session: {} });
    // A server may send session.created on connect, before the session.update.
    const created = await client.waitFor((e) => e.type === "session.created" || e.type === "error", {
      since: 0,
      timeoutMs: 5000,
    });
    if (created.type !== "session.created") return { model: null, session: null, error: JSON.stringify(created) };
    const session = (created.session ?? {}) as Record<string, unknown>;
    client.send({ type: "session.close" });
    await withTimeout(client.closed, 2000, null);
    return { model: typeof session.model === "string" ? session.model : null, session, error: null };
  } catch (error) {
    return { model: null, session: null, error: (error as Error).message };
  } finally {
    if (client !== null) await closeClient(client);
  }
};

/** Why a scenario's requirements are not met by the server, or null when they are. */
const unmetRequirement = (scenario: Scenario, server: ServerInfo): string | null => {
  const { capabilities, session } = scenario.requires;
  if (capabilities === null && session === null) return null;
  if (server.session === null) return `the server's session.created could not be read (${server.error})`;
  if (capabilities !== null && !matches(capabilities, server.session.capabilities))
    return `requires capabilities ${JSON.stringify(capabilities)}`;
  if (session !== null && !matches(session, server.session)) return `requires a session ${JSON.stringify(session)}`;
  return null;
};

/**
 * Closes what a scenario left open: its sockets (after session.close), and the sessions it left detached (resumed,
 * then closed), so that the next scenario finds the server's sessions free.
 */
const cleanUp = async (ctx: ScenarioContext): Promise<void> => {
  ctx.recording = false;
  const closedOn = (e: ServerEvent) => e.type === "session.closed" || e.type === "session.expired";
  for (const conn of ctx.connections.values()) {
    const client = conn.client;
    if (client === null) continue;
    if (conn.open) {
      const attached = [...ctx.sessions.values()].some((s) => s.attachedTo === conn.name && !s.ended);
      if (attached) {
        const since = client.received.length;
        client.send({ type: "session.close" });
        await client.waitFor(closedOn, { since, timeoutMs: 2000 }).catch(() => undefined);
      }
    }
    await closeClient(client);
  }
  for (const session of ctx.sessions.values()) {
    if (session.ended || session.attachedTo !== null || session.token === null) continue;
    let client: RealtimeClient | null = null;
    try {
      client = await RealtimeClient.connect(ctx.url, { headers: ctx.headers });
      client.send({
        type: "session.resume",
        session_id: session.id,
        resume_token: session.token,
        last_received_server_event_seq: session.lastSeq,
      });
      const answer = await client.waitFor((e) => e.type === "session.resumed" || e.type === "error", {
        timeoutMs: 2000,
      });
      if (answer.type === "session.resumed") {
        client.send({ type: "session.close" });
        await client.waitFor("session.closed", { timeoutMs: 2000 });
      }
    } catch {
      // Best effort: the session may have expired meanwhile.
    } finally {
      if (client !== null) await closeClient(client);
    }
  }
};

/**
 * Runs one scenario on fresh sockets. Never throws: a failing step, a timeout or an error of the scenario itself
 * (an unknown variable, an unreadable audio file) becomes a failed result naming the step.
 */
export const runScenario = async (
  scenario: Scenario,
  server: ServerInfo,
  options: RunOptions,
  coverage: { observed: Set<string>; sent: Set<string> } = { observed: new Set(), sent: new Set() },
): Promise<ScenarioResult> => {
  const base = { name: scenario.name, behaviour: scenario.behaviour, description: scenario.description };
  const unmet = unmetRequirement(scenario, server);
  if (unmet !== null) return { ...base, status: "skipped", duration_ms: 0, reason: unmet, failure: null };
  const ctx: ScenarioContext = {
    url: options.url,
    audioDir: options.audioDir ?? AUDIO_DIR,
    headers: { ...options.headers },
    vars: new Map(Object.entries({ ...scenario.vars, ...options.vars })),
    connections: new Map(),
    sessions: new Map(),
    waiter: createWaiter(),
    startedAt: performance.now(),
    observedTypes: coverage.observed,
    sentTypes: coverage.sent,
    recording: true,
    aborted: false,
  };
  let current: Step | null = null;
  let failure: StepFailureInfo | null = null;
  const describe = (message: string, error?: StepFailure): StepFailureInfo => {
    const conn = current === null ? undefined : ctx.connections.get(String(current.conn));
    return {
      step: current?.line ?? "0",
      kind: current?.kind === "send_raw_generated" ? "send_raw" : (current?.kind ?? "scenario"),
      conn: conn?.name ?? current?.conn ?? "main",
      message,
      expected: error?.expected ?? [],
      observed: error?.observed ?? (conn === undefined ? [] : summarize(conn.events, conn.cursor)),
    };
  };
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((res) => {
    timer = setTimeout(() => res("timeout"), scenario.timeoutMs);
  });
  try {
    const outcome = await Promise.race([
      executeSteps(ctx, scenario.steps, (step) => {
        current = step;
      }).then(() => "done" as const),
      timedOut,
    ]);
    if (outcome === "timeout") {
      ctx.aborted = true;
      ctx.waiter.notify();
      failure = describe(`the scenario did not finish within ${scenario.timeoutMs} ms`);
    }
  } catch (error) {
    failure =
      error instanceof StepFailure
        ? describe(error.message, error)
        : describe(`${(error as Error).name}: ${(error as Error).message}`);
  } finally {
    clearTimeout(timer);
    await cleanUp(ctx);
  }
  const duration_ms = Math.round(performance.now() - ctx.startedAt);
  const known = scenario.knownFailure;
  if (failure === null) {
    return known === null
      ? { ...base, status: "pass", duration_ms, reason: null, failure: null }
      : { ...base, status: "unexpected_pass", duration_ms, reason: known, failure: null };
  }
  return known === null
    ? { ...base, status: "fail", duration_ms, reason: null, failure }
    : { ...base, status: "known_failure", duration_ms, reason: known, failure };
};

/**
 * Runs scenarios one after the other against `options.url`, each on fresh sockets, after a probe session that
 * learns the server's capabilities (for `requires`). Records every server event type observed and every client
 * event type sent, for the catalogue coverage.
 */
export const runScenarios = async (scenarios: readonly Scenario[], options: RunOptions): Promise<RunReport> => {
  const started = performance.now();
  const server = await probeServer(options.url, options.headers);
  const coverage = { observed: new Set<string>(), sent: new Set<string>() };
  const results: ScenarioResult[] = [];
  for (const scenario of scenarios) {
    const result = await runScenario(scenario, server, options, coverage);
    results.push(result);
    options.onResult?.(result);
  }
  return {
    url: options.url,
    server,
    duration_ms: Math.round(performance.now() - started),
    results,
    coverage: coverageOf(coverage.observed, coverage.sent),
  };
};
