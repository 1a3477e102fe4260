import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { registerConformCommand } from "../conformance/cli.ts";
import { AUDIO_DIR } from "../conformance/files.ts";
import type { DeployConfig } from "../infra/config.ts";
import { failureOf, positive } from "./args.ts";
import { registerLoadBench } from "./bench-load.ts";
import { registerStoreCommands } from "./store-commands.ts";

// The modules a command runs on are imported when it runs (`await import` in its action), so a call such as
// `duplex --version` or `duplex sessions` loads only what it needs (docs/benchmarks.md, "Start").

/**
 * `duplex serve | demo | replay | export | sessions | conform` (DESIGN.md, src/cli). Exit codes: 0 success, 1 a
 * failed check (replay divergence, a demo without audio, a failed conformance scenario), 2 a usage or configuration
 * error, 130 a demo stopped by Ctrl-C (after it closed its session and wrote what it received).
 */
const program = new Command("duplex")
  .description("An event-sourced server for full-duplex speech models (OpenAI Realtime API).")
  .version(packageVersion())
  // Options belong to the command they follow: `bench load --sessions` is load's, not bench's (commander hands a
  // subcommand's unknown options to its parent first unless every ancestor is positional).
  .enablePositionalOptions()
  // Commander names the unknown option, command or missing value; a usage error exits 2 (help and version 0).
  .exitOverride((error) => {
    process.exit(["commander.helpDisplayed", "commander.version", "commander.help"].includes(error.code) ? 0 : 2);
  });

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  return pkg.version;
}

/** The benches of `duplex bench`, in the order they run. */
const BENCHES = [
  "vad",
  "store",
  "replay",
  "sessions",
  "start",
  "soak",
  "slow-reader",
  "idle",
  "flood",
  "postgres",
  "list",
];

/** `--only`: known bench names only (a usage error names the unknown one). */
const benchNames = (value: string): string[] => {
  const names = value.split(",").filter((s) => s !== "");
  const unknown = names.find((n) => !BENCHES.includes(n));
  if (unknown !== undefined)
    throw new InvalidArgumentError(`unknown bench "${unknown}"; expected ${BENCHES.join(", ")}`);
  return names;
};

const port = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError("expected a port number 0..65535");
  return n;
};

/**
 * `serve --runner-url URL`: the configured upstream runner with `url` instead, or (any other runner) an upstream
 * runner of the duplex dialect at `url`. @throws ConfigError naming --runner-url when `url` is not ws:// or wss://.
 */
const withRunnerUrl = async (runner: DeployConfig["runner"], url: string): Promise<DeployConfig["runner"]> => {
  const { ConfigError, parseConfig } = await import("../infra/config.ts");
  try {
    return parseConfig({
      runner: runner.kind === "upstream" ? { ...runner, url } : { kind: "upstream", url, dialect: "duplex" },
    }).runner;
  } catch (error) {
    throw error instanceof ConfigError ? new ConfigError(`--runner-url ${url}: expected a ws:// or wss:// URL`) : error;
  }
};

program
  .command("serve")
  .description("run the realtime server (embedded sqlite store, echo runner) on 127.0.0.1:8099")
  .option("--config <file>", "deployment configuration (YAML), e.g. deploy/embedded.yaml")
  .option("--data <dir>", "folder of the embedded event store (overrides event_store.path)", undefined)
  .option("--host <host>", "listen address (overrides listen.host)")
  .option("--port <port>", "listen port (overrides listen.port)", port)
  .option(
    "--runner-url <url>",
    "a model server to drive (overrides runner.url of an upstream runner; any other runner becomes {kind: upstream, url, dialect: duplex})",
  )
  .option("--node-id <id>", "this node's id among those sharing a PostgreSQL store (overrides node.id)")
  .action(
    async (opts: {
      config?: string;
      data?: string;
      host?: string;
      port?: number;
      runnerUrl?: string;
      nodeId?: string;
    }) => {
      const { ConfigError, loadConfig, sqlitePathIn } = await import("../infra/config.ts");
      const { startServer } = await import("../server/index.ts");
      const config = await loadConfig(opts.config);
      // --data names an embedded store's folder: with a shared store configured it would start a node alone on a
      // SQLite file of its own (issue 33, part 6).
      if (opts.data !== undefined && config.event_store.kind !== "sqlite")
        throw new ConfigError(
          `--data ${opts.data}: the configuration's event_store is ${config.event_store.kind}; --data names the folder of an embedded sqlite store. Drop --data, or the config's event_store`,
        );
      const runner = opts.runnerUrl === undefined ? config.runner : await withRunnerUrl(config.runner, opts.runnerUrl);
      const effective = {
        ...config,
        runner,
        event_store:
          opts.data === undefined
            ? config.event_store
            : { kind: "sqlite" as const, path: sqlitePathIn(resolve(opts.data)) },
        listen: { ...config.listen, host: opts.host ?? config.listen.host, port: opts.port ?? config.listen.port },
        node: opts.nodeId === undefined ? config.node : { ...config.node, id: opts.nodeId },
      };
      const server = await startServer(effective);
      const stop = async () => {
        await server.close();
        process.exit(0);
      };
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    },
  );

