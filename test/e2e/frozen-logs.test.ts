import { execFile } from "node:child_process";
import { copyFile, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EarlierRules, evolve, INPUT_TYPES, initialState } from "../../src/domain/index.ts";
import {
  createEngine,
  EARLIER_CHANGES,
  foldLog,
  LOG_SCHEMA_VERSION,
  type RecordedEntry,
  type RecordedStep,
  type SessionSink,
  STREAM_PREFIX,
  schemaOf,
  stepsOf,
  streamOf,
  verifyChain,
} from "../../src/engine/index.ts";
import { createResampler } from "../../src/infra/audio/index.ts";
import { openEventStore, readSessionFile } from "../../src/infra/event-store/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/sqlite.ts";
import { createEchoRunner } from "../../src/infra/runners/echo.ts";
import { decodeClientFrame } from "../../src/protocol/index.ts";
import { replayEntries, replaySteps } from "../../src/replay/index.ts";

/**
 * Logs are forever (BEHAVIOUR.md, "Logs are forever" and scenario 20; issue 33, part 1). replays/frozen/ holds logs
 * as earlier releases wrote them, byte for byte, never regenerated (STYLE.md): session files taken from git history
 * (`schema-1/<kind>-<commit>.jsonl` is `git show <commit>:replays/<kind>.jsonl`, the recording made by the code of
 * that commit; `detach-<commit>.jsonl` was recorded once by that commit's own engine, run in process from a git
 * worktree of it: a socket dropped, the grace then closing the session; `commit-during-response-f035db7.jsonl` and
 * `restart-unanswered-c049556.jsonl` were recorded once by that commit's own server, run from a git worktree of it: a
 * client commit while a response was active, and a SIGKILL between the end of model-native speech and its answer), the schema-2 recording beside them, and `stores/`, a store file that a release's server wrote
 * (`stores/<name>-<commit>.sqlite`). Each replays identical through today's upcasters, and a log format or store
 * layout without a frozen fixture of the one before it fails here.
 */
const FROZEN = join(process.cwd(), "replays", "frozen");

const filesUnder = async (dir: string, ext: string): Promise<string[]> => {
  const found: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...(await filesUnder(path, ext)));
    else if (entry.name.endsWith(ext)) found.push(path);
  }
  return found.sort();
};

const logs = (await filesUnder(FROZEN, ".jsonl")).map((f) => relative(FROZEN, f));
const stores = (await filesUnder(join(FROZEN, "stores"), ".sqlite")).map((f) => relative(FROZEN, f));
const read = (file: string) => readSessionFile(join(FROZEN, file));

/** The session id a log's `SessionOpened` names. */
const openedIdOf = (entries: readonly RecordedEntry[]): string =>
  String((entries.find((e) => e.type === "SessionOpened")?.data as { sessionId?: string } | undefined)?.sessionId);

/** The layout (`PRAGMA user_version`) of a store file, read from a copy so that nothing touches the fixture. */
const layoutOf = async (file: string, work: string): Promise<number> => {
  const copy = join(work, `layout-${Math.random().toString(36).slice(2)}.sqlite`);
  await copyFile(file, copy);
  const db = new Database(copy, { readonly: true });
  try {
    return db.pragma("user_version", { simple: true }) as number;
  } finally {
    db.close();
  }
};

let work = "";
let currentLayout = 0;
beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "duplex-frozen-"));
  const fresh = createSqliteEventStore({ path: join(work, "fresh.sqlite"), writer: "main" });
  await fresh.close();
  currentLayout = await layoutOf(join(work, "fresh.sqlite"), work);
});
afterAll(async () => rm(work, { recursive: true, force: true }));

describe("the frozen corpus", () => {
  it("holds a log of every schema version up to this server's, and a store a release wrote", async () => {
    const schemas = new Set<number>();
    for (const file of logs) schemas.add(schemaOf((await read(file)).entries));
    for (let v = 1; v <= LOG_SCHEMA_VERSION; v += 1) {
      // A new schema version needs a frozen log of the version before it, recorded by the release before the change.
      expect(schemas, `no frozen log of schema ${v} under replays/frozen/ (add one written by that release)`).toContain(
        v,
      );
    }
    expect([...schemas].every((v) => v <= LOG_SCHEMA_VERSION)).toBe(true);
    expect(stores.length).toBeGreaterThan(0);
    const layouts = await Promise.all(stores.map((s) => layoutOf(join(FROZEN, s), work)));
    // One of an earlier layout, written by a release: the migration on open is what a store must survive.
    expect(currentLayout).toBeGreaterThan(0);
    expect(Math.min(...layouts)).toBeLessThan(currentLayout);
    expect(Math.max(...layouts)).toBeLessThanOrEqual(currentLayout);
  });

  it("names each change of the schema-1 logs by its commit, once, in the order they were made", () => {
    const commits = EARLIER_CHANGES.map((c) => c.commit);
    expect(new Set(commits).size).toBe(commits.length);
    for (const c of commits) expect(c).toMatch(/^[0-9a-f]{7}$/);
  });
});

