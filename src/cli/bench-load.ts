import { resolve } from "node:path";
import { type Command, Option } from "commander";
import { AUDIO_DIR } from "../conformance/files.ts";
import { positive, positiveInteger } from "./args.ts";
import {
  allDelivered,
  firstAudioP99,
  type LoadRunOptions,
  loadLine,
  loadTable,
  type RunMeasure,
  responsesLost,
  runAgainstRelay,
  runAgainstServer,
  searchCapacity,
} from "./load/index.ts";
import { startPostgresCluster } from "./postgres-temp.ts";

/**
 * `duplex bench load` (issue 11): realtime sessions with server VAD against a real server process, measured
 * against a bare `ws` relay under the same load. Each run prints one JSON line (`bench: "load"`, see
 * `loadLine`); `--find-capacity` searches the largest session count whose first-audio p99 stays within
 * {@link CAPACITY_SLACK_MS} of the single-session p99 with every response delivered, and prints a
 * `bench: "load-capacity"` line. A Markdown table of the runs goes to `log` (stderr) at the end.
 */
export interface LoadBenchOptions {
  /** Sessions of a plain run (ignored by the capacity search). */
  readonly sessions: number;
  /** Seconds of audio each session streams. */
  readonly seconds: number;
  readonly lanes: readonly ("native" | "turn")[];
  readonly rampS: number;
  readonly drainS: number;
  readonly audioDir: string;
  /** A running server's realtime endpoint (no CPU or RSS figures then); default: a `duplex serve` per run. */
  readonly url?: string;
  readonly findCapacity: boolean;
  /** The largest session count the capacity search tries. */
  readonly maxSessions: number;
  /** Run the relay baseline (default true). */
  readonly relay?: boolean;
  /** The store of the servers started here (issue 22, part 6): sqlite (default) or PostgreSQL. */
  readonly store?: "sqlite" | "postgres";
  /** With `store: postgres`: the server to create each run's database on (absent: a throwaway one). */
  readonly postgresUrl?: string;
  readonly print: (line: Record<string, unknown>) => void;
  readonly log: (text: string) => void;
}

/** How much the p99 of first audio may grow over the single-session p99 at capacity, ms (issue 11). */
export const CAPACITY_SLACK_MS = 150;

const CAPACITY_MEANING = `the largest session count whose first-audio p99 stays within ${CAPACITY_SLACK_MS} ms of the single-session p99 with every session completed and every expected response delivered (doubling, then bisecting to a tenth of it), higher is better; the relay's CPU is measured at that count`;

export const benchLoad = async (o: LoadBenchOptions): Promise<void> => {
  const cluster = o.store === "postgres" && o.postgresUrl === undefined ? await startPostgresCluster() : null;
  try {
    await benchLoadOn(o, o.store === "postgres" ? (o.postgresUrl ?? cluster?.url) : undefined);
  } finally {
    cluster?.stop();
  }
};

const benchLoadOn = async (o: LoadBenchOptions, postgresUrl: string | undefined): Promise<void> => {
  const lines: Record<string, unknown>[] = [];
  const relays = new Map<number, RunMeasure>();
  const relayFor = async (run: LoadRunOptions): Promise<RunMeasure | null> => {
    if (o.relay === false) return null;
    const known = relays.get(run.sessions) ?? (await runAgainstRelay(run));
    relays.set(run.sessions, known);
    return known;
  };
  const options = (lane: "native" | "turn", sessions: number): LoadRunOptions => ({
    sessions,
    seconds: o.seconds,
    lane,
    rampS: o.rampS,
    drainS: o.drainS,
    audioDir: o.audioDir,
    ...(o.url === undefined ? {} : { url: o.url }),
    ...(postgresUrl === undefined ? {} : { postgresUrl }),
  });
  const emit = (run: LoadRunOptions, server: RunMeasure, relay: RunMeasure | null): void => {
    const line = loadLine(run, server, relay);
    lines.push(line);
    o.print(line);
  };
  for (const lane of o.lanes) {
    if (!o.findCapacity) {
      const run = options(lane, o.sessions);
      const server = await runAgainstServer(run);
      emit(run, server, await relayFor(run));
      continue;
    }
    const single = options(lane, 1);
    const baseline = await runAgainstServer(single);
    emit(single, baseline, null);
    const limitMs = firstAudioP99(baseline) + CAPACITY_SLACK_MS;
    const measured = new Map<number, RunMeasure>();
    const fits = async (sessions: number): Promise<boolean> => {
      const run = options(lane, sessions);
      const server = await runAgainstServer(run);
      measured.set(sessions, server);
      emit(run, server, null);
      return allDelivered(server, sessions) && firstAudioP99(server) <= limitMs;
    };
    const found = allDelivered(baseline, 1) ? await searchCapacity(fits, o.maxSessions) : { capacity: 0, probes: [] };
    const atCapacity = measured.get(found.capacity) ?? baseline;
    const relay = found.capacity > 0 ? await relayFor(options(lane, found.capacity)) : null;
    const perSession = (m: RunMeasure | null) =>
      m?.cpuCores == null || found.capacity === 0 ? null : m.cpuCores / found.capacity;
    const serverPer = perSession(atCapacity);
    const relayPer = perSession(relay);
    o.print({
      bench: "load-capacity",
      meaning: CAPACITY_MEANING,
      lane,
      seconds: o.seconds,
      capacity: found.capacity,
      reached_max_sessions: found.capacity >= o.maxSessions,
      single_session_first_audio_after_stop_ms_p99: Math.round(firstAudioP99(baseline) * 10) / 10,
      limit_first_audio_after_stop_ms_p99: Math.round(limitMs * 10) / 10,
      probes: found.probes.map((p) => {
        const m = measured.get(p.sessions);
        return {
          sessions: p.sessions,
          fits: p.fits,
          first_audio_after_stop_ms_p99: m === undefined ? null : Math.round(firstAudioP99(m) * 10) / 10,
          responses_lost: m === undefined ? null : responsesLost(m),
        };
      }),
      server_cpu_cores: atCapacity.cpuCores === null ? null : Math.round(atCapacity.cpuCores * 1000) / 1000,
      relay_cpu_cores: relay?.cpuCores == null ? null : Math.round(relay.cpuCores * 1000) / 1000,
      cpu_per_session_ratio_to_relay:
        serverPer === null || relayPer === null ? null : Math.round((serverPer / relayPer) * 10) / 10,
    });
  }
  o.log(`${loadTable(lines)}\n`);
};