program
  .command("demo")
  .description("hold a conversation: stream a WAV at real-time pace, play the answers, write them as WAV files")
  .option("--url <url>", "realtime endpoint", "ws://127.0.0.1:8099/v1/realtime")
  .requiredOption(
    "--input <wav>",
    "WAV to speak: PCM16 at 8-96 kHz (stereo is mixed down), float32, or G.711 mu-law/A-law at 8 kHz, e.g. ../shared/audio/jfk_16k.wav",
  )
  .option("--out <dir>", "folder for response-N.wav", "./out")
  .option("--fast", "send and play as fast as possible instead of in real time", false)
  .option("--ref-audio <wav>", "a voice clip sent as the session's ref_audio (MiniCPM-o 4.5 requires one)")
  .option("--api-key <key>", "API key sent as Authorization: Bearer (default: $OPENAI_API_KEY)")
  .option("--commit", "commit the input after streaming it and ask for a response (the turn lane needs it)", false)
  .option(
    "--server-vad",
    "server VAD turn detection: the server answers each utterance and cuts an answer talked over",
    false,
  )
  .option("--quiet", "no progress lines on stderr", false)
  .action(
    async (opts: {
      url: string;
      input: string;
      out: string;
      fast: boolean;
      refAudio?: string;
      apiKey?: string;
      commit: boolean;
      serverVad: boolean;
      quiet: boolean;
    }) => {
      const { progressLine, runDemo } = await import("./demo.ts");
      const apiKey = opts.apiKey ?? (process.env.OPENAI_API_KEY || undefined);
      // Ctrl-C once: close the session and write what was received; twice: leave at once.
      const interrupt = new AbortController();
      const onSigint = (): void => {
        if (interrupt.signal.aborted) process.exit(130);
        interrupt.abort();
      };
      process.on("SIGINT", onSigint);
      const summary = await runDemo({
        signal: interrupt.signal,
        url: opts.url,
        input: opts.input,
        out: opts.out,
        fast: opts.fast,
        commit: opts.commit,
        serverVad: opts.serverVad,
        ...(opts.refAudio === undefined ? {} : { refAudio: opts.refAudio }),
        ...(apiKey === undefined ? {} : { apiKey }),
        ...(opts.quiet ? {} : { progress: progressLine(opts.input) }),
      });
      const { files: _files, trace: _trace, ...line } = summary;
      process.stdout.write(`${JSON.stringify(line)}\n`);
      process.off("SIGINT", onSigint);
      const withAudio = summary.audio_ms.filter((ms) => ms > 0).length;
      // 130: stopped by Ctrl-C (128 + SIGINT), as shells report it.
      process.exitCode = summary.interrupted ? 130 : withAudio > 0 ? 0 : 1;
    },
  );

registerStoreCommands(program);

registerConformCommand(program);

const bench = program
  .command("bench")
  .description("print speed and memory figures (JSON lines), each with a ratio to a baseline of the same run")
  // `bench load` has options of its own (--sessions): those of `bench` are read before the subcommand only.
  .enablePositionalOptions()
  .option(
    "--only <names>",
    `comma list of ${BENCHES.join(", ")} (soak, slow-reader, idle, flood, postgres and list run only when named)`,
    benchNames,
  )
  .option("--sessions <n>", "concurrent sessions of the sessions bench", positive, 4)
  .option("--idle-sessions <n>", "sessions the idle bench opens", positive, 200)
  .option("--soak-seconds <s>", "seconds of speech the soak bench streams into one session", positive, 600)
  .addOption(new Option("--soak-lane <lane>", "lane of the soak session").choices(["native", "turn"]).default("native"))
  .addOption(
    new Option("--soak-pace <pace>", "fast: as fast as the server accepts; realtime: 100 ms of audio every 100 ms")
      .choices(["fast", "realtime"])
      .default("fast"),
  )
  .addOption(
    new Option(
      "--soak-pattern <pattern>",
      "stream: the speech file as it is; conversation: each utterance, then room tone while the model answers (each speaks about a third)",
    )
      .choices(["stream", "conversation"])
      .default("stream"),
  )
  .option("--audio <dir>", "folder of the test audio (../shared/audio beside the package)", AUDIO_DIR)
  .option("--postgres-url <url>", "the postgres bench's server (default: a throwaway one, Debian's postgresql)")
  .option("--postgres-seconds <s>", "seconds of each pgbench comparison of the postgres bench", positive, 5)
  .action(
    async (opts: {
      postgresUrl?: string;
      postgresSeconds: number;
      only?: string[];
      sessions: number;
      audio: string;
      soakSeconds: number;
      soakLane: string;
      soakPace: string;
      soakPattern: string;
      idleSessions: number;
    }) => {
      const { runBench } = await import("./bench.ts");
      await runBench(
        {
          audioDir: resolve(opts.audio),
          sessions: opts.sessions,
          soakSeconds: opts.soakSeconds,
          soakLane: opts.soakLane === "turn" ? "turn" : "native",
          soakPace: opts.soakPace === "realtime" ? "realtime" : "fast",
          soakPattern: opts.soakPattern === "conversation" ? "conversation" : "stream",
          idleSessions: opts.idleSessions,
          ...(opts.postgresUrl === undefined ? {} : { postgresUrl: opts.postgresUrl }),
          postgresSeconds: opts.postgresSeconds,
          print: (line) => process.stdout.write(`${JSON.stringify(line)}\n`),
        },
        opts.only ?? [],
      );
    },
  );

registerLoadBench(bench);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  // Users get one line, not a stack trace; DUPLEX_DEBUG=1 shows the stack.
  const { exitCode, message } = failureOf(error);
  process.stderr.write(`duplex: ${message}\n`);
  if (process.env.DUPLEX_DEBUG === "1") process.stderr.write(`${(error as Error).stack ?? ""}\n`);
  process.exit(exitCode);
}
