import { type Command, InvalidArgumentError } from "commander";
import type { TracingConfig } from "../domain/index.ts";
import { parseDurationMs } from "../engine/duration.ts";
import type { SpanSummary } from "../projections/index.ts";
import { positive } from "./args.ts";
import { registerReindexCommand } from "./reindex.ts";
import { registerReplayCommand } from "./replay-command.ts";
import { exportCommand, showCommand, timelineCommand, traceCommand, verifyCommand } from "./session-commands.ts";
import { openStoreOf, type StoreChoice, type StoreWrite, storeWriteError, withStoreOptions } from "./session-source.ts";

// The engine, the store and the runners are imported when a command runs (`await import`), so that a call loads
// only what it needs (docs/benchmarks.md, "Start").

/**
 * The commands that read a store (DESIGN.md, src/cli): `replay` (replay-command.ts), `export`, `show`, `verify`,
 * `trace`, `timeline` (session-commands.ts), `sessions`, `gc` and `reindex` (reindex.ts). Each names its store and
 * session as session-source.ts says (`--data DIR` or `--config FILE`; `--session ID`, `--last` or a session FILE)
 * and, but `gc` (without `--dry-run`) and `reindex`, opens it read-only. Exit codes as main.ts says: 0 success, 1 a
 * failed check, 2 a usage error.
 */
export const registerStoreCommands = (program: Command): void => {
  registerReindexCommand(program);
  registerReplayCommand(program);
  exportCommand(program);
  sessionsCommand(program);
  showCommand(program);
  verifyCommand(program);
  traceCommand(program);
  timelineCommand(program);
  gcCommand(program);
};

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

/** `duplex sessions`: the recorded sessions of a store, one a line (or JSON), filtered by errors or slowest turn. */
const sessionsCommand = (program: Command): void => {
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
};

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

/** `duplex gc`: finished sessions removed from a store (listed only, with `--dry-run`). */
const gcCommand = (program: Command): void => {
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
