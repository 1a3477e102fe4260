import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { evolve, initialState } from "../../src/domain/index.ts";
import { LOG_SCHEMA_VERSION, LogSchemaError, schemaOf, stepsOf, verifyChain } from "../../src/engine/index.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import { toHistory } from "../../src/projections/index.ts";
import { replayEntries } from "../../src/replay/index.ts";

/**
 * Every recorded session under replays/ replays offline to the same domain and wire events (BEHAVIOUR.md, 15), and
 * so does the frozen one of replays/frozen/ (issue 20, part 5): recorded once in the log's schema version 2 and
 * never re-recorded, so a change that stops old logs from replaying fails here.
 */
const dir = join(process.cwd(), "replays");
const files = [
  ...readdirSync(dir).filter((f) => f.endsWith(".jsonl")),
  ...readdirSync(join(dir, "frozen"))
    .filter((f) => f.endsWith(".jsonl"))
    .map((f) => join("frozen", f)),
];

describe("recorded sessions", () => {
  it("the corpus holds every kind of session (npm run replays:record records them; the frozen one is apart)", () => {
    expect(files).toEqual([
      "barge-in-resume.jsonl", // server VAD, a barge-in, a dropped socket and a resume, a cancel
      "errors.jsonl", // refused frames, each with its code, and the session goes on
      "g711-input.jsonl", // G.711 mu-law input at 8 kHz
      "question-echo.jsonl", // the demo: the model-native lane, playback acknowledged
      "restart-resume.jsonl", // a restart of the server mid-session, rebuilt from the log and resumed
      "server-vad-speech-60s.jsonl", // server VAD on a minute of speech with pauses
      "tool-call.jsonl", // a tool call and its output, answered
      "turn-lane-text.jsonl", // the turn lane, a text response
      "turn-lane-two-responses.jsonl", // a commit deferred behind the active response
      "upstream-chain-tool-call.jsonl", // the same tool call through an upstream chain
      "frozen/question-echo-schema-2.jsonl",
    ]);
  });

  it.each(files)("%s replays byte for byte", async (file) => {
    const { entries, header } = await readSessionFile(join(dir, file));
    expect(header.entries).toBe(entries.length);
    const result = replayEntries(entries);
    expect(result.divergence).toBeNull();
    expect(result.ok).toBe(true);
    expect(result.decisions).toBe(entries.length - stepsOf(entries).length);
    expect(result.state.phase).toBe("closed");
  });

  it.each(files)("%s: the projections fold to the state the replay reached, and the chain holds", async (file) => {
    const { entries } = await readSessionFile(join(dir, file));
    const folded = stepsOf(entries)
      .flatMap((s) => s.decisions)
      .reduce((state, d) => evolve(state, d.envelope.event), initialState);
    expect(folded).toEqual(replayEntries(entries).state);
    expect(verifyChain(entries)).toMatchObject({ ok: true, entries: entries.length });
  });

  // The demo acknowledges playback as played: each completed answer is heard in full.
  it.each(["question-echo.jsonl", "frozen/question-echo-schema-2.jsonl"])(
    "%s: every answer acknowledged in full is complete in history, a cancelled one is not",
    async (file) => {
      const { entries } = await readSessionFile(join(dir, file));
      const steps = stepsOf(entries);
      const replayed = replayEntries(entries).state;
      const assistant = toHistory(replayed).filter((h) => h.role === "assistant");
      expect(assistant.length).toBeGreaterThanOrEqual(1);
      const ended = steps.flatMap((s) => s.decisions).filter((d) => d.envelope.event.type === "ResponseEnded");
      const cancelled = ended.filter((d) => (d.envelope.event.data as { status: string }).status === "cancelled");
      expect(assistant.filter((h) => h.status === "completed").length).toBe(ended.length - cancelled.length);
    },
  );
});

describe("the log's schema versions", () => {
  const frozen = join(dir, "frozen", "question-echo-schema-2.jsonl");

  it("the frozen session is of schema 2, every entry is the one written, and its export header says so", async () => {
    const { entries, header } = await readSessionFile(frozen);
    expect(schemaOf(entries)).toBe(2);
    expect(header).toMatchObject({ schema: 2, chain_head: entries.at(-1)?.metadata.chain });
    expect(verifyChain(entries)).toMatchObject({ ok: true, entries: entries.length });
  });

  it("a log of schema 1 (no schema, no chain) is read through the upcasters and replays", async () => {
    const { entries } = await readSessionFile(frozen);
    const v1 = entries.map((e) => {
      const { chain: _chain, schema: _schema, ...metadata } = e.metadata;
      return { ...e, metadata: metadata as typeof e.metadata };
    });
    expect(schemaOf(v1)).toBe(1);
    expect(replayEntries(v1)).toMatchObject({ ok: true, divergence: null });
    expect(verifyChain(v1)).toMatchObject({ ok: false, kind: "missing_chain", revision: 0 });
  });

  it("a log of a schema newer than this server's is refused, naming both versions", async () => {
    const { entries } = await readSessionFile(frozen);
    const newer = entries.map((e, i) =>
      i === 0 ? { ...e, metadata: { ...e.metadata, schema: LOG_SCHEMA_VERSION + 1 } } : e,
    );
    expect(() => stepsOf(newer)).toThrow(LogSchemaError);
    expect(() => stepsOf(newer)).toThrow(
      `the log is of schema version ${LOG_SCHEMA_VERSION + 1}, newer than this server's ${LOG_SCHEMA_VERSION}`,
    );
  });
});
