import {
  decision,
  evolve,
  type Input,
  initialState,
  type RefAudioInput,
  type RunnerUnit,
  type SessionState,
  speechInProgress,
} from "../domain/index.ts";
import {
  type CommittedDecision,
  type CommittedStep,
  type EarlierWireRules,
  type EventEnvelope,
  initialWireState,
  reduceWire,
  type WireEvent,
  type WireState,
} from "../projections/index.ts";
import { chainHeadOf } from "./chain.ts";
import { earlierWireRulesOf } from "./earlier-releases.ts";
import { type Effect, effectsOf } from "./effects.ts";
import { decisionEntry, inputEntry, type RecordedStep, stepsOf } from "./log.ts";
import type { NewEntry, RecordedEntry } from "./ports/index.ts";

/**
 * The one step of a session (DESIGN.md, "How data flows"): every path that turns inputs into decisions and server
 * events goes through `stepSession` (the live host, replay) or, for inputs whose decisions are recorded already,
 * `foldRecorded` (rebuilding a session from its log, the log readers). Pure: no clock, no I/O.
 */

/** What a session is between two inputs: its domain state and its wire projection (render context, last seq). */
export interface SessionSnapshot {
  readonly state: SessionState;
  readonly wire: WireState;
}

export const INITIAL_SNAPSHOT: SessionSnapshot = { state: initialState, wire: initialWireState };

/** What one input did to a session. */
export interface SessionStep {
  /** The session after the input. */
  readonly snapshot: SessionSnapshot;
  /** The decisions, in order, each with its server events. */
  readonly decisions: readonly CommittedDecision[];
  /** Every server event of the step, in order (the decisions' `wire`, concatenated). */
  readonly outgoing: readonly WireEvent[];
}

/** A step decided now: also what it appends (the input, then its decisions) and the effects it asks for. */
export interface DecidedStep extends SessionStep {
  /** The log entries of the step: the input first, then each decision with its server events' digests. */
  readonly entries: readonly NewEntry[];
  readonly effects: readonly Effect[];
}

/**
 * Decides `input` from `snapshot`: `decide` (once; it returns the states its events lead to), each event's envelope
 * (metadata: the input's `at`, the epoch and turn id after the event), the wire projection of each, the log entries
 * and the effects. `rulesOf(i)`: how the release that recorded decision `i` numbered its server events (replay of an
 * old log; absent: today's).
 */
export const stepSession = (
  snapshot: SessionSnapshot,
  input: Input,
  rulesOf?: (index: number) => EarlierWireRules | undefined,
): DecidedStep => {
  const before = snapshot.state;
  const { events, states, state } = decision(before, input);
  const entries: NewEntry[] = [inputEntry(input, before)];
  const decisions: CommittedDecision[] = [];
  const outgoing: WireEvent[] = [];
  let wire = snapshot.wire;
  for (let i = 0; i < events.length; i += 1) {
    const after = states[i] as SessionState;
    const envelope: EventEnvelope = {
      event: events[i] as (typeof events)[number],
      metadata: { at: input.at, epoch: after.epoch, turnId: after.turnId },
    };
    wire = reduceWire(wire, envelope, rulesOf?.(i));
    entries.push(decisionEntry(envelope, wire.emitted, input));
    decisions.push({ envelope, wire: wire.emitted });
    for (const event of wire.emitted) outgoing.push(event);
  }
  return { snapshot: { state, wire }, decisions, outgoing, entries, effects: effectsOf(input, events, before, state) };
};

/**
 * Moves `snapshot` on by a recorded step without deciding it: its recorded decisions are evolved and rendered, as
 * the release that recorded each one numbered them (`renderedBefore`). `render: false` leaves the wire projection
 * as it was (a reader that needs only the state).
 */
export const foldRecorded = (snapshot: SessionSnapshot, step: RecordedStep, render = true): SessionStep => {
  let state = snapshot.state;
  let wire = snapshot.wire;
  const decisions: CommittedDecision[] = [];
  const outgoing: WireEvent[] = [];
  for (const { envelope, renderedBefore } of step.decisions) {
    state = evolve(state, envelope.event);
    if (render) {
      wire = reduceWire(wire, envelope, earlierWireRulesOf(renderedBefore));
      for (const event of wire.emitted) outgoing.push(event);
    }
    decisions.push({ envelope, wire: render ? wire.emitted : [] });
  }
  return { snapshot: { state, wire }, decisions, outgoing };
};

/**
 * A session's log as its committed steps (src/projections/committed.ts), each recorded step folded without deciding:
 * the stream the projections read offline, as they read the live host's `committed$`.
 * @throws Error when the entries are not a session stream (see `stepsOf`).
 */
