import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Command, InvalidArgumentError } from "commander";
import type { ModelRunner, RecordedEntry } from "../engine/index.ts";
import type { DivergenceExplanation, RedriveResult, ReplayResult, VadRecomputation } from "../replay/index.ts";
import { readSession, type SessionChoice, withSessionOptions } from "./session-source.ts";

// The engine, the replay and the runners are imported when the command runs (`await import`), so that a call loads
// only what it needs (docs/benchmarks.md, "Start").

/** `duplex replay`'s options (commander's camel case). */
type ReplayOptions = SessionChoice & {
  runner?: string;
  speed: string;
  json: boolean;
  diff: boolean;
  recomputeVad: boolean;
};

/**
 * `duplex replay [FILE]` (DESIGN.md, src/cli): replays a recorded session offline and checks it byte for byte; with
 * `--runner CONFIG`, re-drives its client inputs against a live runner and compares behaviour. Exit 0 identical (or
 * the same behaviour), 1 a divergence, 2 a usage error.
 */
export const registerReplayCommand = (program: Command): void => {
  withSessionOptions(
    program
      .command("replay [file]")
      .description(
        "replay a recorded session offline and check it byte for byte (a session FILE, or --session ID or --last in --data's or --config's store); with --runner, re-drive its client inputs against a live runner and compare behaviour",
      ),
  )
    .option(
      "--runner <config>",
      "a deployment YAML whose runner (and profile) the client inputs are re-driven against; `recorded`: the session's own model, played back in step",
    )
    .option("--speed <n>", "with --runner: how much faster than recorded the inputs are sent (inf: back to back)", "1")
    .option("--json", "print the summary as JSON (with the divergence explained, when there is one)", false)
    .option("--diff", "on a divergence: the input that produced it, the inputs before it, and a structural diff", false)
    .option(
      "--recompute-vad",
      "run Silero VAD again on the recorded audio and report how far its probabilities are from the recorded ones, and where",
      false,
    )
    .action(replayAction);
};

const replayAction = async (file: string | undefined, opts: ReplayOptions): Promise<void> => {
  const { schemaOf } = await import("../engine/index.ts");
  const { explainDivergence, replayEntries } = await import("../replay/index.ts");
  const read = await readSession(file, opts);
  if (read === null) return;
  const { entries } = read;
  if (opts.runner !== undefined) {
    process.exitCode = await redriveCommand(entries, opts.runner, opts.speed, opts.json);
    return;
  }
  const result = replayEntries(entries);
  const vad = opts.recomputeVad ? await recomputeVadOf(entries) : null;
  const d = result.divergence;
  const explanation = d === null || d.kind === "chain" ? null : explainDivergence(entries, d);
  if (opts.json) {
    const summary = {
      ok: result.ok,
      session_id: result.sessionId,
      inputs: result.inputs,
      decisions: result.decisions,
      wire_events: result.wireEvents,
      divergence: result.divergence,
      ...(result.earlierRelease === null ? {} : { earlier_release: result.earlierRelease }),
      ...(explanation === null ? {} : { explanation }),
      ...(vad === null ? {} : { vad }),
    };
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  } else {
    process.stdout.write(replayText(result, opts.diff ? explanation : null, earlierLines(result, schemaOf(entries))));
    if (vad !== null) process.stdout.write(vadText(vad));
  }
  process.exitCode = result.ok ? 0 : 1;
};

/** A log of an earlier release is read as it ran: which release, and what of it replay cannot redo (text lines). */
const earlierLines = (result: ReplayResult, schema: unknown): string => {
  const earlier = result.earlierRelease;
  if (earlier === null) return "";
  const unreproduced =
    result.ok || earlier.unreproduced.length === 0
      ? ""
      : `  of such a release, replay does not reproduce:\n${earlier.unreproduced.map((u) => `    ${u}\n`).join("")}`;
  return `  written by a release before ${earlier.before[0]} (log schema ${schema}), read as it ran: docs/log-format.md, "Logs of earlier releases"\n${unreproduced}`;
};

/** The replay's verdict as text; `explanation` (with `--diff`) shows where a divergence differs. */
const replayText = (result: ReplayResult, explanation: DivergenceExplanation | null, earlier: string): string => {
  const d = result.divergence;
  if (result.ok)
    return `replay of ${result.sessionId}: identical (${result.inputs} inputs, ${result.decisions} decisions, ${result.wireEvents} server events)\n${earlier}`;
  if (d?.kind === "chain")
    return `replay of ${result.sessionId}: the recording was changed after it was written: ${d.actual} (duplex verify checks a log without replaying it)\n`;
  if (explanation === null || d === null)
    return `replay of ${result.sessionId}: DIVERGES at revision ${d?.revision} (${d?.inputType}), ${d?.kind} #${d?.index}\n  recorded: ${d?.expected.slice(0, 2000)}\n  replayed: ${d?.actual.slice(0, 2000)}\n  (--diff shows where they differ)\n${earlier}`;
  const line = (i: DivergenceExplanation["input"]) =>
    `revision ${i.revision}  ${i.at}  ${i.type}${i.command === null ? "" : ` ${i.command}`}`;
  return (
    [
      `replay of ${result.sessionId}: DIVERGES at revision ${d.revision}, ${d.kind === "domain" ? "decision" : "server event"} #${d.index} of the input`,
      `  the input:     ${line(explanation.input)}`,
      "  the inputs before it:",
      ...explanation.inputs_before.map((i) => `    ${line(i)}`),
      "  recorded and replayed differ at:",
      ...explanation.differences.map(
        (x) =>
          `    ${x.path}: recorded ${JSON.stringify(x.recorded) ?? "(nothing)"} | replayed ${JSON.stringify(x.replayed) ?? "(nothing)"}`,
      ),
      "",
    ].join("\n") + earlier
  );
};

