import type { SessionState } from "../domain/index.ts";
import { verifyChain } from "../engine/chain.ts";
import { chainEraWireJson, earlierChangesOf, earlierWireJson, earlierWireRulesOf } from "../engine/earlier-releases.ts";
import { digestOf, type RecordedStep, stepsOf, type WireDigest } from "../engine/log.ts";
import type { RecordedEntry } from "../engine/ports/index.ts";
import { INITIAL_SNAPSHOT, stepSession } from "../engine/step.ts";
import { schemaOf } from "../engine/upcast.ts";
import type { EventEnvelope } from "../projections/index.ts";

/** Where a replay first differs from the recording. `expected` is the recording, `actual` the replay. */
export interface Divergence {
  /** Revision of the input whose decisions differ. */
  readonly revision: number;
  readonly inputType: string;
  /**
   * `chain`: the recording itself was changed after it was written (its hash chain breaks at `revision`, or a log
   * whose schema has the chain lacks a digest there).
   */
  readonly kind: "domain" | "wire" | "chain";
  /** Index of the differing decision (domain) or server event (wire) within that input's output. */
  readonly index: number;
  readonly expected: string;
  readonly actual: string;
}

/**
 * The earlier release a log of schema 1 was written by, as far as the log shows it (src/engine/earlier-releases.ts):
 * the changes it predates (commits, oldest first), and what of those releases a replay does not reproduce.
 */
export interface EarlierRelease {
  readonly before: readonly string[];
  readonly unreproduced: readonly string[];
}

/** Counts of a replay, and its first divergence (null when the replay equals the recording byte for byte). */
export interface ReplayResult {
  readonly ok: boolean;
  /** The session the log is of: its `SessionOpened.sessionId` (null: the log opens no session). */
  readonly sessionId: string | null;
  readonly inputs: number;
  readonly decisions: number;
  readonly wireEvents: number;
  readonly divergence: Divergence | null;
  /** The state the replay ended in. */
  readonly state: SessionState;
  /** The earlier release that wrote the log, when it is one (null: today's shape). */
  readonly earlierRelease: EarlierRelease | null;
}

/** Canonical JSON of a decision for comparison: audio bytes as base64, keys in recorded order. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v instanceof Uint8Array ? { $bytes: Buffer.from(v).toString("base64") } : v,
  );

const envelopeText = (e: EventEnvelope): string =>
  canonical({ type: e.event.type, data: e.event.data, metadata: e.metadata });

/** The session id a log's first `SessionOpened` names, or null. */
const openedSessionOf = (entries: readonly RecordedEntry[]): string | null => {
  const id = (entries.find((e) => e.type === "SessionOpened")?.data as { sessionId?: unknown } | undefined)?.sessionId;
  return typeof id === "string" ? id : null;
};

/**
 * What a log shows of the earlier release that wrote it (null: today's shape): for a log of schema 2, only the changes
 * made since that schema came in (`sinceSchema`).
 */
export const earlierReleaseOf = (entries: readonly RecordedEntry[]): EarlierRelease | null => {
  const changes = earlierChangesOf(entries, schemaOf(entries));
  if (changes.length === 0) return null;
  return {
    before: changes.map((c) => c.commit),
    unreproduced: changes.flatMap((c) => (c.unreproduced === undefined ? [] : [`${c.commit}: ${c.unreproduced}`])),
  };
};

/**
 * Replays a recorded session offline (DESIGN.md, rule 2): feeds each recorded input through `decide`, never a
 * model, and checks that the decisions equal the recorded ones, and that the wire projection renders server
 * events whose digests equal the recorded ones, byte for byte. Stops at the first divergence. A log whose schema
 * has the hash chain (2 and later; or any log whose first entry carries a digest) is checked against it first, and
 * a missing digest is a broken chain as a changed entry is (divergence `chain`, naming the first revision without
 * one). A log of an earlier release is read as it ran (src/engine/earlier-releases.ts) and its summary says which.
 * @throws Error when the entries are not a session stream (see `stepsOf`).
 */
