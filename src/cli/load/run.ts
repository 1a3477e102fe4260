import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freshDatabase } from "../postgres-temp.ts";
import { freePort, startServerProcess } from "../server-process.ts";
import { spawnScript } from "./child-process.ts";
import type { LoadClientConfig, LoadClientResult } from "./load-client.ts";
import { measureCpu, sampleRss } from "./proc.ts";
import { type HistogramBucket, histogramDelta, parseHistogram, parseSample } from "./stats.ts";

/** One load run's settings. Times in seconds. */
export interface LoadRunOptions {
  readonly sessions: number;
  readonly seconds: number;
  readonly lane: "native" | "turn";
  /** Session starts are spread evenly over this many seconds. */
  readonly rampS: number;
  /** The longest a session waits for its last responses after streaming. */
  readonly drainS: number;
  /** The folder of jfk_16k.wav and jfk_24k.wav. */
  readonly audioDir: string;
  /** A running server's realtime endpoint; without it a `duplex serve` process is started for the run. */
  readonly url?: string;
  /**
   * The store of a `duplex serve` started here: its sqlite file (default), or a fresh database on the PostgreSQL
   * server at `postgresUrl` (issue 22, part 6).
   */
  readonly postgresUrl?: string;
}

/** What one run measured: the load client's counts and the process's CPU and memory (null when not ours). */
export interface RunMeasure {
  readonly client: LoadClientResult;
  /** CPU cores the serving process used between the first session's start and the last one's close. */
  readonly cpuCores: number | null;
  /** The serving process's peak RSS over that time, MiB (sampled every 250 ms). */
  readonly rssMibPeak: number | null;
  /** `duplex_engine_added_seconds` observed during the run (buckets, seconds); null without /metrics. */
  readonly engineAdded: readonly HistogramBucket[] | null;
  /** The server's event-loop delay over the run (prom-client's, reset by the scrape before it), ms. */
  readonly eventLoopDelayMsP99: number | null;
  readonly eventLoopDelayMsMax: number | null;
  /** Time the server's V8 spent in garbage collection during the run (pauses, every kind), s. */
  readonly gcSeconds: number | null;
}

/** What the server's /metrics says of a run: scraped before and after it. */
type ServerFigures = Pick<RunMeasure, "engineAdded" | "eventLoopDelayMsP99" | "eventLoopDelayMsMax" | "gcSeconds">;

const NO_FIGURES: ServerFigures = {
  engineAdded: null,
  eventLoopDelayMsP99: null,
  eventLoopDelayMsMax: null,
  gcSeconds: null,
};

/** The inputs streamed: 16 and 24 kHz, alternating between sessions. */
export const LOAD_INPUTS = [
  { file: "jfk_16k.wav", rateHz: 16000 },
  { file: "jfk_24k.wav", rateHz: 24000 },
] as const;

// Compiled (dist/, `npm run build`) the scripts are .js beside this module; from the sources (tsx), .ts.
const SCRIPT_EXTENSION = import.meta.url.endsWith(".ts") ? ".ts" : ".js";
const CLIENT_SCRIPT = new URL(`./load-client${SCRIPT_EXTENSION}`, import.meta.url);
const RELAY_SCRIPT = new URL(`./relay-server${SCRIPT_EXTENSION}`, import.meta.url);

/** Runs the load client against `url` while measuring process `pid` (when known) from its first start to its end. */
const drive = async (
  o: LoadRunOptions,
  url: string,
  target: LoadClientConfig["target"],
  pid: number | null,
): Promise<Omit<RunMeasure, keyof ServerFigures>> => {
  const config: LoadClientConfig = {
    url,
    sessions: o.sessions,
    seconds: o.seconds,
    rampMs: o.rampS * 1000,
    drainMs: o.drainS * 1000,
    lane: o.lane,
    target,
    inputs: LOAD_INPUTS.map((i) => ({ path: join(o.audioDir, i.file), rateHz: i.rateHz })),
  };
  const client = spawnScript(CLIENT_SCRIPT, [JSON.stringify(config)]);
  try {
    await client.line("started", 60_000);
    const cpu = pid === null ? null : measureCpu(pid);
    const rss = pid === null ? null : sampleRss(pid, 250);
    try {
      await client.line("ended", (o.rampS + o.seconds + o.drainS + 120) * 1000);
    } finally {
      rss?.stop();
    }
    const cores = cpu?.cores().cores ?? null;
    const result = (await client.line("result", 30_000)) as unknown as LoadClientResult;
    return {
      client: result,
      cpuCores: cores,
      rssMibPeak: rss === null ? null : rss.peakKib() / 1024,
    };
  } finally {
    await client.stop();
  }
};