describe.each(logs)("frozen log %s", (file) => {
  it("replays identical, decision by decision and server event by server event, as the release that wrote it ran", async () => {
    const { entries, header } = await read(file);
    expect(header.entries).toBe(entries.length);
    const result = replayEntries(entries);
    expect(result.divergence).toBeNull();
    expect(result.ok).toBe(true);
    expect(result.decisions).toBe(entries.length - stepsOf(entries).length);
    expect(result.wireEvents).toBeGreaterThan(0);
    expect(result.state.phase).toBe("closed");
    // The summary names the session of the file (issue 33: it said "replay of null").
    expect(result.sessionId).toBe(openedIdOf(entries));
    if (schemaOf(entries) >= 2) expect(verifyChain(entries)).toMatchObject({ ok: true, entries: entries.length });
    else expect(verifyChain(entries)).toMatchObject({ ok: false, kind: "missing_chain", revision: 0 });
  });

  it("folds to the state the replay reached, and rebuilds as a restarted server would", async () => {
    const { entries } = await read(file);
    const folded = stepsOf(entries)
      .flatMap((s) => s.decisions)
      .reduce((state, d) => evolve(state, d.envelope.event), initialState);
    expect(folded).toEqual(replayEntries(entries).state);
    const rebuilt = foldLog(entries);
    expect(rebuilt.state).toEqual(folded);
    expect(rebuilt.revision).toBe(entries.length - 1);
  });
});

/**
 * Which change each schema-1 log is read from: the oldest change its release predates (every later one applies
 * too). Pins the detection, so that a detector that stops seeing its evidence fails here and not as a confusing
 * divergence.
 */
const OLDEST_CHANGE: Readonly<Record<string, string | null>> = {
  "schema-1/question-echo-a7cec7b.jsonl": "42f53f0",
  "schema-1/question-echo-42f53f0.jsonl": "83a7701",
  // A dropped socket decided nothing then: the rule of the release before ea7ac2c.
  "schema-1/detach-42f53f0.jsonl": "ea7ac2c",
  // ea7ac2c detached the session (as today) and lacks all that 83a7701 added.
  "schema-1/detach-ea7ac2c.jsonl": "83a7701",
  "schema-1/question-echo-83a7701.jsonl": "9f798cd",
  "schema-1/barge-in-resume-25f1415.jsonl": "3692e1a",
  "schema-1/barge-in-resume-0c82f0e.jsonl": "4cb232b",
  // Recorded once by f035db7's own server (5a45cdf^): a client commit during a response, answered by nothing.
  "schema-1/commit-during-response-f035db7.jsonl": "5a45cdf",
  "schema-1/question-echo-6e96108.jsonl": "c073d28",
  "schema-1/barge-in-resume-6e96108.jsonl": "387785c",
  // The last release of schema 1 wrote today's shape: nothing to upcast.
  "schema-1/question-echo-387785c.jsonl": null,
  // Recorded once by c049556's own server (1e19abe^): killed after the end of speech, before the answer.
  "schema-1/restart-unanswered-c049556.jsonl": "1e19abe",
};

