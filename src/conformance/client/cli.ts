import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { encodeWav } from "../../infra/audio/index.ts";
import { readSessionFile } from "../../infra/event-store/index.ts";
import { AUDIO_DIR, CLIENT_PEER_SCRIPT } from "../files.ts";
import { describeAppInput } from "./app-input.ts";
import { loadClientCases } from "./cases.ts";
import { gradeCase, type PeerAction, referenceTone } from "./graders.ts";
import { startClientHarness } from "./harness.ts";
import { type ClientReport, renderClientTable, reportRunOf, requiredPassed, writeClientReport } from "./report.ts";

/** Options of `duplex conform --client`. */
export interface ClientConformOptions {
  readonly host: string;
  readonly port: number;
  readonly agent: string;
  readonly report: string;
  readonly cases: string;
  readonly unsupported: readonly string[];
  readonly duplexAware: boolean;
  /** The sessions' idle timeout, s (the `lease.idle` case). */
  readonly idleTtlS: number;
  readonly out: (text: string) => void;
  /** The command line the report records (default: `duplex` and this process's arguments). */
  readonly command?: readonly string[];
  /** Where the case files the app streams live (default ../shared/audio, `AUDIO_DIR`). */
  readonly audioDir?: string;
}

/**
 * `duplex conform --client` (issue 23): serves the client peer with the client cases on `--port`, writes the
 * reference tone next to the report, prints how to run the client through the cases (per case: the files it streams,
 * server VAD on or off, what it must do: app-input.ts), and once every case's session
 * has ended (or on SIGINT / SIGTERM) grades them, prints the table, writes the report, and returns whether every
 * required case passed.
 */
export const runClientConformance = async (o: ClientConformOptions): Promise<boolean> => {
  const cases = await loadClientCases(o.cases);
  const report = resolve(o.report);
  await mkdir(report, { recursive: true });
  const tone = join(report, "tone.wav");
  await writeFile(tone, encodeWav(referenceTone(16000), 16000));
  const harness = await startClientHarness({
    cases,
    host: o.host,
    port: o.port,
    script: CLIENT_PEER_SCRIPT,
    unsupported: o.unsupported,
    idleTtlS: o.idleTtlS,
    log: o.out,
  });
  o.out(
    `client conformance peer on ${harness.url}\n` +
      `each connection gets the next case (or the one ?case=ID names); ` +
      `sessions expire after ${o.idleTtlS} s idle (idle_timeout_s)\n` +
      "what the app must send in each case (mono PCM16 WAV as its microphone, at the rate its session declares):\n\n" +
      cases.map((c) => describeAppInput(c, o.audioDir ?? AUDIO_DIR, tone)).join("") +
      "\nwaiting for the client (Ctrl-C to grade what ran so far)\n",
  );
  await new Promise<void>((done) => {
    const stop = (): void => done();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
    void harness.allEnded.then(() => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      done();
    });
  });
  const { results, logs } = await harness.finish();
  const graded: ClientReport = {
    agent: o.agent,
    duplexAware: o.duplexAware,
    unsupported: o.unsupported,
    results,
    run: reportRunOf(o.command ?? ["duplex", ...process.argv.slice(2)]),
  };
  await writeClientReport(report, graded, logs);
  o.out(`${renderClientTable(graded)}report: ${join(report, "report.html")}, ${join(report, "junit.xml")}\n`);
  return requiredPassed(graded);
};

/**
 * `duplex conform --grade FILE`: grades a recorded case again, offline: the session file (`sessions/<id>.jsonl` of
 * a report) and, beside it, what the peer did (`<id>.case.json`). Returns the printed line's verdict.
 * @throws Error when the file or its `.case.json` cannot be read, or names an unknown case.
 */
export const gradeRecorded = async (file: string, casesDir: string, out: (text: string) => void): Promise<string> => {
  const sidecarPath = file.replace(/\.jsonl$/, ".case.json");
  const sidecar = JSON.parse(
    await readFile(sidecarPath, "utf8").catch(() => {
      throw new Error(
        `${file}: a recorded case is the session file and, beside it, ${sidecarPath} (what the peer did); it cannot be read`,
      );
    }),
  ) as { case: string; actions: PeerAction[]; unsupported?: string[] };
  const clientCase = (await loadClientCases(casesDir)).find((c) => c.id === sidecar.case);
  if (clientCase === undefined) throw new Error(`${file}: the case ${sidecar.case} is not in ${casesDir}`);
  const { entries } = await readSessionFile(file);
  const grade = gradeCase(clientCase, { entries, actions: sidecar.actions, unsupported: sidecar.unsupported ?? [] });
  out(
    `${clientCase.id}: ${grade.verdict}: ${grade.message}\n` +
      grade.evidence
        .map((e) => `  ${e.revision === null ? "peer" : `rev ${e.revision}`} at ${e.at_ms} ms: ${e.what}\n`)
        .join(""),
  );
  return grade.verdict;
};
