import { createHash } from "node:crypto";
import {
  type DomainEvent,
  evolve,
  INPUT_TYPES,
  type Input,
  type InputType,
  initialState,
  type RefAudioInput,
  type RunnerUnit,
  type SessionState,
  speechInProgress,
} from "../domain/index.ts";
import {
  type EventEnvelope,
  initialWireState,
  reduceWire,
  type WireEvent,
  type WireState,
} from "../projections/index.ts";
import { chainHeadOf } from "./chain.ts";
import { earlierWireRulesOf, RENDERED_BEFORE } from "./earlier-releases.ts";
import { effectsOf } from "./effects.ts";
import type { NewEntry, RecordedEntry } from "./ports/index.ts";
import { LOG_SCHEMA_VERSION, upcast } from "./upcast.ts";

/**
 * How a session's inputs and decisions are laid out in its stream `session-<id>` (DESIGN.md, "The session
 * stream"): each input is followed by the decisions `decide` made of it. A decision's metadata also records a
 * digest of each server event it rendered (`wire`), so a replay can prove the wire bytes equal, not only the
 * domain events.
 */
export const streamOf = (sessionId: string): string => `session-${sessionId}`;
export const STREAM_PREFIX = "session-";

/** The record of one server event inside a decision's metadata. `sha256` is hex of the event's JSON text. */
export interface WireDigest {
  readonly seq: number | null;
  readonly type: string;
  readonly sha256: string;
}

export const digestOf = (event: WireEvent): WireDigest => ({
  seq: event.seq,
  type: event.type,
  sha256: createHash("sha256").update(event.json).digest("hex"),
});

export const inputEntry = (input: Input, state: SessionState): NewEntry => {
  const { type, at, data } = input;
  // The log's first entry names its schema version (src/engine/upcast.ts).
  const schema = type === "SessionOpened" ? { schema: LOG_SCHEMA_VERSION } : {};
  return { type, data, metadata: { at, epoch: state.epoch, turnId: state.turnId, ...schema } };
};

/**
 * The model's audio is stored once (issue 10, part 4): an `AudioDelivered` made of a `StageOutputReceived` input's
 * audio is stored with `audio: "input"` in place of the bytes, and `stepsOf` gives it back the input's.
 */
const AUDIO_OF_INPUT = "input";

/** The audio an input's `AudioDelivered` carries: the converted audio when the session's format needed it. */
const audioOfInput = (input: Input | undefined): Uint8Array | null =>
  input?.type === "StageOutputReceived" && input.data.output.kind === "audio"
    ? (input.data.delivered?.audio ?? input.data.output.audio)
    : null;

/** A decision as stored; `input` is the input it was decided from (its audio is not stored twice). */
export const decisionEntry = (envelope: EventEnvelope, wire: readonly WireEvent[], input?: Input): NewEntry => {
  const { event } = envelope;
  const metadata = { ...envelope.metadata, wire: wire.map(digestOf) };
  const stored =
    event.type === "AudioDelivered" && event.data.audio === audioOfInput(input)
      ? { ...event.data, audio: AUDIO_OF_INPUT }
      : event.data;
  return { type: event.type, data: stored, metadata };
};

/** A decision's data as decided: an `AudioDelivered` stored without its audio takes its input's again. */
const restoredData = (type: string, data: unknown, input: Input): unknown => {
  if (type !== "AudioDelivered" || (data as { audio?: unknown }).audio !== AUDIO_OF_INPUT) return data;
  const audio = audioOfInput(input);
  if (audio === null) throw new Error("an AudioDelivered refers to the audio of an input that has none");
  // Spread then set: the key keeps its place, so the event is the one decided, byte for byte.
  return { ...(data as Record<string, unknown>), audio };
};

/** One input of a recorded session with the decisions recorded after it. */
export interface RecordedStep {
  readonly input: Input;
  readonly revision: number;
  readonly decisions: readonly {
    readonly envelope: EventEnvelope;
    readonly wire: readonly WireDigest[];
    /**
     * The changes (commits) whose wire an earlier release rendered this decision before (see
     * src/engine/earlier-releases.ts); absent: rendered as today.
     */
    readonly renderedBefore?: readonly string[];
  }[];
}

/** Whether a log entry of `type` is an input (the decisions follow it). */
export const isInputType = (type: string): type is InputType => (INPUT_TYPES as readonly string[]).includes(type);

/**
 * Groups a session's entries into steps, read in today's shape (`upcast`: a log of an older schema version goes
 * through its upcasters first). Throws when the stream does not start with an input or holds an entry type that is
 * neither an input nor a decision, or (LogSchemaError) when the log is newer than this server.
 */
