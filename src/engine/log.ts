import { createHash } from "node:crypto";
import { type DomainEvent, INPUT_TYPES, type Input, type InputType, type SessionState } from "../domain/index.ts";
import type { EventEnvelope, WireEvent } from "../projections/index.ts";
import { RENDERED_BEFORE } from "./earlier-releases.ts";
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
