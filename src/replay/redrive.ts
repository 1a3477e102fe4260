import { type DomainEvent, type Input, retagged } from "../domain/index.ts";
import { createEngine } from "../engine/engine.ts";
import { stepsOf } from "../engine/log.ts";
import type { EventStore, ModelRunner, RecordedEntry, ResamplerFactory } from "../engine/ports/index.ts";
import type { SessionHost } from "../engine/session-host.ts";
import { foldRecorded, INITIAL_SNAPSHOT } from "../engine/step.ts";

/** One line of a session's behaviour: a decision, with what distinguishes it (a response's status, ...). */
export interface BehaviourLine {
  /** The client input the decision answered, as its position among the session's client inputs (from 1). */
  readonly input: number;
  readonly text: string;
}

/** Where a re-driven session first behaved otherwise than its recording, with the lines around it. */
export interface BehaviourDivergence {
  readonly index: number;
  readonly recorded: string;
  readonly live: string;
  /** Up to `context` lines before the divergence and the lines from it, of each side. */
  readonly recordedContext: readonly string[];
  readonly liveContext: readonly string[];
}

export interface RedriveResult {
  readonly ok: boolean;
  readonly clientInputs: number;
  readonly recorded: readonly BehaviourLine[];
  readonly live: readonly BehaviourLine[];
  readonly divergence: BehaviourDivergence | null;
}

/**
 * What a decision says of the model's behaviour: its type, and for the ones that differ by more than their type,
 * the field that tells (a response's status and reason and, completed, what it said; a listen's reason; a tool
 * call's name). Decisions that follow the clock rather than the model are left out: audio and text deltas (a live
 * model speaks in chunks of its own), playback acks, overlap reports, acks of events, heartbeats.
 */
const behaviourOf = (event: DomainEvent): string | null => {
  switch (event.type) {
    case "ResponseEnded": {
      // A completed response says what it said; where a cancel cut one depends on timing, so only that it was cut.
      const said = event.data.status === "completed" ? ` "${event.data.text ?? event.data.transcript}"` : "";
      return `ResponseEnded ${event.data.status}${event.data.reason === null ? "" : ` (${event.data.reason})`}${said}`;
    }
    case "ModelListened":
      return `ModelListened (${event.data.reason})`;
    case "FunctionCallDelivered":
      return `FunctionCallDelivered ${event.data.call.name}`;
    case "RequestRejected":
      return `RequestRejected ${event.data.code}`;
    case "SessionClosed":
      return `SessionClosed ${event.data.reason}`;
    case "AudioDelivered":
    case "TextDelivered":
    case "PlaybackAcknowledged":
    case "OverlapDecided":
    case "EventsAcknowledged":
    case "HeartbeatAcknowledged":
    case "AudioBuffered":
    case "HistoryCommitted":
    case "SessionConfigured":
    case "SessionCreated":
    case "SessionDetached":
    case "SessionResumed":
      return null;
    default:
      return event.type;
  }
};

/** The behaviour lines of a session's decisions, given the client input (1-based) each answers. */
const linesOf = (decisions: readonly { input: number; event: DomainEvent }[]): BehaviourLine[] => {
  const lines: BehaviourLine[] = [];
  for (const { input, event } of decisions) {
    const text = behaviourOf(event);
    if (text === null) continue;
    lines.push({ input, text });
  }
  return lines;
};

const contextOf = (lines: readonly BehaviourLine[], index: number, context: number): string[] =>
  lines.slice(Math.max(0, index - context), index + context + 1).map((l) => `#${l.input} ${l.text}`);

/** The first behaviour line where the live session differs from the recording, with `context` lines around it. */
const firstDivergence = (
  recordedLines: readonly BehaviourLine[],
  liveLines: readonly BehaviourLine[],
  context: number,
): BehaviourDivergence | null => {
  const n = Math.max(recordedLines.length, liveLines.length);
  for (let i = 0; i < n; i += 1) {
    const r = recordedLines[i];
    const l = liveLines[i];
    if (r?.text !== l?.text) {
      return {
        index: i,
        recorded: r === undefined ? "(nothing)" : `#${r.input} ${r.text}`,
        live: l === undefined ? "(nothing)" : `#${l.input} ${l.text}`,
        recordedContext: contextOf(recordedLines, i, context),
        liveContext: contextOf(liveLines, i, context),
      };
    }
  }
  return null;
};

/**
 * Re-drives a recorded session's client inputs against a live runner (`duplex replay FILE --runner CONFIG`) and
 * compares what the session decided with what the recording decided, line by line (see `behaviourOf`).
 * Client commands are fed in their recorded order, `speed` times faster than recorded (`Infinity`: without pauses),
 * and each waits (up to `settleMs`, default 5000) while the live model is behind the recording (it has not started a
 * response the recording had, or still answers where the recording had finished; `playback`: it has taken fewer stage
 * outputs than the recording had by then); the model's outputs come from
 * `runner`, not from the recording. After the last command the
 * session is given `settleMs` to finish its response.
 * @throws Error when the entries are not a session stream.
 */