/** The server's /metrics now, or null when it cannot be read. */
const scrape = async (metricsUrl: string): Promise<string | null> => {
  try {
    const response = await fetch(metricsUrl);
    return response.ok ? await response.text() : null;
  } catch {
    return null;
  }
};

/** The run's figures from the scrapes before and after it. */
const figuresOf = (before: string | null, after: string | null): ServerFigures => {
  if (after === null) return NO_FIGURES;
  const engine = parseHistogram(after, "duplex_engine_added_seconds");
  const ms = (name: string) => {
    const v = parseSample(after, name);
    return v === null ? null : v * 1000;
  };
  const gcAfter = parseSample(after, "nodejs_gc_duration_seconds_sum");
  return {
    engineAdded:
      engine.length === 0
        ? null
        : histogramDelta(engine, before === null ? [] : parseHistogram(before, "duplex_engine_added_seconds")),
    eventLoopDelayMsP99: ms("nodejs_eventloop_lag_p99_seconds"),
    eventLoopDelayMsMax: ms("nodejs_eventloop_lag_max_seconds"),
    gcSeconds:
      gcAfter === null
        ? null
        : gcAfter - ((before === null ? null : parseSample(before, "nodejs_gc_duration_seconds_sum")) ?? 0),
  };
};

/** `ws://host:port/...` -> `http://host:port/metrics` (wss -> https). */
const metricsUrlOf = (url: string): string => {
  const u = new URL(url);
  return `${u.protocol === "wss:" ? "https:" : "http:"}//${u.host}/metrics`;
};

/**
 * One load run against a duplex server: the one at `o.url`, or a `duplex serve` process started on a fresh store
 * (echo runner, `duplex_session.max_sessions` above the sessions) and killed afterwards. CPU and RSS are measured
 * only for a server started here; engine-added latency wherever /metrics answers.
 */
export const runAgainstServer = async (o: LoadRunOptions): Promise<RunMeasure> => {
  if (o.url !== undefined) {
    const before = await scrape(metricsUrlOf(o.url));
    const measured = await drive(o, o.url, "server", null);
    return { ...measured, ...figuresOf(before, await scrape(metricsUrlOf(o.url))) };
  }
  const dir = await mkdtemp(join(tmpdir(), "duplex-load-"));
  const config = join(dir, "config.yaml");
  const store =
    o.postgresUrl === undefined
      ? ""
      : `event_store: { kind: postgres, url: "${await freshDatabase(o.postgresUrl)}" }\n`;
  await writeFile(
    config,
    `duplex_session: { max_sessions: ${o.sessions + 8} }\nlisten: { max_connections_per_address: ${o.sessions * 2 + 64}, max_connections: ${o.sessions * 2 + 128} }\n${store}`,
  );
  const port = await freePort();
  const { child } = await startServerProcess(port, o.postgresUrl === undefined ? join(dir, "data") : null, 60_000, [
    "--config",
    config,
  ]);
  const exited = once(child, "exit");
  try {
    const url = `ws://127.0.0.1:${port}/v1/realtime`;
    const before = await scrape(metricsUrlOf(url));
    const measured = await drive(o, url, "server", child.pid ?? null);
    return { ...measured, ...figuresOf(before, await scrape(metricsUrlOf(url))) };
  } finally {
    child.kill("SIGKILL");
    await exited;
    await rm(dir, { recursive: true, force: true });
  }
};

/** The same load against the bare relay (relay-server.ts) in a process of its own: its CPU and RSS. */
export const runAgainstRelay = async (o: LoadRunOptions): Promise<RunMeasure> => {
  const relay = spawnScript(RELAY_SCRIPT, []);
  try {
    const { port } = (await relay.line("listening", 60_000)) as { port: number };
    const measured = await drive(o, `ws://127.0.0.1:${port}/`, "relay", relay.child.pid ?? null);
    return { ...measured, ...NO_FIGURES };
  } finally {
    await relay.stop();
  }
};
