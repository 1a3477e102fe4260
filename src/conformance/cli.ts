import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { type Command, InvalidArgumentError } from "commander";
import { AUDIO_DIR, CLIENT_CASE_DIR, REFERENCE_PEER_SCRIPT, SCENARIO_DIR } from "./files.ts";

/** Options of `duplex conform`. */
interface ConformOptions {
  readonly url?: string;
  readonly scenario: string[];
  readonly json: boolean;
  readonly list: boolean;
  readonly serve: boolean;
  /** With --serve: the folder of the event store, kept after the server stops. */
  readonly data?: string;
  readonly host: string;
  readonly port: number;
  readonly scenarios: string;
  readonly audio: string;
  readonly var: string[];
  readonly apiKey?: string;
  /** Client conformance (issue 23): serve the client cases, or grade a recorded case again. */
  readonly client: boolean;
  readonly grade?: string;
  readonly agent: string;
  readonly report: string;
  readonly clientCases: string;
  readonly unsupported: string[];
  readonly duplexAware: boolean;
  readonly idleTtlS: number;
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

const seconds = (value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("expected a number of seconds above 0");
  return n;
};

const port = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError("expected a port number 0..65535");
  return n;
};

/** `name=value` pairs; a value that parses as JSON (a number, true, null) is taken as that. */
const parseVars = (pairs: readonly string[]): Record<string, unknown> =>
  Object.fromEntries(
    pairs.map((pair) => {
      const eq = pair.indexOf("=");
      if (eq <= 0) throw new InvalidArgumentError(`--var ${pair}: expected NAME=VALUE`);
      const raw = pair.slice(eq + 1);
      let value: unknown = raw;
      try {
        value = JSON.parse(raw);
      } catch {
        value = raw;
      }
      return [pair.slice(0, eq), value];
    }),
  );

/**
 * Starts our server with the scripted runner playing conformance/reference-peer.yaml (the reference peer for
 * people writing clients), on its own event store in a temporary folder, and runs until SIGINT or SIGTERM.
 */
