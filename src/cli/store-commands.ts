import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type Command, InvalidArgumentError } from "commander";
import type { TracingConfig } from "../domain/index.ts";
import { parseDurationMs } from "../engine/duration.ts";
import type { EventStore, RecordedEntry } from "../engine/index.ts";
import { sqlitePathIn } from "../infra/event-store/paths.ts";
import { positive } from "./args.ts";

// The engine, the store and the runners are imported when a command runs (`await import`), so that a call loads
// only what it needs (docs/benchmarks.md, "Start").

/**
 * The commands that read a store (DESIGN.md, src/cli): `replay`, `export`, `sessions` and `gc`. Exit codes as
 * main.ts says: 0 success, 1 a failed check, 2 a usage error.
 */

/** The id of the session opened last in `store` (`--last`). @throws InvalidArgumentError when it holds none. */
const lastSessionId = async (store: EventStore, dataDir: string): Promise<string> => {
  const { STREAM_PREFIX } = await import("../engine/index.ts");
  const streams = await store.listStreams(STREAM_PREFIX);
  const last = streams.reduce<(typeof streams)[number] | undefined>(
    (a, b) => (a === undefined || b.firstAt >= a.firstAt ? b : a),
    undefined,
  );
  if (last === undefined) throw new InvalidArgumentError(`--last: no sessions in ${resolve(dataDir)}`);
  return last.stream.slice(STREAM_PREFIX.length);
};

/** How a session ended, in words, from its log; `open` or `detached` while it has not. */
const endingOf = (entries: readonly { type: string; data: unknown }[], attached: boolean): string => {
  const closed = entries.findLast((e) => e.type === "SessionClosed")?.data as { reason?: string } | undefined;
  if (closed === undefined) return attached ? "open" : "detached";
  const words: Record<string, string> = {
    session_close: "closed",
    idle_ttl_expired: "expired (idle)",
    disconnect_grace_expired: "expired (no resume)",
    disconnect: "disconnected",
    runner_failed: "failed (runner)",
    unused: "unused",
  };
  return words[closed.reason ?? ""] ?? String(closed.reason);
};

/** The session's time alive, s: from its first entry to its last, less the downtime of server restarts. */
const durationOf = (entries: readonly { type: string; metadata: { at: number } }[]): number => {
  let downtime = 0;
  entries.forEach((e, i) => {
    const before = entries[i - 1];
    if (e.type === "SessionRecovered" && before !== undefined) downtime += e.metadata.at - before.metadata.at;
  });
  const span = (entries.at(-1)?.metadata.at ?? 0) - (entries[0]?.metadata.at ?? 0);
  return Math.round((span - downtime) / 100) / 10;
};

