import type { Capabilities, HistoryItem, SessionConfig, StageOutput } from "../../../domain/index.ts";
import type { ModelRunner, RunnerSession } from "../../../engine/ports/index.ts";
import { createInbound, OUTPUT_RATE } from "./inbound.ts";
import { createUpstreamLink } from "./link.ts";
import { INPUT_RATE, seedEvents, sessionFields } from "./outbound.ts";
import { DEFAULT_RESUME_POLICY, type ResumePolicy } from "./resume-policy.ts";
import { createTurns } from "./turns.ts";
import { createUnitSender } from "./unit-sender.ts";

export { DEFAULT_RESUME_POLICY, MAX_RESUME_GRACE_MS, type ResumePolicy } from "./resume-policy.ts";

/**
 * Options of the `upstream` runner. `url` is the upstream's realtime endpoint (`ws:` or `wss:`); `apiKey` is sent
 * as `Authorization: Bearer` and never logged; `connectTimeoutMs` bounds the connection and the upstream's
 * `session.created` (and each resume try's `session.resumed`).
 */
export interface UpstreamRunnerOptions {
  readonly url: string;
  /**
   * `duplex`: a server of the duplex contract (reference/realtime-duplex-api.md; vLLM-Omni's `/v1/realtime?duplex=1`,
   * or this server): the model decides when to speak in the model-native lane. `openai`: any OpenAI
   * Realtime-compatible server (GA names, beta accepted): our turn lane maps onto its commit and `response.create`,
   * and it is sent 24 kHz pcm16.
   */
  readonly dialect: "duplex" | "openai";
  /** The model the upstream is asked for (`?model=` and `session.model`); default: the upstream's own. */
  readonly model?: string;
  readonly apiKey?: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** ms; default 5000. */
  readonly connectTimeoutMs?: number;
  /** How often a duplex upstream session is sent `session.heartbeat` (ms); default 10 000. */
  readonly heartbeatMs?: number;
  /** PEM certificates to trust for a `wss:` upstream besides the system's (a self-signed or private CA). */
  readonly ca?: string | Buffer;
  /**
   * openai dialect: who ends the user's turns. `ours` (default): our turn lane, our server VAD and commits drive
   * the upstream. `upstream`: the upstream's server VAD ends turns and answers by itself, which to our sessions is
   * the model-native lane (the model decides when to speak).
   */
  readonly vad?: "ours" | "upstream";
  /** How a dropped duplex upstream session is resumed (default {@link DEFAULT_RESUME_POLICY}). */
  readonly resume?: ResumePolicy;
  /** Told of each resume try that failed and is retried (the server logs it). */
  readonly onRetry?: (retry: {
    readonly sessionId: string;
    readonly attempt: number;
    readonly delayMs: number;
    readonly why: string;
  }) => void;
}

/**
 * The capabilities an upstream runner announces before any session exists: a model-native duplex server
 * (`duplex`) or a turn-based OpenAI server (`openai`). A deployment's `profile` replaces them with the real model's.
 */
export const upstreamCapabilities = (
  dialect: "duplex" | "openai",
  vad: "ours" | "upstream" = "ours",
): Capabilities => ({
  implementationLevel: dialect === "duplex" || vad === "upstream" ? "model_native_duplex" : "turn_based",
  chunkPeriodMs: 200,
  supportsBargeIn: true,
  supportsSessionResume: true,
  supportsAudioTruncate: true,
  supportsToolCalls: true,
  supportsVideo: dialect === "duplex",
  // An OpenAI server speaks at the session's `speed`; a duplex-contract model's rate is its own (a profile may say
  // otherwise).
  supportsSpeed: dialect === "openai",
  inputSampleRateHz: INPUT_RATE,
  outputSampleRateHz: OUTPUT_RATE,
});

/**
 * The `upstream` runner (DESIGN.md, "Ports": ModelRunner): drives a realtime model server over WebSocket, one
 * upstream session per session, so the engine (log, replay, resume, conformance) sits in front of a model served
 * elsewhere. Units become client events of the upstream (outbound.ts); the upstream's events become stage outputs
 * (inbound.ts), which the engine records before they take effect, so a session replays offline without the upstream.
 *
 * - Fencing: an upstream response is stamped with the epoch in force when it was asked for; `abort` cancels it
 *   upstream, and its late events keep their old epoch, so the decider drops them (the drop is in the log).
 * - Faults (link.ts): a dropped duplex link is resumed with backoff and jitter within the resume grace, and what the
 *   upstream had not confirmed is sent again; an upstream that stays away past the grace, says the session is gone,
 *   or refuses the first connection loses the stage (`stage_lost{upstream_unavailable}`); a frame that is not a JSON
 *   event, `upstream_protocol_error`. The session ends with that code; other sessions have sockets of their own.
 * - Context: a session opened with history (rebuilt from its log after a restart of this server, when the upstream
 *   session's token, held in memory only, is gone) gives the new upstream session the conversation as heard, in
 *   order, after its instructions and tools and before anything else; the seeding is recorded (`history_seeded`).
 * - Playback reports are forwarded (duplex: `playback.ack`; openai: a truncation as `conversation.item.truncate`),
 *   so the upstream's own history holds what the listener heard.
 */