describe("logs of earlier releases", () => {
  it("every schema-1 log is read from the change its release predates", async () => {
    expect(Object.keys(OLDEST_CHANGE).sort()).toEqual(logs.filter((f) => f.startsWith("schema-1/")));
    for (const [file, commit] of Object.entries(OLDEST_CHANGE)) {
      const { earlierRelease } = replayEntries((await read(file)).entries);
      expect(earlierRelease?.before[0] ?? null, file).toBe(commit);
      if (commit !== null) expect(earlierRelease?.before.at(-1)).toBe(EARLIER_CHANGES.at(-1)?.commit);
    }
  });

  it("a decision changed in an old log diverges at its revision: upcasting proves nothing away", async () => {
    const { entries } = await read("schema-1/question-echo-6e96108.jsonl");
    const started = entries.find((e) => e.type === "ResponseStarted") as RecordedEntry;
    const changed = entries.map((e) =>
      e === started ? { ...e, data: { ...(e.data as object), previousItemId: "item_nobody" } } : e,
    );
    const result = replayEntries(changed);
    expect(result.ok).toBe(false);
    // At the input the ResponseStarted was decided of: the last input before it.
    const input = entries
      .slice(0, entries.indexOf(started))
      .findLast((e) => (INPUT_TYPES as readonly string[]).includes(e.type));
    expect(result.divergence).toMatchObject({ kind: "domain", revision: input?.revision });
  });

  it("a server event digest changed in an old log diverges on the wire", async () => {
    const { entries } = await read("schema-1/barge-in-resume-25f1415.jsonl");
    const resumed = entries.find((e) =>
      (e.metadata.wire as { type: string }[] | undefined)?.some((w) => w.type === "session.resumed"),
    ) as RecordedEntry;
    const wire = (resumed.metadata.wire as { type: string; seq: number | null; sha256: string }[]).map((w) =>
      w.type === "session.resumed" ? { ...w, sha256: "0".repeat(64) } : w,
    );
    const changed = entries.map((e) => (e === resumed ? { ...e, metadata: { ...e.metadata, wire } } : e));
    expect(replayEntries(changed).divergence).toMatchObject({
      kind: "wire",
      expected: expect.stringContaining("0000"),
    });
    expect(replayEntries(entries).ok).toBe(true);
  });

  it("duplex replay FILE names the session and the release that wrote it", async () => {
    const file = join(FROZEN, "schema-1/question-echo-6e96108.jsonl");
    const { stdout } = await promisify(execFile)(process.execPath, ["bin/duplex.js", "replay", file], {
      timeout: 30_000,
    });
    const { entries } = await readSessionFile(file);
    expect(stdout).toMatch(new RegExp(`^replay of ${openedIdOf(entries)}: identical \\(`));
    expect(stdout).toContain("written by a release before c073d28 (log schema 1)");
  });
});

/**
 * Each rule of an earlier release (`EarlierRules`) and a frozen log that holds a decision only that rule makes: the
 * log replayed with the rule forced off (taken out of its `SessionOpened.rules` and `SessionCreated.rules` after
 * upcasting) diverges at that revision. Null: no frozen log shows the rule yet (said in the test's name).
 */
const RULE_PROOF: Readonly<Record<keyof EarlierRules, { file: string; revision: number; input: string } | null>> = {
  noOverlapDecisions: { file: "schema-1/question-echo-a7cec7b.jsonl", revision: 69, input: "CommandReceived" },
  speechNeverHeldBack: { file: "schema-1/question-echo-42f53f0.jsonl", revision: 61, input: "CommandReceived" },
  attachmentsDecideNothing: { file: "schema-1/detach-42f53f0.jsonl", revision: 24, input: "AttachmentChanged" },
  inputRateOfRunner: { file: "schema-1/question-echo-42f53f0.jsonl", revision: 0, input: "SessionOpened" },
  everyOverlapReported: { file: "schema-1/question-echo-83a7701.jsonl", revision: 76, input: "CommandReceived" },
  serverVadCommitsWholeBuffer: {
    file: "schema-1/barge-in-resume-25f1415.jsonl",
    revision: 165,
    input: "CommandReceived",
  },
  commitDuringResponseUnanswered: {
    file: "schema-1/commit-during-response-f035db7.jsonl",
    revision: 95,
    input: "CommandReceived",
  },
  messageOpensWithResponse: { file: "schema-1/barge-in-resume-0c82f0e.jsonl", revision: 61, input: "CommandReceived" },
  speechEventsWithoutTurnDetection: {
    file: "schema-1/question-echo-6e96108.jsonl",
    revision: 6,
    input: "CommandReceived",
  },
  bargeInAfterShortAck: { file: "schema-1/barge-in-resume-6e96108.jsonl", revision: 0, input: "SessionOpened" },
  noUtteranceResubmitted: {
    file: "schema-1/restart-unanswered-c049556.jsonl",
    revision: 80,
    input: "SessionRecovered",
  },
  listenNamesNoResponse: {
    file: "../../test/fixtures/earlier-releases/response-listen-precreated.jsonl",
    revision: 6,
    input: "StageOutputReceived",
  },
  noUtteranceCarriedOver: {
    file: "../../test/fixtures/earlier-releases/move-mid-speech-native.jsonl",
    revision: 35,
    input: "SessionRecovered",
  },
  noTurnEvents: {
    file: "../../test/fixtures/earlier-releases/barge-in-signals.jsonl",
    revision: 11,
    input: "CommandReceived",
  },
  resumedWithoutSession: {
    file: "../../test/fixtures/earlier-releases/move-mid-speech-native.jsonl",
    revision: 37,
    input: "AttachmentChanged",
  },
  responseWithoutInputAnswered: {
    file: "../../test/fixtures/earlier-releases/response-create-without-input.jsonl",
    revision: 4,
    input: "CommandReceived",
  },
  noToolLedger: {
    file: "../../test/fixtures/earlier-releases/tool-ledger-unchecked.jsonl",
    revision: 4,
    input: "CommandReceived",
  },
};

