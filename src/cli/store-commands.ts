import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Command, InvalidArgumentError } from "commander";
import type { TracingConfig } from "../domain/index.ts";
import { parseDurationMs } from "../engine/duration.ts";
import type { RecordedEntry } from "../engine/index.ts";
import type { SpanSummary } from "../projections/index.ts";
import type { DivergenceExplanation, SessionReport } from "../replay/index.ts";
import { positive } from "./args.ts";
import { registerReindexCommand } from "./reindex.ts";
import {
  isSessionFile,
  openStoreOf,
  readSession,
  type SessionChoice,
  type StoreChoice,
  type StoreWrite,
  storeWriteError,
  withSessionOptions,
  withStoreOptions,
} from "./session-source.ts";

// The engine, the store and the runners are imported when a command runs (`await import`), so that a call loads
// only what it needs (docs/benchmarks.md, "Start").

/**
 * The commands that read a store (DESIGN.md, src/cli): `replay`, `export`, `sessions`, `show`, `verify`, `trace`,
 * `timeline`, `gc` and `reindex`. Each names its store and session as session-source.ts says (`--data DIR` or
 * `--config FILE`; `--session ID`, `--last` or a session FILE) and, but `gc` (without `--dry-run`) and `reindex`,
 * opens it read-only. Exit codes as main.ts says: 0 success, 1 a failed check, 2 a usage error.
 */

/**
 * A session's `tracing` labels as `duplex sessions` prints them: `auto`, or `workflow=... group=... key=value` (the
 * metadata's values as JSON); empty without labels.
 */
export const labelsOf = (tracing: TracingConfig | null): string => {
  if (tracing === null) return "";
  if (tracing === "auto") return "auto";
  return [
    ...(tracing.workflowName === undefined ? [] : [`workflow=${tracing.workflowName}`]),
    ...(tracing.groupId === undefined ? [] : [`group=${tracing.groupId}`]),
    ...Object.entries(tracing.metadata ?? {}).map(([key, value]) => `${key}=${JSON.stringify(value)}`),
  ].join(" ");
};

/** The worst time to first audio of a session's turns, ms: from the end of speech, else from `response.created`. */
const slowestFirstAudio = (spans: readonly SpanSummary[]): number | null => {
  const of = (name: string) => spans.find((s) => s.span === name)?.worst ?? null;
  return of("speech_stop_to_first_audio") ?? of("response_created_to_first_audio");
};

/** ms since `from`, or `-` when either is unknown. */
const after = (from: number | null, at: number | null): string =>
  from === null || at === null ? "-" : String(Math.round(at - from));

/** `duplex show` as text: the session's lines, its errors, history, playback, and with `turns` the turn ledger. */
export const renderReport = (r: SessionReport, turns: boolean): string => {
  const lines = [
    `session ${r.session_id}  ${r.state}  model ${r.model ?? "-"}`,
    `opened ${r.opened_at}, ${r.duration_s.toFixed(1)} s, ${r.responses} responses, revision ${r.revision} (${r.inputs} inputs, ${r.decisions} decisions)`,
  ];
  lines.push(r.errors.length === 0 ? "errors: none" : "errors:");
  for (const e of r.errors) lines.push(`  revision ${e.revision}: ${e.code}: ${e.message}`);
  lines.push("history (as heard):");
  for (const item of r.history)
    lines.push(`  ${item.role}: ${item.text === "" ? "(audio, no transcript)" : item.text}`);
  lines.push("playback (ms of audio: generated / sent / played / heard):");
  for (const p of r.playback)
    lines.push(
      `  ${p.responseId}: ${Math.round(p.ledger.generatedMs)} / ${Math.round(p.ledger.sentMs)} / ${Math.round(p.ledger.playedMs)} / ${Math.round(p.ledger.committedMs)}${p.truncatedAtMs === null ? "" : `, truncated at ${Math.round(p.truncatedAtMs)}`}`,
    );
  if (turns) {
    lines.push(
      "turns (ms after the speech stopped, or after response.created without speech):",
      "  turn  response                     status      commit  created  first_audio  first_ack  ended  barge_in  generated  heard",
    );
    for (const t of r.turns) {
      const base = t.speechStoppedAt ?? t.responseCreatedAt;
      lines.push(
        `  ${String(t.index).padStart(4)}  ${(t.responseId ?? "-").padEnd(27)}  ${(t.status ?? "-").padEnd(10)}  ${after(base, t.committedAt).padStart(6)}  ${after(base, t.responseCreatedAt).padStart(7)}  ${after(base, t.firstAudioAt).padStart(11)}  ${after(base, t.firstAckAt).padStart(9)}  ${after(base, t.responseEndedAt).padStart(5)}  ${after(base, t.bargeInAt).padStart(8)}  ${String(Math.round(t.generatedMs)).padStart(9)}  ${t.heardMs === null ? "-".padStart(5) : String(Math.round(t.heardMs)).padStart(5)}`,
      );
    }
    lines.push("spans (ms):", "  span                               samples    p50    p95  worst");
    for (const s of r.spans)
      lines.push(
        `  ${s.span.padEnd(33)}  ${String(s.samples).padStart(7)}  ${String(s.p50 ?? "-").padStart(5)}  ${String(s.p95 ?? "-").padStart(5)}  ${String(s.worst ?? "-").padStart(5)}`,
      );
  }
  return `${lines.join("\n")}\n`;
};