export const createUpstreamRunner = (options: UpstreamRunnerOptions, capabilities?: Capabilities): ModelRunner => {
  const caps = capabilities ?? upstreamCapabilities(options.dialect, options.vad);
  const open = new Set<RunnerSession>();
  const url = new URL(options.url);
  if (options.model !== undefined && !url.searchParams.has("model")) url.searchParams.set("model", options.model);
  const headers: Record<string, string> = { ...options.headers };
  if (options.apiKey !== undefined) headers.Authorization = `Bearer ${options.apiKey}`;
  if (options.dialect === "openai") headers["OpenAI-Beta"] = headers["OpenAI-Beta"] ?? "realtime=v1";

  const target = { url, headers };
  return {
    name: options.model ?? `upstream:${url.host}`,
    capabilities: caps,
    open(session, emit) {
      const opened = openUpstreamSession(options, target, session, emit, () => open.delete(opened));
      open.add(opened);
      return opened;
    },
    async close() {
      await Promise.all([...open].map((s) => s.close()));
    },
  };
};

/** The session being opened, as the port gives it. */
type OpenedSession = {
  readonly sessionId: string;
  readonly config: SessionConfig;
  readonly history?: readonly HistoryItem[];
};

/**
 * One upstream session: its link (link.ts), the turns that tie it to ours (turns.ts), its inbound translation
 * (inbound.ts) and unit sender (unit-sender.ts), and the conversation it is seeded with. `closed` is told once it
 * is closed.
 */
const openUpstreamSession = (
  options: UpstreamRunnerOptions,
  target: { readonly url: URL; readonly headers: Readonly<Record<string, string>> },
  session: OpenedSession,
  emit: (output: StageOutput) => void,
  closed: () => void,
): RunnerSession => {
  let isClosed = false;
  let lost = false;
  let configured = false;
  let sentRefAudio: string | null = null;
  const turns = createTurns();
  const seed = seedEvents(session.history ?? []);
  const link = createUpstreamLink(
    {
      ...target,
      ...(options.ca === undefined ? {} : { ca: options.ca }),
      connectTimeoutMs: options.connectTimeoutMs ?? 5000,
      dialect: options.dialect,
      heartbeatMs: options.heartbeatMs ?? 10_000,
      resume: options.resume ?? DEFAULT_RESUME_POLICY,
    },
    {
      event: (event) => inbound.onEvent(event),
      ready(how, upstream) {
        // The upstream session as the log keeps it: its id and the SHA-256 of its resume token.
        emit({
          kind: "upstream_session",
          epoch: turns.epoch(),
          sessionId: upstream.id,
          resumeTokenSha256: upstream.tokenSha256,
          ...(upstream.revision === null ? {} : { revision: upstream.revision }),
        });
        if (how === "created" && seed.itemIds.length > 0) {
          emit({ kind: "history_seeded", epoch: turns.epoch(), itemIds: seed.itemIds });
        }
      },
      lost(code, message) {
        if (lost || isClosed) return;
        lost = true;
        emit({ kind: "stage_lost", epoch: turns.epoch(), code, message });
      },
      ...(options.onRetry === undefined
        ? {}
        : {
            retrying: (attempt, delayMs, why) =>
              options.onRetry?.({ sessionId: session.sessionId, attempt, delayMs, why }),
          }),
    },
  );
  const inbound = createInbound(turns, emit, (event) => link.send(event));
  const sendUnit = createUnitSender(options.dialect, turns, (event) => link.send(event));

  const runnerSession: RunnerSession = {
    submit(unit) {
      if (isClosed || lost || unit.epoch < turns.epoch()) return;
      if (unit.epoch > turns.epoch()) runnerSession.abort(unit.epoch);
      sendUnit(unit);
    },
    abort(newEpoch) {
      const cancel = turns.advance(newEpoch);
      inbound.abort();
      if (cancel !== null) link.send({ type: "response.cancel", response_id: cancel });
    },
    configure(config, refAudio) {
      link.send({ type: "session.update", session: sessionFields(options, config, refAudio, sentRefAudio) });
      if (options.dialect === "duplex" && refAudio !== null) sentRefAudio = refAudio.sha256;
      // The conversation so far goes to a new upstream session after its instructions and tools, before any unit.
      if (!configured) for (const event of seed.events) link.send(event);
      configured = true;
    },
    async close() {
      if (isClosed) return;
      isClosed = true;
      closed();
      link.close();
    },
  };
  return runnerSession;
};