/** `steps` with `rule` taken out of the rules the upcaster named (in the input and in the decision it made). */
const withoutRule = (steps: readonly RecordedStep[], rule: keyof EarlierRules): RecordedStep[] => {
  const drop = <T extends { rules?: EarlierRules }>(data: T): T => {
    const { [rule]: _off, ...rules } = data.rules ?? {};
    const { rules: _all, ...rest } = data;
    return (Object.keys(rules).length === 0 ? rest : { ...rest, rules }) as T;
  };
  return steps.map((s) =>
    s.input.type !== "SessionOpened"
      ? s
      : {
          ...s,
          input: { ...s.input, data: drop(s.input.data) },
          decisions: s.decisions.map((d) =>
            d.envelope.event.type !== "SessionCreated"
              ? d
              : {
                  ...d,
                  envelope: { ...d.envelope, event: { ...d.envelope.event, data: drop(d.envelope.event.data) } },
                },
          ),
        },
  );
};

describe("each rule of an earlier release is held by a frozen log", () => {
  it.each(Object.entries(RULE_PROOF))("%s: the log diverges with the rule forced off", async (rule, proof) => {
    if (proof === null) {
      // Reported, not hidden: no release's log that shows this rule is frozen yet (see RULE_PROOF).
      console.warn(`no frozen log shows the earlier rule ${rule}`);
      return;
    }
    const { entries } = await read(proof.file);
    const steps = stepsOf(entries);
    const opened = steps[0]?.input;
    expect(opened?.type === "SessionOpened" ? opened.data.rules?.[rule as keyof EarlierRules] : undefined).toBe(true);
    expect(replaySteps(steps).ok).toBe(true);
    const off = replaySteps(withoutRule(steps, rule as keyof EarlierRules));
    expect(off.ok).toBe(false);
    expect(off.divergence).toMatchObject({ kind: "domain", revision: proof.revision, inputType: proof.input });
  });
});

describe.each(stores)("frozen store %s", (store) => {
  it("opens migrated by the server's code, lists its sessions, and each replays identical", async () => {
    const dir = await mkdtemp(join(work, "store-"));
    const path = join(dir, "duplex.sqlite");
    await copyFile(join(FROZEN, store), path);
    const before = await layoutOf(path, work);
    expect(before).toBeLessThan(currentLayout);
    const opened = await openEventStore({ kind: "sqlite", path });
    try {
      const page = await opened.store.listSummaries({ prefix: STREAM_PREFIX, limit: 100 });
      const streams = await opened.store.listStreams(STREAM_PREFIX);
      expect(page.summaries.map((s) => s.stream)).toEqual(streams.map((s) => s.stream));
      expect(streams.length).toBeGreaterThan(0);
      for (const { stream, summary } of page.summaries) {
        const entries = await opened.store.read(stream);
        expect(summary).toMatchObject({ id: stream.slice(STREAM_PREFIX.length) });
        expect(["closed", "detached"]).toContain(summary.state);
        expect(summary.revision).toBe(entries.length - 1);
        const result = replayEntries(entries);
        expect(result.divergence, stream).toBeNull();
        expect(result).toMatchObject({ ok: true, sessionId: openedIdOf(entries) });
        // Closed, or left detached by its release (resumed after an upgrade below).
        expect(result.state.phase).toBe(summary.state === "closed" ? "closed" : "open");
        expect(result.earlierRelease?.before[0]).toBe("387785c");
      }
    } finally {
      await opened.store.close();
      opened.unlock();
    }
    expect(await layoutOf(path, work)).toBe(currentLayout);
  });
});

/**
 * `stores/detached-question-c073d28.sqlite`: the server of 387785c^ (c073d28) answered question_16k.wav, then the
 * socket dropped and the server stopped, leaving the session detached. The client kept what it needs to resume.
 */