/** Registers `replay`, `export`, `sessions`, `show`, `verify`, `gc` and `reindex` on `program`. */
export const registerStoreCommands = (program: Command): void => {
  registerReindexCommand(program);
  withSessionOptions(
    program
      .command("replay [file]")
      .description(
        "replay a recorded session offline and check it byte for byte (a session FILE, or --session ID or --last in --data's or --config's store); with --runner, re-drive its client inputs against a live runner and compare behaviour",
      ),
  )
    .option("--runner <config>", "a deployment YAML whose runner (and profile) the client inputs are re-driven against")
    .option("--speed <n>", "with --runner: how much faster than recorded the inputs are sent (inf: back to back)", "1")
    .option("--json", "print the summary as JSON (with the divergence explained, when there is one)", false)
    .option("--diff", "on a divergence: the input that produced it, the inputs before it, and a structural diff", false)
    .option(
      "--recompute-vad",
      "run Silero VAD again on the recorded audio and report how far its probabilities are from the recorded ones, and where",
      false,
    )
    .action(
      async (
        file: string | undefined,
        opts: SessionChoice & {
          runner?: string;
          speed: string;
          json: boolean;
          diff: boolean;
          recomputeVad: boolean;
        },
      ) => {
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
        // A log of an earlier release is read as it ran: the summary says which, and what of it replay cannot redo.
        const earlier = result.earlierRelease;
        const earlierLines =
          earlier === null
            ? ""
            : `  written by a release before ${earlier.before[0]} (log schema ${schemaOf(entries)}), read as it ran: docs/log-format.md, "Logs of earlier releases"\n${
                result.ok || earlier.unreproduced.length === 0
                  ? ""
                  : `  of such a release, replay does not reproduce:\n${earlier.unreproduced.map((u) => `    ${u}\n`).join("")}`
              }`;
        if (opts.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
        else if (result.ok) {
          process.stdout.write(
            `replay of ${result.sessionId}: identical (${result.inputs} inputs, ${result.decisions} decisions, ${result.wireEvents} server events)\n${earlierLines}`,
          );
        } else if (result.divergence?.kind === "chain") {
          process.stdout.write(
            `replay of ${result.sessionId}: the recording was changed after it was written: ${result.divergence.actual} (duplex verify checks a log without replaying it)\n`,
          );
        } else if (opts.diff && explanation !== null && d !== null) {
          const line = (i: DivergenceExplanation["input"]) =>
            `revision ${i.revision}  ${i.at}  ${i.type}${i.command === null ? "" : ` ${i.command}`}`;
          process.stdout.write(
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
            ].join("\n") + earlierLines,
          );
        } else {
          process.stdout.write(
            `replay of ${result.sessionId}: DIVERGES at revision ${d?.revision} (${d?.inputType}), ${d?.kind} #${d?.index}\n  recorded: ${d?.expected.slice(0, 2000)}\n  replayed: ${d?.actual.slice(0, 2000)}\n  (--diff shows where they differ)\n${earlierLines}`,
          );
        }
        if (vad !== null && !opts.json) {
          const f = vad.first_over;
          process.stdout.write(
            `VAD recomputed on ${vad.appends} appends (${vad.frames} frames): max |difference| ${vad.max_abs_diff.toFixed(6)}, mean ${vad.mean_abs_diff.toFixed(6)}; ${vad.frames_over_tolerance} frames differ by more than ${vad.tolerance}${f === null ? "" : `, the first at revision ${f.revision} frame ${f.frame} (recorded ${f.recorded.toFixed(6)}, now ${f.recomputed.toFixed(6)})`}\n`,
          );
        }
        process.exitCode = result.ok ? 0 : 1;
      },
    );

  /** `replay --recompute-vad`: Silero run again over the recording's appends. */
  const recomputeVadOf = async (entries: readonly RecordedEntry[]) => {
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
    const speed = speedText === "inf" ? Number.POSITIVE_INFINITY : Number(speedText);
    if (!(speed > 0)) throw new InvalidArgumentError(`--speed: expected a positive number or inf, got ${speedText}`);
    const config = await loadConfig(configPath);
    const profile = config.runner.profile === undefined ? null : resolveProfile(config.runner.profile);
    const base = await createConfiguredRunner(config.runner, profile);
    const runner = profile === null ? base : withModelProfile(base, profile);
    const dir = await mkdtemp(join(tmpdir(), "duplex-redrive-"));
    const store = createSqliteEventStore({ path: join(dir, "duplex.sqlite") });
    try {
      const result = await redrive(entries, {
        store,
        runner,
        createResampler,
        createOutputResampler: createSpeexStreamResampler,
        speed,
      });
      const sessionId = stepsOf(entries).find((s) => s.input.type === "SessionOpened")?.input;
      const id = sessionId?.type === "SessionOpened" ? sessionId.data.sessionId : "(unknown)";
      if (json) {
        process.stdout.write(
          `${JSON.stringify({ ok: result.ok, session_id: id, runner: runner.name, client_inputs: result.clientInputs, divergence: result.divergence })}\n`,
        );
      } else if (result.ok) {
        process.stdout.write(
          `re-drive of ${id} against ${runner.name}: same behaviour (${result.clientInputs} client inputs, ${result.live.length} behaviour lines)\n`,
        );
      } else {
        const d = result.divergence;
        process.stdout.write(
          [
            `re-drive of ${id} against ${runner.name}: DIFFERS at behaviour line ${d?.index} (#N is the client input it followed)`,
            `  recorded: ${d?.recorded}`,
            `  live:     ${d?.live}`,
            "  recorded around it:",
            ...(d?.recordedContext ?? []).map((l) => `    ${l}`),
            "  live around it:",
            ...(d?.liveContext ?? []).map((l) => `    ${l}`),
            "",
          ].join("\n"),
        );
      }
      return result.ok ? 0 : 1;
    } finally {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  };

  withSessionOptions(
    program
      .command("export [file]")
      .description(
        "write a recorded session as one self-contained, versioned file (one log entry a line): --session ID or --last in --data's or --config's store (or a session FILE, written again)",
      ),
  )
    .requiredOption("--out <file>", "file to write")
    .action(async (file: string | undefined, opts: SessionChoice & { out: string }) => {
      const { writeSessionFile } = await import("../infra/event-store/session-file.ts");
      const read = await readSession(file, opts);
      if (read === null) return;
      const { entries, stream, name } = read;
      await writeSessionFile(opts.out, stream, entries);
      process.stdout.write(`wrote ${entries.length} entries of ${name} to ${opts.out}\n`);
      // The file is what the store holds; a log that no longer follows its chain is written all the same (to look
      // into), and said so.
      const { verifyChain } = await import("../engine/index.ts");
      const verdict = typeof entries[0]?.metadata.chain === "string" ? verifyChain(entries) : null;
      if (verdict !== null && !verdict.ok) {
        process.stderr.write(`duplex: the stored log does not verify: ${verdict.message}\n`);
        process.exitCode = 1;
      }
    });

  withStoreOptions(
    program.command("sessions").description("list recorded sessions: id, opened at, duration, state, event counts"),
  )
    .option("--json", "one JSON object a line", false)
    .option("--last <n>", "only the N sessions opened last", positive)
    .option("--errors", "only sessions whose log holds an error (each listed under it: revision, code, message)", false)
    .option(
      "--slowest <n>",
      "the N sessions whose slowest turn took longest to its first audio, slowest first",
      positive,
    )
    .action(async (opts: StoreChoice & { json: boolean; last?: number; errors: boolean; slowest?: number }) => {
      const { STREAM_PREFIX } = await import("../engine/index.ts");
      const { reportOf } = await import("../replay/index.ts");
      const { tracingJson } = await import("../protocol/index.ts");
      const { foldLog } = await import("../engine/index.ts");
      const { store, where, close } = await openStoreOf(opts, "read");
      let rows = [];
      try {
        const all = (await store.listStreams(STREAM_PREFIX)).sort((a, b) => a.firstAt - b.firstAt);
        const streams = opts.last === undefined ? all : all.slice(-opts.last);
        for (const info of streams) {
          const entries = await store.read(info.stream);
          const { state } = foldLog(entries);
          const report = reportOf(entries, state.attached);
          rows.push({
            session_id: info.stream.slice(STREAM_PREFIX.length),
            opened_at: new Date(info.firstAt).toISOString(),
            duration_s: report.duration_s,
            state: report.state,
            inputs: report.inputs,
            decisions: report.decisions,
            responses: report.responses,
            // The slowest turn's time to first audio, ms: from the end of speech, else from response.created.
            first_audio_worst_ms: slowestFirstAudio(report.spans),
            errors: report.errors,
            tracing: tracingJson(state.config.tracing),
            labels: labelsOf(state.config.tracing),
          });
        }
      } finally {
        await close();
      }
      const stored = rows.length;
      if (opts.errors) rows = rows.filter((r) => r.errors.length > 0);
      if (opts.slowest !== undefined)
        rows = rows
          .filter((r) => r.first_audio_worst_ms !== null)
          .sort((a, b) => (b.first_audio_worst_ms ?? 0) - (a.first_audio_worst_ms ?? 0))
          .slice(0, opts.slowest);
      if (opts.json) for (const { labels: _, ...row } of rows) process.stdout.write(`${JSON.stringify(row)}\n`);
      else {
        process.stdout.write(
          "session_id                              opened_at                 duration_s  state                inputs  decisions  responses  labels\n",
        );
        for (const r of rows) {
          process.stdout.write(
            `${r.session_id.padEnd(40)}${r.opened_at.padEnd(26)}${r.duration_s.toFixed(1).padStart(10)}  ${r.state.padEnd(21)}${String(r.inputs).padStart(6)}  ${String(r.decisions).padStart(9)}  ${String(r.responses).padStart(9)}  ${r.labels}\n`,
          );
          if (opts.slowest !== undefined) process.stdout.write(`  slowest first audio: ${r.first_audio_worst_ms} ms\n`);
          if (opts.errors)
            for (const e of r.errors) process.stdout.write(`  revision ${e.revision}: ${e.code}: ${e.message}\n`);
        }
        // What was filtered out is said, so that an empty answer is not read as an empty store.
        if (rows.length === 0)
          process.stdout.write(
            stored === 0
              ? `(no sessions in ${where})\n`
              : `(none of the ${stored} sessions in ${where} ${opts.errors ? "has an error" : "has timed turns"})\n`,
          );
      }
    });

  withSessionOptions(
    program
      .command("show [session]")
      .description(
        "what happened in a session: its state, errors, the history as heard, playback, and with --turns the latency of each turn; SESSION is an id (the same as --session ID) or a session FILE",
      ),
  )
    .option("--turns", "each turn's times and the p50/p95/worst of each span", false)
    .option("--json", "the whole report as one JSON object", false)
    .action(async (positional: string | undefined, opts: SessionChoice & { turns: boolean; json: boolean }) => {
      // The positional is --session ID, or a session FILE: given with --session too, the two are one too many.
      if (positional !== undefined && opts.session !== undefined)
        throw new InvalidArgumentError(
          `give the session once: ${positional} and --session ${opts.session} (SESSION is the same as --session ID)`,
        );
      const file = positional !== undefined && isSessionFile(positional) ? positional : undefined;
      const session = file === undefined ? (positional ?? opts.session) : undefined;
      const read = await readSession(file, { ...opts, ...(session === undefined ? {} : { session }) });
      if (read === null) return;
      const { foldLog } = await import("../engine/index.ts");
      const { reportOf } = await import("../replay/index.ts");
      const report = reportOf(read.entries, foldLog(read.entries).state.attached);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(report)}\n`);
        return;
      }
      process.stdout.write(renderReport(report, opts.turns));
    });

  withSessionOptions(
    program
      .command("verify [file]")
      .description(
        "check a session's log against its hash chain (a session FILE, or --session ID or --last in --data's or --config's store): exit 0 if every entry is the one written, 1 naming the first that is not",
      ),
  )
    .option("--json", "print the verdict as JSON", false)
    .action(async (file: string | undefined, opts: SessionChoice & { json: boolean }) => {
      const { verifyChain } = await import("../engine/index.ts");
      const read = await readSession(file, opts);
      if (read === null) return;
      const { entries, recordedHead, name } = read;
      const verdict = verifyChain(entries);
      // A file cut short keeps a valid chain: its header says where the chain ended when it was written.
      const last = entries.at(-1);
      const cut =
        verdict.ok && recordedHead !== null && recordedHead !== verdict.head
          ? `the file ends at revision ${last?.revision ?? -1}, but its header records a chain head that no entry here has: entries were removed from its end (or it was changed and its header not)`
          : null;
      const ok = verdict.ok && cut === null;
      if (opts.json) {
        process.stdout.write(
          `${JSON.stringify(ok ? { ok, entries: entries.length, head: verdict.ok ? verdict.head : null } : verdict.ok ? { ok, kind: "truncated", revision: (last?.revision ?? -1) + 1, message: cut } : verdict)}\n`,
        );
      } else if (ok && verdict.ok) {
        process.stdout.write(
          `verified ${name}: ${entries.length} entries, each the one written (chain head ${verdict.head})\n`,
        );
      } else if (!verdict.ok) {
        process.stdout.write(`${name}: BROKEN at revision ${verdict.revision}: ${verdict.message}\n`);
      } else {
        process.stdout.write(`${name}: BROKEN at revision ${(last?.revision ?? -1) + 1}: ${cut}\n`);
      }
      process.exitCode = ok ? 0 : 1;
    });

  withSessionOptions(
    program
      .command("trace [file]")
      .description(
        "write a session as a Chrome trace (Perfetto, chrome://tracing): user and assistant speech, responses, turn spans, commits, barge-ins, cancels and errors, and the VAD as a counter",
      ),
  )
    .requiredOption("--out <file>", "file to write (trace.json)")
    .action(async (file: string | undefined, opts: SessionChoice & { out: string }) => {
      const { traceOf } = await import("../replay/index.ts");
      const read = await readSession(file, opts);
      if (read === null) return;
      const { entries } = read;
      const trace = traceOf(entries);
      await writeFile(opts.out, JSON.stringify(trace));
      process.stdout.write(
        `wrote ${trace.traceEvents.length} trace events to ${opts.out} (open it in https://ui.perfetto.dev or chrome://tracing)\n`,
      );
    });

  withSessionOptions(
    program
      .command("timeline [file]")
      .description(
        "write a session's timeline as one HTML page that opens from disk (no server): input waveform and VAD, speech, responses, turn spans, marks with their log entries",
      ),
  )
    .requiredOption("--out <file>", "file to write (page.html)")
    .action(async (file: string | undefined, opts: SessionChoice & { out: string }) => {
      const { timelineOf } = await import("../replay/index.ts");
      const { renderTimelinePage } = await import("../server/timeline-page.ts");
      const read = await readSession(file, opts);
      if (read === null) return;
      const { entries } = read;
      const html = renderTimelinePage({ timeline: timelineOf(entries), entries });
      await writeFile(opts.out, html);
      process.stdout.write(
        `wrote the timeline of ${entries.length} log entries to ${opts.out} (${Math.round(html.length / 1024)} KiB)\n`,
      );
    });

  /** A duration such as `7d`, `12h`, `30m`, `45s` or `0`, in ms. */
  const duration = (value: string): number => {
    const ms = parseDurationMs(value);
    if (ms === null) {
      throw new InvalidArgumentError(
        /^\d+(\.\d+)?$/.test(value.trim())
          ? `${value} has no unit: say 7d, 12h, 30m or 45s (a bare number other than 0 could mean days or seconds)`
          : "expected a duration such as 7d, 12h, 30m, 45s or 0",
      );
    }
    return ms;
  };

  withStoreOptions(
    program
      .command("gc")
      .description("remove finished sessions (closed or expired) from a store: their logs and everything in them"),
  )
    // Required: removing is for good, so how old is never a default (0 removes every finished session).
    .requiredOption(
      "--older-than <duration>",
      "only sessions whose last entry is older than this (7d, 12h, 30m; 0 for every finished session)",
      duration,
    )
    .option("--dry-run", "list what would be removed and remove nothing (the store opened read-only)", false)
    .action(async (opts: StoreChoice & { olderThan: number; dryRun: boolean }) => {
      const { removeFinishedSessions } = await import("../replay/index.ts");
      // A dry run only reads: it opens the store as the other read commands do (a read-only copy, a role that may
      // only read). Removing needs a store this user may write.
      const write: StoreWrite = {
        doing: "remove sessions from",
        instead:
          "gc a writable copy of the store (the -wal with it, if there is one), or run it as the store's owner (--dry-run lists what it would remove, and writes nothing)",
      };
      const { store, file, close } = await openStoreOf(opts, opts.dryRun ? "read" : write);
      try {
        const { removed, kept } = await removeFinishedSessions(store, {
          olderThanMs: opts.olderThan,
          now: Date.now(),
          dryRun: opts.dryRun,
        }).catch((error: unknown) => {
          throw file === null ? error : storeWriteError(error, file, write);
        });
        for (const id of removed) process.stdout.write(`${opts.dryRun ? "would remove" : "removed"} ${id}\n`);
        process.stdout.write(
          `${removed.length} finished session(s) ${opts.dryRun ? "to remove" : "removed"}, ${kept} kept\n`,
        );
      } finally {
        await close();
      }
    });
};