/** `--recompute-vad`'s figures as text. */
const vadText = (vad: VadRecomputation): string => {
  const f = vad.first_over;
  return `VAD recomputed on ${vad.appends} appends (${vad.frames} frames): max |difference| ${vad.max_abs_diff.toFixed(6)}, mean ${vad.mean_abs_diff.toFixed(6)}; ${vad.frames_over_tolerance} frames differ by more than ${vad.tolerance}${f === null ? "" : `, the first at revision ${f.revision} frame ${f.frame} (recorded ${f.recorded.toFixed(6)}, now ${f.recomputed.toFixed(6)})`}\n`;
};

/** `replay --recompute-vad`: Silero run again over the recording's appends. */
const recomputeVadOf = async (entries: readonly RecordedEntry[]): Promise<VadRecomputation> => {
  const { recomputeVad } = await import("../replay/index.ts");
  const { createSileroVad } = await import("../infra/vad/index.ts");
  const model = await createSileroVad();
  try {
    return await recomputeVad(entries, model);
  } finally {
    await model.close();
  }
};

/**
 * `duplex replay FILE --runner CONFIG`: re-drives the session's client inputs against the configured runner, in a
 * store of its own that is removed afterwards, and prints where the behaviour first differs. Returns the exit code.
 * @throws InvalidArgumentError for a `--speed` that is not a positive number or `inf`.
 */
const redriveCommand = async (
  entries: readonly RecordedEntry[],
  configPath: string,
  speedText: string,
  json: boolean,
): Promise<number> => {
  const { stepsOf } = await import("../engine/index.ts");
  const { redrive } = await import("../replay/index.ts");
  const { createResampler, createSpeexStreamResampler } = await import("../infra/audio/index.ts");
  const { loadConfig } = await import("../infra/config.ts");
  const { createSqliteEventStore } = await import("../infra/event-store/index.ts");
  const { resolveProfile, withModelProfile } = await import("../infra/runners/profile.ts");
  const { createConfiguredRunner } = await import("../server/index.ts");
  const { createRecordedRunner } = await import("../infra/runners/recorded.ts");
  const speed = speedText === "inf" ? Number.POSITIVE_INFINITY : Number(speedText);
  if (!(speed > 0)) throw new InvalidArgumentError(`--speed: expected a positive number or inf, got ${speedText}`);
  // `recorded`: the session's own model played back, paced by the inputs, so it must behave exactly as recorded.
  const playback = configPath === "recorded" ? createRecordedRunner(entries, { paced: true }) : null;
  let runner: ModelRunner;
  if (playback !== null) runner = playback;
  else {
    const config = await loadConfig(configPath);
    const profile = config.runner.profile === undefined ? null : resolveProfile(config.runner.profile);
    const base = await createConfiguredRunner(config.runner, profile);
    runner = profile === null ? base : withModelProfile(base, profile);
  }
  const dir = await mkdtemp(join(tmpdir(), "duplex-redrive-"));
  const store = createSqliteEventStore({ path: join(dir, "duplex.sqlite") });
  try {
    const result = await redrive(entries, {
      store,
      runner,
      createResampler,
      createOutputResampler: createSpeexStreamResampler,
      speed,
      ...(playback === null ? {} : { playback }),
    });
    const opened = stepsOf(entries).find((s) => s.input.type === "SessionOpened")?.input;
    const id = opened?.type === "SessionOpened" ? opened.data.sessionId : "(unknown)";
    process.stdout.write(
      json
        ? `${JSON.stringify({ ok: result.ok, session_id: id, runner: runner.name, client_inputs: result.clientInputs, divergence: result.divergence })}\n`
        : redriveText(result, id, runner.name),
    );
    return result.ok ? 0 : 1;
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
};

/** The re-drive's verdict as text: the same behaviour, or the first line that differs with the lines around it. */
const redriveText = (result: RedriveResult, id: string, runner: string): string => {
  if (result.ok)
    return `re-drive of ${id} against ${runner}: same behaviour (${result.clientInputs} client inputs, ${result.live.length} behaviour lines)\n`;
  const d = result.divergence;
  return [
    `re-drive of ${id} against ${runner}: DIFFERS at behaviour line ${d?.index} (#N is the client input it followed)`,
    `  recorded: ${d?.recorded}`,
    `  live:     ${d?.live}`,
    "  recorded around it:",
    ...(d?.recordedContext ?? []).map((l) => `    ${l}`),
    "  live around it:",
    ...(d?.liveContext ?? []).map((l) => `    ${l}`),
    "",
  ].join("\n");
};