export const committedStepsOf = (entries: readonly RecordedEntry[]): CommittedStep[] => {
  let snapshot = INITIAL_SNAPSHOT;
  const steps: CommittedStep[] = [];
  for (const step of stepsOf(entries)) {
    const stepped = foldRecorded(snapshot, step);
    snapshot = stepped.snapshot;
    steps.push({ revision: step.revision, input: step.input, decisions: stepped.decisions, state: snapshot.state });
  }
  return steps;
};

/**
 * A session rebuilt from its log after a restart; `refAudio` is the clip in force, read from the update that set it;
 * `unansweredAppends`, the appends of the utterance the model had not answered (`state.input.unanswered`), which its
 * new runner is given again (see {@link withUnansweredAppends}).
 */
export interface RecoveredLog {
  readonly state: SessionState;
  readonly wire: WireState;
  readonly revision: number;
  /** The chain value of the last entry (src/engine/chain.ts), which the next append continues. */
  readonly chainHead: string;
  readonly refAudio: RefAudioInput | null;
  readonly unansweredAppends?: readonly Extract<RunnerUnit, { kind: "append" }>[];
}

/**
 * Folds a session's recorded entries into its state, its wire projection and its last revision (`foldRecorded` per
 * step). A log of an earlier release is read through its upcasters (`stepsOf`) and numbered as that release
 * numbered its server events.
 * @throws Error when the entries are not a session stream (see `stepsOf`).
 */
export const foldLog = (entries: readonly RecordedEntry[]): RecoveredLog & { replay: WireEvent[] } => {
  let snapshot = INITIAL_SNAPSHOT;
  const replay: WireEvent[] = [];
  let refAudio: RefAudioInput | null = null;
  for (const step of stepsOf(entries)) {
    const input = step.input;
    if (input.type === "CommandReceived" && input.data.command.type === "session.update") {
      const clip = input.data.command.patch.refAudio;
      // Only an update that was accepted changed the clip: its SessionConfigured follows in the same step.
      if (clip !== undefined && step.decisions.some((d) => d.envelope.event.type === "SessionConfigured")) {
        refAudio = clip;
      }
    }
    const stepped = foldRecorded(snapshot, step);
    snapshot = stepped.snapshot;
    for (const event of stepped.outgoing) replay.push(event);
  }
  return {
    state: snapshot.state,
    wire: snapshot.wire,
    revision: entries.at(-1)?.revision ?? -1,
    chainHead: chainHeadOf(entries),
    replay,
    refAudio,
  };
};

/**
 * `log` with the appends its new runner may be given again, read from `entries`: those of its unanswered utterance
 * and of the utterance in progress (`speechInProgress`), from the first one's start (none when there is neither).
 */
export const withUnansweredAppends = <L extends RecoveredLog>(log: L, entries: readonly RecordedEntry[]): L => {
  const ranges = [log.state.input.unanswered ?? null, speechInProgress(log.state)].filter((r) => r !== null);
  if (ranges.length === 0) return log;
  const fromMs = Math.min(...ranges.map((r) => r.audioStartMs));
  const toMs = Math.max(...ranges.map((r) => r.audioEndMs));
  return { ...log, unansweredAppends: appendsBetween(entries, fromMs, toMs) };
};

/**
 * The `append` units a session's runner was given for the input between `fromMs` and `toMs` (ms on the input clock):
 * each append that overlaps it, with the audio and the VAD marks it had, as `effectsOf` derived them when it was
 * decided. For a runner that lost its work and must hear an unanswered utterance again (`UtteranceResubmitted`).
 * @throws Error when the entries are not a session stream (see `stepsOf`).
 */
export const appendsBetween = (
  entries: readonly RecordedEntry[],
  fromMs: number,
  toMs: number,
): Extract<RunnerUnit, { kind: "append" }>[] => {
  const units: Extract<RunnerUnit, { kind: "append" }>[] = [];
  let snapshot = INITIAL_SNAPSHOT;
  for (const step of stepsOf(entries)) {
    const before = snapshot.state;
    snapshot = foldRecorded(snapshot, step, false).snapshot;
    const input = step.input;
    if (input.type !== "CommandReceived" || input.data.command.type !== "input_audio_buffer.append") continue;
    const state = snapshot.state;
    if (state.input.clockMs <= fromMs || before.input.clockMs >= toMs) continue;
    const events = step.decisions.map((d) => d.envelope.event);
    for (const effect of effectsOf(input, events, before, state)) {
      if (effect.kind === "submit" && effect.unit.kind === "append") units.push(effect.unit);
    }
  }
  return units;
};
