import { writeFile } from "node:fs/promises";
import { type Command, InvalidArgumentError } from "commander";
import type { SessionReport } from "../replay/index.ts";
import { isSessionFile, readSession, type SessionChoice, withSessionOptions } from "./session-source.ts";

// The engine and the replay are imported when a command runs (`await import`), so that a call loads only what it
// needs (docs/benchmarks.md, "Start").

/**
 * The commands that read one session (DESIGN.md, src/cli): `export`, `show`, `verify`, `trace` and `timeline`. Each
 * names its store and session as session-source.ts says (`--data DIR` or `--config FILE`; `--session ID`, `--last`
 * or a session FILE) and opens the store read-only. Exit codes as main.ts says: 0 success, 1 a failed check, 2 a
 * usage error. store-commands.ts registers them with the other commands that read a store.
 */

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

/** `duplex export`: a session written as one self-contained, versioned file. */
export const exportCommand = (program: Command): void => {
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
};

/** `duplex show`: what happened in a session, as text or JSON. */
export const showCommand = (program: Command): void => {
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
};

/** `duplex verify`: a session's log checked against its hash chain (exit 1 naming the first entry that is not). */
export const verifyCommand = (program: Command): void => {
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
};

/** `duplex trace`: a session as a Chrome trace. */
export const traceCommand = (program: Command): void => {
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
};

/** `duplex timeline`: a session's timeline as one HTML page that opens from disk. */
export const timelineCommand = (program: Command): void => {
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
};