const DETACHED = {
  store: "stores/detached-question-c073d28.sqlite",
  sessionId: "sess_4e1966503f4d30c9e088b30e70a3c287",
  resumeToken: "Or5EsEJ4mMvRSlyM3ZqMqzQ-jfk50VAoCgaplArwdQU",
  lastReceivedSeq: 45,
  lastAt: 1_796_306_784_546,
} as const;

describe("a session that spans an upgrade", () => {
  it("left detached by the earlier release, is recovered, resumed and closed by this one, and replays identical", async () => {
    const dir = await mkdtemp(join(work, "span-"));
    const path = join(dir, "duplex.sqlite");
    await copyFile(join(FROZEN, DETACHED.store), path);
    const store = createSqliteEventStore({ path, writer: "main" });
    let clock = DETACHED.lastAt + 2_000;
    const engine = createEngine({ store, runner: createEchoRunner(), vad: null, createResampler, now: () => clock });
    const sent: Record<string, unknown>[] = [];
    const sink: SessionSink = {
      send: (json) => sent.push(JSON.parse(json) as Record<string, unknown>),
      replaced: () => undefined,
      failed: () => undefined,
      ended: () => undefined,
    };
    try {
      expect(await engine.recover()).toEqual([DETACHED.sessionId]);
      const host = engine.resume(
        {
          type: "session.resume",
          eventId: null,
          sessionId: DETACHED.sessionId,
          resumeToken: DETACHED.resumeToken,
          lastReceivedSeq: DETACHED.lastReceivedSeq,
        },
        sink,
      );
      if ("code" in host) throw new Error(`resume refused: ${host.code} ${host.message}`);
      await host.settled();
      expect(sent[0]).toMatchObject({ type: "session.resumed", session_id: DETACHED.sessionId });
      clock += 1_000;
      const close = JSON.stringify({ type: "session.close", event_id: "evt_close" });
      void host.submit(decodeClientFrame(close, Buffer.byteLength(close), { inputRateHz: 16_000 }));
      await host.settled();
      expect(sent.map((e) => e.type)).toContain("session.closed");

      const entries = await store.read(streamOf(DETACHED.sessionId));
      // The entries this release appended carry digests (from the genesis on, after the old ones); the old ones none.
      const firstChained = entries.findIndex((e) => typeof e.metadata.chain === "string");
      expect(entries[firstChained]?.type).toBe("SessionRecovered");
      expect(entries.slice(firstChained).every((e) => typeof e.metadata.chain === "string")).toBe(true);
      expect(entries.slice(0, firstChained).some((e) => "chain" in e.metadata)).toBe(false);
      const result = replayEntries(entries);
      expect(result.divergence).toBeNull();
      expect(result).toMatchObject({ ok: true, sessionId: DETACHED.sessionId });
      expect(result.earlierRelease?.before[0]).toBe("387785c");
      expect(result.state.phase).toBe("closed");
    } finally {
      await engine.close();
      await store.close();
    }
  });
});

describe("a log whose schema has the chain carries it (issue 33, part 1)", () => {
  const frozen = "question-echo-schema-2.jsonl";
  const strip = (e: RecordedEntry): RecordedEntry => {
    const { chain: _chain, ...metadata } = e.metadata;
    return { ...e, metadata: metadata as RecordedEntry["metadata"] };
  };

  it("every digest removed: replay refuses it at revision 0, as verify does", async () => {
    const { entries } = await read(frozen);
    const stripped = entries.map(strip);
    expect(schemaOf(stripped)).toBe(2);
    const result = replayEntries(stripped);
    expect(result.ok).toBe(false);
    expect(result.divergence).toMatchObject({ kind: "chain", revision: 0, inputType: "SessionOpened" });
    expect(result.divergence?.actual).toContain("revision 0 (SessionOpened) carries no chain digest");
    expect(result.sessionId).toBe(openedIdOf(entries));
    expect(verifyChain(stripped)).toMatchObject({ ok: false, kind: "missing_chain", revision: 0 });
  });

  it("one digest removed in the middle: replay names that revision", async () => {
    const { entries } = await read(frozen);
    const middle = entries[Math.floor(entries.length / 2)] as RecordedEntry;
    const result = replayEntries(entries.map((e) => (e === middle ? strip(e) : e)));
    expect(result.ok).toBe(false);
    expect(result.divergence).toMatchObject({ kind: "chain", revision: middle.revision, inputType: middle.type });
    expect(result.divergence?.actual).toContain(`revision ${middle.revision} (${middle.type}) carries no chain digest`);
  });
});