/**
 * Registers `bench load` under the `bench` command (whose own options must then be positional, see main.ts).
 * Usage errors (a non-number, an unknown lane) exit 2 through commander.
 */
export const registerLoadBench = (bench: Command): void => {
  bench
    .command("load")
    .description(
      "realtime sessions with server VAD against a duplex serve process, and a bare ws relay under the same load (issue 11; docs/benchmarks.md)",
    )
    .option("--sessions <n>", "concurrent sessions", positiveInteger, 20)
    .option("--seconds <s>", "seconds of audio each session streams in real time", positive, 30)
    .option("--url <url>", "a running server's realtime endpoint (no CPU or RSS figures then)")
    .addOption(
      new Option(
        "--lane <lane>",
        "turn: server_vad commits and responds, first audio from speech_stopped (what a stock client measures); native: the model answers when speech stops, first audio from the stop sent",
      )
        .choices(["native", "turn", "both"])
        .default("turn"),
    )
    .option("--find-capacity", `the largest N with p99 first audio within ${CAPACITY_SLACK_MS} ms of one session's`)
    .option("--max-sessions <n>", "the largest N the capacity search tries", positiveInteger, 512)
    .option("--ramp <s>", "session starts spread evenly over this many seconds", positive, 5)
    .option("--drain <s>", "the longest a session waits for its last responses after streaming", positive, 20)
    .option("--no-relay", "skip the relay baseline")
    .addOption(
      new Option("--store <kind>", "the store of the servers the bench starts")
        .choices(["sqlite", "postgres"])
        .default("sqlite"),
    )
    .option("--postgres-url <url>", "with --store postgres: the server to use (default: a throwaway one)")
    .option("--audio <dir>", "folder of jfk_16k.wav and jfk_24k.wav", AUDIO_DIR)
    .action(
      async (opts: {
        sessions: number;
        seconds: number;
        url?: string;
        lane: string;
        findCapacity?: boolean;
        maxSessions: number;
        ramp: number;
        drain: number;
        relay: boolean;
        audio: string;
        store: string;
        postgresUrl?: string;
      }) => {
        await benchLoad({
          sessions: opts.sessions,
          seconds: opts.seconds,
          lanes: opts.lane === "both" ? ["native", "turn"] : opts.lane === "turn" ? ["turn"] : ["native"],
          rampS: opts.ramp,
          drainS: opts.drain,
          audioDir: resolve(opts.audio),
          ...(opts.url === undefined ? {} : { url: opts.url }),
          findCapacity: opts.findCapacity === true,
          maxSessions: opts.maxSessions,
          relay: opts.relay,
          store: opts.store === "postgres" ? "postgres" : "sqlite",
          ...(opts.postgresUrl === undefined ? {} : { postgresUrl: opts.postgresUrl }),
          print: (line) => process.stdout.write(`${JSON.stringify(line)}\n`),
          log: (text) => process.stderr.write(text),
        });
      },
    );
};