export const replayEntries = (entries: readonly RecordedEntry[]): ReplayResult => {
  const sessionId = openedSessionOf(entries);
  // A recording changed after it was written (one byte of an append, a zeroed chunk, its digests stripped) would
  // otherwise replay "identical", its changed inputs taken as given.
  if (schemaOf(entries) >= 2 || typeof entries[0]?.metadata.chain === "string") {
    const verdict = verifyChain(entries);
    if (!verdict.ok) {
      const entry = entries.find((e) => e.revision === verdict.revision);
      return {
        ...replaySteps([]),
        inputs: stepsOf(entries).length,
        sessionId,
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
  const result = replaySteps(stepsOf(entries));
  return { ...result, sessionId: result.sessionId ?? sessionId, earlierRelease: earlierReleaseOf(entries) };
};

/**
 * Today's digest of a server event of the chain's era, or, when the recorded one (`recorded`) is another, the digest
 * of the rendering of the earlier release of that era that matches it (`chainEraWireJson`): the entry was appended
 * by that release. Today's digest when none matches (the divergence names it).
 */
const chainEraMatch = (
  today: WireDigest | undefined,
  replayed: { readonly type: string; readonly seq: number | null; readonly json: string } | undefined,
  recorded: WireDigest | undefined,
): WireDigest | undefined => {
  if (today === undefined || replayed === undefined || recorded === undefined || today.sha256 === recorded.sha256)
    return today;
  for (const json of chainEraWireJson(replayed.json)) {
    const earlier = digestOf({ ...replayed, json });
    if (earlier.sha256 === recorded.sha256) return earlier;
  }
  return today;
};

/**
 * Replays recorded steps (see `replayEntries`, which reads them from a log). Each decision's server events are
 * compared as the release that recorded it rendered them (`renderedBefore`). `sessionId` is the session the replay
 * opened (null when none).
 */
export const replaySteps = (steps: readonly RecordedStep[]): ReplayResult => {
  let snapshot = INITIAL_SNAPSHOT;
  let decisions = 0;
  let wireEvents = 0;
  const opened = steps.find((s) => s.input.type === "SessionOpened")?.input;
  const openedId = opened?.type === "SessionOpened" ? opened.data.sessionId : null;
  const result = (divergence: Divergence | null): ReplayResult => ({
    ok: divergence === null,
    sessionId: snapshot.state.phase === "new" ? openedId : snapshot.state.sessionId,
    inputs: steps.length,
    decisions,
    wireEvents,
    divergence,
    state: snapshot.state,
    earlierRelease: null,
  });
  for (const step of steps) {
    // The live step, numbered as the release that recorded each decision numbered its server events.
    const stepped = stepSession(snapshot, step.input, (i) => earlierWireRulesOf(step.decisions[i]?.renderedBefore));
    const count = Math.max(stepped.decisions.length, step.decisions.length);
    for (let i = 0; i < count; i += 1) {
      const replayed = stepped.decisions[i];
      const recorded = step.decisions[i];
      const expectedText = recorded === undefined ? "(nothing)" : envelopeText(recorded.envelope);
      const actualText = replayed === undefined ? "(nothing)" : envelopeText(replayed.envelope);
      if (replayed === undefined || recorded === undefined || expectedText !== actualText) {
        return result({
          revision: step.revision,
          inputType: step.input.type,
          kind: "domain",
          index: i,
          expected: expectedText,
          actual: actualText,
        });
      }
      // The digests the step wrote into its entry; a decision an earlier release rendered otherwise is compared as
      // it rendered it.
      const digests =
        recorded.renderedBefore === undefined
          ? ((stepped.entries[i + 1]?.metadata as { wire?: readonly WireDigest[] } | undefined)?.wire ?? [])
          : replayed.wire.map((w) => digestOf({ ...w, json: earlierWireJson(w.json, recorded.renderedBefore) }));
      const wireCount = Math.max(digests.length, recorded.wire.length);
      for (let w = 0; w < wireCount; w += 1) {
        const e = recorded.wire[w];
        const a = recorded.renderedBefore === undefined ? chainEraMatch(digests[w], replayed.wire[w], e) : digests[w];
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
                : `${a.type} seq ${a.seq} sha256 ${a.sha256}: ${replayed.wire[w]?.json.slice(0, 400)}`,
          });
        }
      }
      decisions += 1;
      wireEvents += digests.length;
    }
    snapshot = stepped.snapshot;
  }
  return result(null);
};
