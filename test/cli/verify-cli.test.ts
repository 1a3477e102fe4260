import { execFile } from "node:child_process";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { INPUT_TYPES } from "../../src/domain/index.ts";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * A recording you can trust (issue 20, part 4): every entry carries a digest chained over the one before, written
 * at append. `duplex verify` and `duplex replay` name the first entry of an export that was changed after it was
 * written: one base64 byte of an append, a zeroed 100 ms chunk, a removed entry, a file cut short.
 */
const run = promisify(execFile);
type Result = { code: number; stdout: string; stderr: string };
const duplex = (...args: string[]): Promise<Result> =>
  run(process.execPath, ["bin/duplex.js", ...args], { timeout: 30_000 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: Result) => error,
  );

interface Line {
  revision: number;
  type: string;
  data: { command?: { type?: string; audio?: { $bin?: [number, number] } } };
  bin: string | null;
}

describe("duplex verify", () => {
  let dataDir = "";
  let file = "";
  let header: Record<string, unknown> = {};
  let lines: Line[] = [];
  let sessionId = "";
  beforeAll(async () => {
    const server = await startTestServer();
    dataDir = server.dataDir;
    const client = await RealtimeClient.connect(server.url);
    sessionId = String(((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id);
    client.send({ type: "session.update", session: { input_audio_format: "pcm16", input_sample_rate_hz: 16000 } });
    await client.waitFor("session.updated", { since: 0 });
    const question = await readWavFile(sharedAudio("question_16k.wav"));
    client.appendSamples(question.samples, { sampleRateHz: 16000, tailMs: 1000 });
    await client.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
    client.send({ type: "session.close" });
    await client.closed;
    await server.close();
    file = join(dataDir, "session.jsonl");
    expect((await duplex("export", "--data", dataDir, "--last", "--out", file)).code).toBe(0);
    const text = (await readFile(file, "utf8")).trim().split("\n");
    header = JSON.parse(text[0] ?? "{}");
    lines = text.slice(1).map((l) => JSON.parse(l) as Line);
  });
  afterAll(async () => rm(dataDir, { recursive: true, force: true }));

  /** Writes the export with `lines` (and the header's entry count fitted to them) and verifies and replays it. */
  const tampered = async (name: string, changed: Line[], fitHeader = true) => {
    const path = join(dataDir, `${name}.jsonl`);
    const head = fitHeader ? { ...header, entries: changed.length } : header;
    await writeFile(path, `${[head, ...changed].map((l) => JSON.stringify(l)).join("\n")}\n`);
    return { verify: await duplex("verify", path), replay: await duplex("replay", path) };
  };
  const appends = () => lines.filter((l) => l.data.command?.type === "input_audio_buffer.append" && l.bin !== null);

  it("verifies a stored session and its export: every entry is the one written", async () => {
    const stored = await duplex("verify", "--data", dataDir, "--session", sessionId);
    expect(stored.code).toBe(0);
    expect(stored.stdout).toMatch(
      new RegExp(
        `^verified ${sessionId}: ${lines.length} entries, each the one written \\(chain head [0-9a-f]{64}\\)\\n$`,
      ),
    );
    const exported = await duplex("verify", file);
    expect(exported.code).toBe(0);
    expect(header.chain_head).toBe(stored.stdout.match(/chain head ([0-9a-f]{64})/)?.[1]);
    expect((await duplex("replay", file)).stdout).toMatch(/: identical \(/);
  });

  it("names the append whose audio lost one base64 byte, and replay refuses the recording", async () => {
    const target = appends()[3] as Line;
    const bin = target.bin ?? "";
    const flipped = `${bin.slice(0, 10)}${bin[10] === "A" ? "B" : "A"}${bin.slice(11)}`;
    const { verify, replay } = await tampered(
      "byte",
      lines.map((l) => (l === target ? { ...l, bin: flipped } : l)),
    );
    expect(verify.code).toBe(1);
    expect(verify.stdout).toContain(
      `BROKEN at revision ${target.revision}: revision ${target.revision} (CommandReceived) is not the entry that was written`,
    );
    expect(replay.code).toBe(1);
    expect(replay.stdout).toContain("the recording was changed after it was written");
  });

  it("names the append whose 100 ms of audio were zeroed", async () => {
    const target = appends()[5] as Line;
    const bytes = Buffer.from(target.bin ?? "", "base64");
    const [offset, length] = target.data.command?.audio?.$bin ?? [0, 0];
    expect(length).toBe(3200);
    bytes.fill(0, offset, offset + length);
    const { verify } = await tampered(
      "zeroed",
      lines.map((l) => (l === target ? { ...l, bin: bytes.toString("base64") } : l)),
    );
    expect(verify.code).toBe(1);
    expect(verify.stdout).toContain(`BROKEN at revision ${target.revision}:`);
  });

  it("replay --recompute-vad runs Silero again on the recorded audio: none differs in the export, and a zeroed chunk of speech is found", async () => {
    const clean = JSON.parse((await duplex("replay", file, "--recompute-vad", "--json")).stdout) as {
      vad: { appends: number; frames: number; max_abs_diff: number; first_over: unknown };
    };
    expect(clean.vad.appends).toBe(appends().length);
    expect(clean.vad.frames).toBeGreaterThan(clean.vad.appends * 2);
    expect(clean.vad).toMatchObject({ max_abs_diff: 0, first_over: null });
    // 1 s into the question, in its speech: zeroed, its probabilities fall from the recorded ones.
    const target = appends()[10] as Line;
    const bytes = Buffer.from(target.bin ?? "", "base64");
    const [offset, length] = target.data.command?.audio?.$bin ?? [0, 0];
    bytes.fill(0, offset, offset + length);
    const path = join(dataDir, "zeroed-vad.jsonl");
    await writeFile(
      path,
      `${[header, ...lines.map((l) => (l === target ? { ...l, bin: bytes.toString("base64") } : l))].map((l) => JSON.stringify(l)).join("\n")}\n`,
    );
    const zeroed = await duplex("replay", path, "--recompute-vad");
    expect(zeroed.stdout).toMatch(
      new RegExp(
        `frames differ by more than 0\\.001, the first at revision ${target.revision} frame \\d+ \\(recorded 0\\.\\d+, now 0\\.\\d+\\)`,
      ),
    );
  });

  it("names where an entry was removed, and a file cut short by its header's chain head", async () => {
    const removed = lines[7] as Line;
    const gap = await tampered(
      "gap",
      lines.filter((l) => l !== removed),
    );
    expect(gap.verify.code).toBe(1);
    expect(gap.verify.stdout).toContain(
      `BROKEN at revision ${removed.revision + 1}: revision ${removed.revision + 1} follows revision ${removed.revision - 1}: 1 entry is missing before it`,
    );
    const cut = await tampered("cut", lines.slice(0, -3));
    expect(cut.verify.code).toBe(1);
    expect(cut.verify.stdout).toContain(
      `BROKEN at revision ${lines.length - 3}: the file ends at revision ${lines.length - 4}`,
    );
  });

  it("replay --diff explains a divergence: the input that produced it, the inputs before, the paths that differ", async () => {
    // A recording without its chain and its schema (as one written before chains) whose decided transcript was edited: the chain
    // cannot catch it, the replay does.
    const unchained = lines.map((l) => {
      const {
        chain: _chain,
        schema: _schema,
        ...metadata
      } = (l as unknown as { metadata: Record<string, unknown> }).metadata;
      return { ...l, metadata };
    }) as Line[];
    const ended = unchained.find((l) => l.type === "ResponseEnded") as Line & { data: { transcript: string } };
    const edited = unchained.map((l) =>
      l === ended ? { ...l, data: { ...ended.data, transcript: "Something else entirely." } } : l,
    );
    const path = join(dataDir, "edited.jsonl");
    const { chain_head: _head, schema: _headerSchema, ...plainHeader } = header as typeof header & { schema?: number };
    await writeFile(path, `${[plainHeader, ...edited].map((l) => JSON.stringify(l)).join("\n")}\n`);
    const input = [...unchained].reverse().find((l) => l.revision < ended.revision && isInput(l));
    const diff = await duplex("replay", path, "--diff");
    expect(diff.code).toBe(1);
    const out = diff.stdout.split("\n");
    expect(out[0]).toMatch(
      new RegExp(`^replay of sess_\\w+: DIVERGES at revision ${input?.revision}, decision #\\d+ of the input$`),
    );
    expect(out[1]).toMatch(new RegExp(`^  the input: {5}revision ${input?.revision}  \\S+  ${input?.type}`));
    expect(out).toContain("  recorded and replayed differ at:");
    expect(out).toContain(
      '    data.transcript: recorded "Something else entirely." | replayed "I heard 4.1 seconds of speech, and this is how it sounded."'.replace(
        "4.1",
        transcriptSeconds(ended),
      ),
    );
    const json = JSON.parse((await duplex("replay", path, "--json")).stdout) as {
      ok: boolean;
      explanation: { differences: { path: string }[]; inputs_before: unknown[] };
    };
    expect(json.ok).toBe(false);
    expect(json.explanation.differences.map((d) => d.path)).toEqual(["data.transcript"]);
    expect(json.explanation.inputs_before).toHaveLength(3);
  });
});

const isInput = (l: Line): boolean => (INPUT_TYPES as readonly string[]).includes(l.type);
/** The seconds the echo's transcript of `ended` names (the recorded, unedited one). */
const transcriptSeconds = (ended: { data: { transcript: string } }): string =>
  /(\d+\.\d)/.exec(ended.data.transcript)?.[1] ?? "";