export const stepsOf = (entries: readonly RecordedEntry[]): RecordedStep[] => {
  const steps: { input: Input; revision: number; decisions: RecordedStep["decisions"][number][] }[] = [];
  for (const entry of upcast(entries)) {
    if (isInputType(entry.type)) {
      steps.push({
        input: { type: entry.type, data: entry.data, at: entry.metadata.at } as Input,
        revision: entry.revision,
        decisions: [],
      });
      continue;
    }
    const step = steps.at(-1);
    if (step === undefined)
      throw new Error(`stream ${entry.stream} starts with a decision (${entry.type}) at revision ${entry.revision}`);
    const { wire, ...metadata } = entry.metadata as typeof entry.metadata & { wire?: WireDigest[] };
    step.decisions.push({
      envelope: {
        event: { type: entry.type, data: restoredData(entry.type, entry.data, step.input) } as DomainEvent,
        metadata: { at: metadata.at, epoch: metadata.epoch, turnId: metadata.turnId },
      },
      wire: wire ?? [],
      ...(Array.isArray(metadata[RENDERED_BEFORE])
        ? { renderedBefore: metadata[RENDERED_BEFORE] as readonly string[] }
        : {}),
    });
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
 * `log` with the appends its new runner may be given again, read from `entries`: those of its unanswered utterance
 * and of the utterance in progress (`speechInProgress`), from the first one's start (none when there is neither).
 */
export const withUnansweredAppends = <L extends RecoveredLog>(log: L, entries: Parameters<typeof stepsOf>[0]): L => {
  const ranges = [log.state.input.unanswered ?? null, speechInProgress(log.state)].filter((r) => r !== null);
  if (ranges.length === 0) return log;
  const fromMs = Math.min(...ranges.map((r) => r.audioStartMs));
  const toMs = Math.max(...ranges.map((r) => r.audioEndMs));
  return { ...log, unansweredAppends: appendsBetween(entries, fromMs, toMs) };
};

/**
 * Folds a session's recorded entries into its state, its wire projection and its last revision. A log of an earlier
 * release is read through its upcasters (`stepsOf`) and numbered as that release numbered its server events.
 * @throws Error when the entries are not a session stream (see `stepsOf`).
 */
export const foldLog = (entries: Parameters<typeof stepsOf>[0]): RecoveredLog & { replay: WireEvent[] } => {
  let state = initialState;
  let wire = initialWireState;
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
    for (const { envelope, renderedBefore } of step.decisions) {
      state = evolve(state, envelope.event);
      // A log of an earlier release goes on with the server_event_seq its clients were given.
      wire = reduceWire(wire, envelope, earlierWireRulesOf(renderedBefore));
      replay.push(...wire.emitted);
    }
  }
  return { state, wire, revision: entries.at(-1)?.revision ?? -1, chainHead: chainHeadOf(entries), replay, refAudio };
};

/**
 * The `append` units a session's runner was given for the input between `fromMs` and `toMs` (ms on the input clock):
 * each append that overlaps it, with the audio and the VAD marks it had, as `effectsOf` derived them when it was
 * decided. For a runner that lost its work and must hear an unanswered utterance again (`UtteranceResubmitted`).
 * @throws Error when the entries are not a session stream (see `stepsOf`).
 */
export const appendsBetween = (
  entries: Parameters<typeof stepsOf>[0],
  fromMs: number,
  toMs: number,
): Extract<RunnerUnit, { kind: "append" }>[] => {
  const units: Extract<RunnerUnit, { kind: "append" }>[] = [];
  let state = initialState;
  for (const step of stepsOf(entries)) {
    const before = state;
    for (const { envelope } of step.decisions) state = evolve(state, envelope.event);
    const input = step.input;
    if (input.type !== "CommandReceived" || input.data.command.type !== "input_audio_buffer.append") continue;
    if (state.input.clockMs <= fromMs || before.input.clockMs >= toMs) continue;
    const events = step.decisions.map((d) => d.envelope.event);
    for (const effect of effectsOf(input, events, before, state)) {
      if (effect.kind === "submit" && effect.unit.kind === "append") units.push(effect.unit);
    }
  }
  return units;
};

/** Who owns a session (issue 22, part 4): a node id (null: a log of one node, before ownership) and its epoch. */
export interface SessionOwner {
  readonly node: string | null;
  readonly epoch: number;
}

/** The owner a session's log names last: its latest `SessionOwned`, else the node that opened it (epoch 1). */
export const ownerOf = (entries: readonly RecordedEntry[]): SessionOwner => {
  for (let i = entries.length - 1; i >= 0; i -= 1) {
    const entry = entries[i] as RecordedEntry;
    if (entry.type === "SessionOwned") {
      const data = entry.data as { node: string; epoch: number };
      return { node: data.node, epoch: data.epoch };
    }
  }
  const opened = entries[0];
  const node = opened?.type === "SessionOpened" ? (opened.data as { node?: string }).node : undefined;
  return { node: node ?? null, epoch: 1 };
};