/** Opens the embedded store of `dataDir`. @throws Error when the folder holds no store (nothing is created). */
const openStore = async (dataDir: string): Promise<EventStore> => {
  const path = sqlitePathIn(resolve(dataDir));
  if (!existsSync(path))
    throw new Error(`no event store in ${resolve(dataDir)} (expected ${path}); give the --data of a server`);
  const { createSqliteEventStore } = await import("../infra/event-store/index.ts");
  return createSqliteEventStore({ path });
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

/** Registers `replay`, `export`, `sessions` and `gc` on `program`. */
export const registerStoreCommands = (program: Command): void => {
  program
    .command("replay [file]")
    .description(
      "replay a recorded session offline and check it byte for byte (a session FILE, or --data/--session); with --runner, re-drive its client inputs against a live runner and compare behaviour",
    )
    .option("--data <dir>", "folder of the embedded event store", "./data")
    .option("--session <id>", "session id to replay from the store")
    .option("--last", "replay the session opened last in the store", false)
    .option("--runner <config>", "a deployment YAML whose runner (and profile) the client inputs are re-driven against")
    .option("--speed <n>", "with --runner: how much faster than recorded the inputs are sent (inf: back to back)", "1")
    .option("--json", "print the summary as JSON", false)
    .action(
      async (
        file: string | undefined,
        opts: { data: string; session?: string; last: boolean; runner?: string; speed: string; json: boolean },
      ) => {
        const { readSessionFile } = await import("../infra/event-store/index.ts");
        const { replayEntries, streamOf } = await import("../engine/index.ts");
        let entries: readonly RecordedEntry[];
        if (file !== undefined) {
          if (!existsSync(file)) throw new InvalidArgumentError(`${file}: no such file`);
          entries = (await readSessionFile(file)).entries;
        } else {
          if (opts.session === undefined && !opts.last)
            throw new InvalidArgumentError("give a session FILE, --session ID or --last");
          const store = await openStore(opts.data);
          const session = await (opts.session === undefined ? lastSessionId(store, opts.data) : opts.session);
          entries = await store.read(streamOf(session)).finally(() => store.close());
          if (entries.length === 0) {
            process.stderr.write(`duplex: no session ${session} in ${resolve(opts.data)}\n`);
            process.exitCode = 2;
            return;
          }
        }
        if (opts.runner !== undefined) {
          process.exitCode = await redriveCommand(entries, opts.runner, opts.speed, opts.json);
          return;
        }
        const result = replayEntries(entries);
        const summary = {
          ok: result.ok,
          session_id: result.sessionId,
          inputs: result.inputs,
          decisions: result.decisions,
          wire_events: result.wireEvents,
          divergence: result.divergence,
        };
        if (opts.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
        else if (result.ok) {
          process.stdout.write(
            `replay of ${result.sessionId}: identical (${result.inputs} inputs, ${result.decisions} decisions, ${result.wireEvents} server events)\n`,
          );
        } else {
          const d = result.divergence;
          process.stdout.write(
            `replay of ${result.sessionId}: DIVERGES at revision ${d?.revision} (${d?.inputType}), ${d?.kind} #${d?.index}\n  recorded: ${d?.expected.slice(0, 2000)}\n  replayed: ${d?.actual.slice(0, 2000)}\n`,
          );
        }
        process.exitCode = result.ok ? 0 : 1;
      },
    );

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
    const { redrive, stepsOf } = await import("../engine/index.ts");
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

  program
    .command("export")
    .description("write a recorded session as one self-contained, versioned file (one log entry a line)")
    .option("--data <dir>", "folder of the embedded event store", "./data")
    .option("--session <id>", "session id")
    .option("--last", "export the session opened last in the store", false)
    .requiredOption("--out <file>", "file to write")
    .action(async (opts: { data: string; session?: string; last: boolean; out: string }) => {
      if (opts.session === undefined && !opts.last) throw new InvalidArgumentError("give --session ID or --last");
      const { streamOf } = await import("../engine/index.ts");
      const { writeSessionFile } = await import("../infra/event-store/index.ts");
      const store = await openStore(opts.data);
      try {
        const session = opts.session ?? (await lastSessionId(store, opts.data));
        const stream = streamOf(session);
        const entries = await store.read(stream);
        if (entries.length === 0) {
          process.stderr.write(`duplex: no session ${session} in ${resolve(opts.data)}\n`);
          process.exitCode = 2;
          return;
        }
        await writeSessionFile(opts.out, stream, entries);
        process.stdout.write(`wrote ${entries.length} entries of ${session} to ${opts.out}\n`);
      } finally {
        await store.close();
      }
    });

  program
    .command("sessions")
    .description("list recorded sessions: id, opened at, duration, state, event counts")
    .option("--data <dir>", "folder of the embedded event store", "./data")
    .option("--json", "one JSON object a line", false)
    .option("--last <n>", "only the N sessions opened last", positive)
    .action(async (opts: { data: string; json: boolean; last?: number }) => {
      const { foldLog, STREAM_PREFIX, stepsOf } = await import("../engine/index.ts");
      const { tracingJson } = await import("../protocol/index.ts");
      const store = await openStore(opts.data);
      const all = (await store.listStreams(STREAM_PREFIX)).sort((a, b) => a.firstAt - b.firstAt);
      const streams = opts.last === undefined ? all : all.slice(-opts.last);
      const rows = [];
      for (const info of streams) {
        const entries = await store.read(info.stream);
        const { state } = foldLog(entries);
        const inputs = stepsOf(entries).length;
        rows.push({
          session_id: info.stream.slice(STREAM_PREFIX.length),
          opened_at: new Date(info.firstAt).toISOString(),
          duration_s: durationOf(entries),
          state: endingOf(entries, state.attached),
          inputs,
          decisions: entries.length - inputs,
          responses: state.responseCount,
          tracing: tracingJson(state.config.tracing),
          labels: labelsOf(state.config.tracing),
        });
      }
      await store.close();
      if (opts.json) for (const { labels: _, ...row } of rows) process.stdout.write(`${JSON.stringify(row)}\n`);
      else {
        process.stdout.write(
          "session_id                              opened_at                 duration_s  state                inputs  decisions  responses  labels\n",
        );
        for (const r of rows) {
          process.stdout.write(
            `${r.session_id.padEnd(40)}${r.opened_at.padEnd(26)}${r.duration_s.toFixed(1).padStart(10)}  ${r.state.padEnd(21)}${String(r.inputs).padStart(6)}  ${String(r.decisions).padStart(9)}  ${String(r.responses).padStart(9)}  ${r.labels}\n`,
          );
        }
        if (rows.length === 0) process.stdout.write(`(no sessions in ${resolve(opts.data)})\n`);
      }
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

  program
    .command("gc")
    .description("remove finished sessions (closed or expired) from a store: their logs and everything in them")
    .option("--data <dir>", "folder of the embedded event store", "./data")
    // Required: removing is for good, so how old is never a default (0 removes every finished session).
    .requiredOption(
      "--older-than <duration>",
      "only sessions whose last entry is older than this (7d, 12h, 30m; 0 for every finished session)",
      duration,
    )
    .option("--dry-run", "list what would be removed and remove nothing", false)
    .action(async (opts: { data: string; olderThan: number; dryRun: boolean }) => {
      const { removeFinishedSessions } = await import("../engine/index.ts");
      const store = await openStore(opts.data);
      try {
        const { removed, kept } = await removeFinishedSessions(store, {
          olderThanMs: opts.olderThan,
          now: Date.now(),
          dryRun: opts.dryRun,
        });
        for (const id of removed) process.stdout.write(`${opts.dryRun ? "would remove" : "removed"} ${id}\n`);
        process.stdout.write(
          `${removed.length} finished session(s) ${opts.dryRun ? "to remove" : "removed"}, ${kept} kept\n`,
        );
      } finally {
        await store.close();
      }
    });
};
