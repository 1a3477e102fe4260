import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { DomainEvent } from "../domain/index.ts";
import type { Engine, SessionHost } from "../engine/index.ts";
import type { TurnSpanName } from "../projections/index.ts";

/**
 * Prometheus metrics of the server (DESIGN.md, src/server: /metrics), with prom-client, next to its default
 * process and Node.js metrics. Times in seconds, as Prometheus expects.
 */
export interface ServerMetrics {
  readonly registry: Registry;
  /** The engine's observer: group commits, decided domain events, engine-added latency, turn-ledger spans. */
  readonly observe: {
    appended(entries: number, ms: number): void;
    decided(event: DomainEvent): void;
    delivered(ms: number): void;
    turnSpan(span: TurnSpanName, ms: number): void;
    tookOver(why: "resume" | "lease_expired"): void;
    fenced(): void;
  };
  /** A resume's outcome (`resumed`, or the refusal's code), counted by outcome. */
  resumed(outcome: string): void;
  /** A renewal of this node's lease: whether it held, or failed (the store unreachable). */
  leaseRenewed(outcome: "held" | "expired" | "failed"): void;
  /** A group commit of a shared store (PostgreSQL): appends and entries it held, and its transaction's time (ms). */
  groupCommitted(appends: number, entries: number, ms: number): void;
  /** Binds the gauges that read the engine (live sessions). */
  bind(engine: Engine): void;
}

/** The engine's figures: log appends, decisions, refusals, responses, engine-added latency, turn-ledger spans. */
const engineFamilies = (registry: Registry) => {
  const appendSeconds = new Histogram({
    name: "duplex_log_append_seconds",
    help: "Time of one group commit of a session's mailbox drain to the event store.",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
    registers: [registry],
  });
  const entries = new Counter({
    name: "duplex_log_entries_total",
    help: "Log entries appended (inputs and decisions).",
    registers: [registry],
  });
  const decisions = new Counter({
    name: "duplex_decisions_total",
    help: "Domain events decided, by type.",
    labelNames: ["type"],
    registers: [registry],
  });
  const rejections = new Counter({
    name: "duplex_rejections_total",
    help: "Client commands rejected, by error code.",
    labelNames: ["code"],
    registers: [registry],
  });
  const responses = new Counter({
    name: "duplex_responses_total",
    help: "Responses ended, by status.",
    labelNames: ["status"],
    registers: [registry],
  });
  const engineAdded = new Histogram({
    name: "duplex_engine_added_seconds",
    help: "From a runner output reaching the engine to its server events being written to the socket (decide, append, render).",
    // Fine between 2 and 20 ms, where issue 24's target (5 ms at p99) and one session's tail lie: with 10 and 25 ms
    // as neighbours, a p99 of 12 ms read as 19 ms by interpolation.
    buckets: [0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [registry],
  });
  const turnSpans = new Histogram({
    name: "duplex_turn_span_seconds",
    help: "Spans of each user turn from the turn ledger (speech stop to first audio, created to first audio, first audio to first ack, barge-in to the response's end, ...), by span.",
    labelNames: ["span"],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2.5, 5, 10],
    registers: [registry],
  });
  return { appendSeconds, entries, decisions, rejections, responses, engineAdded, turnSpans };
};

/** The cluster's figures: takeovers, fence refusals, resumes, lease renewals, a shared store's group commits. */
const clusterFamilies = (registry: Registry) => {
  const takeovers = new Counter({
    name: "duplex_takeovers_total",
    help: "Sessions this node took over from another node (issue 22): on a client's resume, or from a node whose lease expired.",
    labelNames: ["reason"],
    registers: [registry],
  });
  const fences = new Counter({
    name: "duplex_fence_refusals_total",
    help: "Sessions given up because another node appended to them (their ownership moved) or this node lost its store.",
    registers: [registry],
  });
  const resumes = new Counter({
    name: "duplex_resumes_total",
    help: "session.resume requests, by outcome (resumed, or the refusal's code).",
    labelNames: ["outcome"],
    registers: [registry],
  });
  const leases = new Counter({
    name: "duplex_lease_renewals_total",
    help: "Renewals of this node's lease on the shared store, by outcome (held, expired: it had run out, failed).",
    labelNames: ["outcome"],
    registers: [registry],
  });
  const groupSize = new Histogram({
    name: "duplex_store_group_commit_appends",
    help: "Appends (one per session drain) committed together in one transaction of a shared store (PostgreSQL).",
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers: [registry],
  });
  const groupSeconds = new Histogram({
    name: "duplex_store_group_commit_seconds",
    help: "Time of one group commit's transaction on a shared store (PostgreSQL), from BEGIN to COMMIT.",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [registry],
  });
  return { takeovers, fences, resumes, leases, groupSize, groupSeconds };
};

/**
 * The session gauges, read at each scrape from the sessions `sessionsOf` gives (the engine's, once bound): how many
 * are held, and by attachment and turn state after each one's last committed step.
 */
const sessionGauges = (registry: Registry, sessionsOf: () => readonly SessionHost[]): void => {
  new Gauge({
    name: "duplex_sessions_live",
    help: "Sessions held in memory (attached or detached).",
    registers: [registry],
    collect() {
      this.set(sessionsOf().length);
    },
  });
  new Gauge({
    name: "duplex_sessions",
    help: "Sessions held in memory by whether a socket holds them and their turn state, read from each session's state after its last committed step.",
    labelNames: ["attached", "turn_state"],
    registers: [registry],
    collect() {
      this.reset();
      for (const host of sessionsOf()) {
        const state = host.current;
        if (state.phase === "closed") continue;
        this.inc({ attached: String(state.attached), turn_state: state.turnState });
      }
    },
  });
};

/**
 * `node`: this node's id (issue 22, part 4), a label of every metric (`setDefaultLabels`), so that the figures of the
 * nodes sharing one store can be told apart; absent for a node of its own.
 */
export const createMetrics = (node: string | null = null): ServerMetrics => {
  const registry = new Registry();
  if (node !== null) registry.setDefaultLabels({ node });
  // prom-client's process and Node.js figures: resident memory, heap, event-loop lag, GC.
  collectDefaultMetrics({ register: registry });
  const { appendSeconds, entries, decisions, rejections, responses, engineAdded, turnSpans } = engineFamilies(registry);
  const { takeovers, fences, resumes, leases, groupSize, groupSeconds } = clusterFamilies(registry);
  let bound: Engine | null = null;
  sessionGauges(registry, () => bound?.sessions() ?? []);
  return {
    registry,
    observe: {
      appended(count, ms) {
        entries.inc(count);
        appendSeconds.observe(ms / 1000);
      },
      delivered(ms) {
        engineAdded.observe(ms / 1000);
      },
      turnSpan(span, ms) {
        turnSpans.observe({ span }, ms / 1000);
      },
      tookOver(why) {
        takeovers.inc({ reason: why });
      },
      fenced() {
        fences.inc();
      },
      decided(event) {
        decisions.inc({ type: event.type });
        if (event.type === "RequestRejected") rejections.inc({ code: event.data.code });
        if (event.type === "ResponseEnded") responses.inc({ status: event.data.status });
      },
    },
    resumed(outcome) {
      resumes.inc({ outcome });
    },
    leaseRenewed(outcome) {
      leases.inc({ outcome });
    },
    groupCommitted(appends, _entries, ms) {
      groupSize.observe(appends);
      groupSeconds.observe(ms / 1000);
    },
    bind(engine) {
      bound = engine;
    },
  };
};