const serve = async (opts: ConformOptions): Promise<void> => {
  // Imported when the command runs: `duplex --version` need not load the server (docs/benchmarks.md, "Start").
  const { loadScenarios } = await import("./scenario.ts");
  const { renderList } = await import("./report.ts");
  const { parseConfig } = await import("../infra/config.ts");
  const { startServer } = await import("../server/index.ts");
  const scenarios = await loadScenarios(opts.scenarios);
  // With --data the runs stay (replay them with duplex replay --data DIR); without, a temporary store is removed.
  const dataDir = opts.data ?? (await mkdtemp(join(tmpdir(), "duplex-conform-")));
  const config = parseConfig({
    log_level: "warn",
    listen: { host: opts.host, port: opts.port },
    event_store: { kind: "sqlite", path: join(dataDir, "duplex.sqlite") },
    runner: { kind: "scripted", script: REFERENCE_PEER_SCRIPT },
  });
  const server = await startServer(config);
  process.stdout.write(
    `reference peer (${REFERENCE_PEER_SCRIPT}) listening on ${server.url}\n` +
      `a client can be driven through these scenarios (conformance/scenarios; run them with: duplex conform --url ${server.url}):\n\n` +
      renderList(scenarios),
  );
  if (opts.data !== undefined)
    process.stdout.write(`\nsessions are kept in ${opts.data}: duplex sessions --data ${opts.data}\n`);
  const stop = async () => {
    await server.close();
    if (opts.data === undefined) await rm(dataDir, { recursive: true, force: true });
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
};

/** Runs the selected scenarios against `--url`, prints the report, and sets the exit code. */
const conform = async (opts: ConformOptions): Promise<void> => {
  const { loadScenarios, selectScenarios } = await import("./scenario.ts");
  const { renderJson, renderList, renderTable } = await import("./report.ts");
  const { isOk, runScenarios } = await import("./runner.ts");
  const { explainConnectError, RealtimeClient } = await import("../client/index.ts");
  const scenarios = selectScenarios(await loadScenarios(opts.scenarios), opts.scenario);
  if (opts.list) {
    process.stdout.write(renderList(scenarios));
    return;
  }
  if (opts.url === undefined)
    throw new InvalidArgumentError("give --url ws://HOST:PORT/v1/realtime, --list or --serve");
  const apiKey = opts.apiKey ?? (process.env.OPENAI_API_KEY || undefined);
  const headers: Record<string, string> = apiKey === undefined ? {} : { Authorization: `Bearer ${apiKey}` };
  // A server that cannot be reached is one line, not a report of every scenario failing.
  const probe = await RealtimeClient.connect(opts.url, { headers }).catch((error: unknown) => {
    throw new Error(explainConnectError(opts.url ?? "", error, apiKey !== undefined));
  });
  await probe.close();
  const report = await runScenarios(scenarios, {
    url: opts.url,
    audioDir: opts.audio,
    vars: parseVars(opts.var),
    headers,
    onResult: opts.json
      ? undefined
      : (r) => process.stderr.write(`${r.status.padEnd(15)} ${r.name} (${r.duration_ms} ms)\n`),
  });
  process.stdout.write(opts.json ? renderJson(report) : renderTable(report));
  process.exitCode = report.results.every(isOk) ? 0 : 1;
};

/**
 * Registers `duplex conform` on the CLI (DESIGN.md, src/cli): runs the wire-contract scenarios of
 * conformance/scenarios against a server (`--url`), or serves the reference peer (`--serve`). Exit code 0 only
 * when every selected scenario passed (a scenario skipped because the server lacks a capability it requires does
 * not count against it); 1 otherwise; 2 for a usage error.
 */
export const registerConformCommand = (program: Command): void => {
  program
    .command("conform")
    .description(
      "run the wire-contract scenarios against a server and print a pass/fail table, --serve the reference peer, or grade a client (--client)",
    )
    .option("--url <url>", "realtime endpoint to check, e.g. ws://127.0.0.1:8099/v1/realtime")
    .option("--scenario <name>", "run only this scenario (repeatable, or a comma-separated list)", collect, [])
    .option("--json", "print the report as JSON", false)
    .option("--list", "list the scenarios and exit", false)
    .option("--serve", "start our server with the scripted reference peer and list the scenarios", false)
    .option("--host <host>", "listen address of --serve", "127.0.0.1")
    .option("--port <port>", "listen port of --serve", port, 8099)
    .option("--data <dir>", "with --serve: keep the sessions in this store folder, to replay them later")
    .option("--scenarios <dir>", "folder of scenario files", SCENARIO_DIR)
    .option("--audio <dir>", "folder of the audio files scenarios stream", AUDIO_DIR)
    .option("--var <name=value>", "override a scenario variable, e.g. max_sessions=2 (repeatable)", collect, [])
    .option("--api-key <key>", "API key sent as Authorization: Bearer (default: $OPENAI_API_KEY)")
    .option("--client", "grade a client: serve the client cases on --port and grade the app that connects", false)
    .option("--agent <name>", "with --client: the client's name in the report", "client")
    .option("--report <dir>", "with --client: the report's folder (JSON, HTML, JUnit, sessions)", "./conform-report")
    .option("--client-cases <dir>", "folder of client case files", CLIENT_CASE_DIR)
    .option(
      "--unsupported <profiles>",
      "with --client: profiles the client does not do (resume, playback), comma-separated",
      (v: string, previous: string[]) => [...previous, ...v.split(",").filter((p) => p !== "")],
      [],
    )
    .option(
      "--duplex-aware",
      "with --client: the client speaks the duplex extensions (their cases are required)",
      false,
    )
    .option("--idle-ttl-s <s>", "with --client: the sessions' idle timeout (the lease.idle case)", seconds, 40)
    .option("--grade <file>", "grade a recorded client case again (a report's sessions/<id>.jsonl)")
    .action(async (raw: ConformOptions) => {
      const opts = { ...raw, scenarios: resolve(raw.scenarios), audio: resolve(raw.audio) };
      if (opts.grade !== undefined) {
        const { gradeRecorded } = await import("./client/cli.ts");
        const verdict = await gradeRecorded(resolve(opts.grade), resolve(opts.clientCases), (t) =>
          process.stdout.write(t),
        );
        process.exitCode = verdict === "fail" ? 1 : 0;
        return;
      }
      if (opts.client) {
        const { runClientConformance } = await import("./client/cli.ts");
        const passed = await runClientConformance({
          host: opts.host,
          port: opts.port,
          agent: opts.agent,
          report: opts.report,
          cases: resolve(opts.clientCases),
          unsupported: opts.unsupported,
          duplexAware: opts.duplexAware,
          idleTtlS: opts.idleTtlS,
          out: (t) => process.stdout.write(t),
        });
        process.exit(passed ? 0 : 1);
      }
      try {
        if (opts.serve) {
          if (opts.url !== undefined) throw new InvalidArgumentError("--serve and --url exclude each other");
          await serve(opts);
          return;
        }
        await conform(opts);
      } catch (error) {
        // A scenario file that does not validate is a usage error (exit 2), like a bad deployment file.
        if ((error as Error).name === "ScenarioError") throw new InvalidArgumentError((error as Error).message);
        throw error;
      }
    });
};