export const redrive = async (
  entries: readonly RecordedEntry[],
  deps: {
    readonly store: EventStore;
    readonly runner: ModelRunner;
    readonly createResampler: ResamplerFactory;
    readonly createOutputResampler?: ResamplerFactory;
    readonly speed?: number;
    readonly settleMs?: number;
    readonly context?: number;
    /**
     * The runner plays this very recording back (src/infra/runners/recorded.ts, paced): it is told each client input
     * the live session took (`follow`), and before each command the session also waits until it has taken as many
     * stage outputs as the recording had by then, so that outputs and inputs interleave as recorded.
     */
    readonly playback?: { follow(clientInput: number): void };
  },
): Promise<RedriveResult> => {
  const steps = stepsOf(entries);
  const opened = steps.find((s) => s.input.type === "SessionOpened")?.input;
  const engine = createEngine({
    store: deps.store,
    runner: deps.runner,
    vad: null,
    createResampler: deps.createResampler,
    ...(deps.createOutputResampler === undefined ? {} : { createOutputResampler: deps.createOutputResampler }),
    limits: { maxSessions: 1, idleTtlS: null },
  });
  const host = engine.open({
    ...(opened?.type === "SessionOpened" && opened.data.nativeDuplex !== null
      ? { nativeDuplex: opened.data.nativeDuplex }
      : {}),
    // A session recorded by an earlier release decides live by that release's rules, as its replay does.
    ...(opened?.type === "SessionOpened" && opened.data.rules !== undefined ? { rules: opened.data.rules } : {}),
  });
  if ("code" in host) throw new Error(`re-drive: ${host.message}`);
  const recordedId = opened?.type === "SessionOpened" ? opened.data.sessionId : null;
  const liveId = (host as SessionHost).sessionId;
  const live: { input: number; event: DomainEvent }[] = [];
  let current = 0;
  (host as SessionHost).events$.subscribe((e) => live.push({ input: current, event: e.event }));
  let liveOutputs = 0;
  let recordedOutputs = 0;
  (host as SessionHost).committed$.subscribe((step) => {
    if (step.input.type === "StageOutputReceived") liveOutputs += 1;
  });
  const recorded: { input: number; event: DomainEvent }[] = [];
  const speed = deps.speed ?? 1;
  const settleMs = deps.settleMs ?? 5000;
  /** The recording's session as it was before each command. */
  let recording = INITIAL_SNAPSHOT;
  let lastAt: number | null = null;
  let count = 0;
  for (const step of steps) {
    if (step.input.type === "StageOutputReceived") recordedOutputs += 1;
    if (step.input.type !== "CommandReceived") {
      // Decisions of other inputs (stage outputs, timers) belong to the client input before them.
      for (const d of step.decisions) recorded.push({ input: count, event: d.envelope.event });
      recording = foldRecorded(recording, step, false).snapshot;
      continue;
    }
    count += 1;
    for (const d of step.decisions) recorded.push({ input: count, event: d.envelope.event });
    if (lastAt !== null && Number.isFinite(speed)) {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, (step.input.at - (lastAt ?? 0)) / speed)));
    }
    lastAt = step.input.at;
    // A live model behind the recording catches up first: it has not yet started a response the recording had
    // started, or it still answers when the recording had finished. A model ahead is never held back.
    const behind = (): boolean => {
      const live = host.current;
      const was = recording.state;
      if (deps.playback !== undefined && liveOutputs < recordedOutputs) return true;
      if (live.responseCount < was.responseCount) return true;
      return live.responseCount === was.responseCount && live.response !== null && was.response === null;
    };
    const deadline = Date.now() + settleMs;
    while (Date.now() < deadline && !host.isClosed && behind()) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    recording = foldRecorded(recording, step, false).snapshot;
    current = count;
    // Ids in commands (a response or an item to cancel, ack, truncate) are derived from the session's id: the live
    // session has its own, so the recorded ones are translated.
    const command =
      recordedId === null ? step.input.data.command : retagged(step.input.data.command, recordedId, liveId);
    const input: Input = { type: "CommandReceived", at: Date.now(), data: { command } };
    await host.enqueue(input);
    deps.playback?.follow(count);
  }
  if (!host.isClosed) {
    const deadline = Date.now() + settleMs;
    while (Date.now() < deadline && host.current.response !== null) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  await host.settled();
  await engine.close();
  const recordedLines = linesOf(recorded);
  const liveLines = linesOf(live);
  const divergence = firstDivergence(recordedLines, liveLines, deps.context ?? 3);
  return { ok: divergence === null, clientInputs: count, recorded: recordedLines, live: liveLines, divergence };
};
