import { decide, evolve, initialState, type SessionState } from "../domain/index.ts";
import { type EventEnvelope, initialWireState, reduceWire, type WireState } from "../projections/index.ts";
import { verifyChain } from "./chain.ts";
import { digestOf, type RecordedStep, stepsOf } from "./log.ts";
import type { RecordedEntry } from "./ports/index.ts";

/** Where a replay first differs from the recording. `expected` is the recording, `actual` the replay. */
export interface Divergence {
  /** Revision of the input whose decisions differ. */
  readonly revision: number;
  readonly inputType: string;
  /** `chain`: the recording itself was changed after it was written (its hash chain breaks at `revision`). */
  readonly kind: "domain" | "wire" | "chain";
  /** Index of the differing decision (domain) or server event (wire) within that input's output. */
  readonly index: number;
  readonly expected: string;
  readonly actual: string;
}

/** Counts of a replay, and its first divergence (null when the replay equals the recording byte for byte). */
export interface ReplayResult {
  readonly ok: boolean;
  readonly sessionId: string | null;
  readonly inputs: number;
  readonly decisions: number;
  readonly wireEvents: number;
  readonly divergence: Divergence | null;
  /** The state the replay ended in. */
  readonly state: SessionState;
}

/** Canonical JSON of a decision for comparison: audio bytes as base64, keys in recorded order. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v instanceof Uint8Array ? { $bytes: Buffer.from(v).toString("base64") } : v,
  );

const envelopeText = (e: EventEnvelope): string =>
  canonical({ type: e.event.type, data: e.event.data, metadata: e.metadata });

/**
 * Replays a recorded session offline (DESIGN.md, rule 2): feeds each recorded input through `decide`, never a
 * model, and checks that the decisions equal the recorded ones, and that the wire projection renders server
 * events whose digests equal the recorded ones, byte for byte. Stops at the first divergence.
 * @throws Error when the entries are not a session stream (see `stepsOf`).
 */
export const replayEntries = (entries: readonly RecordedEntry[]): ReplayResult => {
  // A log written with a hash chain is checked against it first: a recording changed after it was written (one
  // byte of an append, a zeroed chunk) would otherwise replay "identical", its changed inputs taken as given.
  if (typeof entries[0]?.metadata.chain === "string") {
    const verdict = verifyChain(entries);
    if (!verdict.ok) {
      const entry = entries.find((e) => e.revision === verdict.revision);
      return {
        ...replaySteps([]),
        inputs: stepsOf(entries).length,
        sessionId: (entries[0]?.data as { sessionId?: string } | undefined)?.sessionId ?? null,
        ok: false,
        divergence: {
          revision: verdict.revision,
          inputType: entry?.type ?? "(missing)",
          kind: "chain",
          index: 0,
          expected: `the entry written at revision ${verdict.revision}, whose chain digest the log records`,
          actual: verdict.message,
        },
      };
    }
  }
  return replaySteps(stepsOf(entries));
};

export const replaySteps = (steps: readonly RecordedStep[]): ReplayResult => {
  let state = initialState;
  let wire: WireState = initialWireState;
  let decisions = 0;
  let wireEvents = 0;
  const result = (divergence: Divergence | null): ReplayResult => ({
    ok: divergence === null,
    sessionId: state.phase === "new" ? null : state.sessionId,
    inputs: steps.length,
    decisions,
    wireEvents,
    divergence,
    state,
  });
  for (const step of steps) {
    const events = decide(state, step.input);
    const count = Math.max(events.length, step.decisions.length);
    for (let i = 0; i < count; i += 1) {
      const event = events[i];
      const recorded = step.decisions[i];
      const replayed: EventEnvelope | undefined =
        event === undefined
          ? undefined
          : {
              event,
              metadata: { at: step.input.at, epoch: evolve(state, event).epoch, turnId: evolve(state, event).turnId },
            };
      const expectedText = recorded === undefined ? "(nothing)" : envelopeText(recorded.envelope);
      const actualText = replayed === undefined ? "(nothing)" : envelopeText(replayed);
      if (event === undefined || recorded === undefined || replayed === undefined || expectedText !== actualText) {
        return result({
          revision: step.revision,
          inputType: step.input.type,
          kind: "domain",
          index: i,
          expected: expectedText,
          actual: actualText,
        });
      }
      state = evolve(state, event);
      wire = reduceWire(wire, replayed);
      const digests = wire.emitted.map(digestOf);
      const wireCount = Math.max(digests.length, recorded.wire.length);
      for (let w = 0; w < wireCount; w += 1) {
        const a = digests[w];
        const e = recorded.wire[w];
        if (a === undefined || e === undefined || a.sha256 !== e.sha256 || a.seq !== e.seq || a.type !== e.type) {
          return result({
            revision: step.revision,
            inputType: step.input.type,
            kind: "wire",
            index: w,
            expected: e === undefined ? "(nothing)" : `${e.type} seq ${e.seq} sha256 ${e.sha256}`,
            actual:
              a === undefined
                ? "(nothing)"
                : `${a.type} seq ${a.seq} sha256 ${a.sha256}: ${wire.emitted[w]?.json.slice(0, 400)}`,
          });
        }
      }
      decisions += 1;
      wireEvents += digests.length;
    }
  }
  return result(null);
};
