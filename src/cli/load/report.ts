import type { LoadRunOptions, RunMeasure } from "./run.ts";
import { histogramQuantile, percentile } from "./stats.ts";

/** The `meaning` of a `bench: "load"` line. */
export const LOAD_MEANING =
  "N realtime sessions (real speech, 16/24 kHz, 100 ms appends in real time) against a duplex server process with the echo runner, the load client in its own process: responses_lost should be 0 (expected = utterance stops: in the turn lane the input_audio_buffer.speech_stopped the client received (server VAD), in the model-native lane, which sends no speech events, the append completing a stop of the client's own input (Silero on the client); received = response.done completed; interrupted = cut by the stream's next utterance after its first audio); first_audio_after_stop_ms_* from that moment (first_audio_from) to the first audio delta's arrival, on the client's clock, as a user's client measures it, lower is better; engine_added_ms_* the server's own figure (runner output to socket write), interpolated linearly inside the buckets of its duplex_engine_added_seconds histogram (a quantile beyond the top finite bucket reads as that bound, a lower bound: engine_added_share_above_top_bucket says how many were above it); server_event_loop_delay_ms_* the server's event-loop delay over the run (prom-client's monitorEventLoopDelay, 10 ms resolution) and server_gc_share the fraction of the run's wall time its V8 spent in GC pauses, both from /metrics; server_cpu_cores from /proc/PID/stat over the run's wall time; client_cpu_cores the load client's own, and client_send_late_ms_p99 how late its appends went out: client_saturated is true when either says the load client, not the server, may be the limit (above 0.8 cores, or p99 late above 20 ms); cpu_per_session_ratio_to_relay = server CPU per session / a bare ws relay's under the same load (same N, same run), lower is better";

/** The load client's own CPU (cores) and its appends' p99 lateness (ms) beyond which its figures are suspect. */
export const CLIENT_SATURATED = { cpuCores: 0.8, sendLateMsP99: 20 } as const;

const round = (value: number | null, digits: number): number | null => {
  if (value === null || !Number.isFinite(value)) return null;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
};

/** Responses delivered: completed, or cut by a barge-in after their first audio arrived. */
const delivered = (m: RunMeasure): number => m.client.completed + m.client.interrupted;

/** The utterances that got no delivered response (never answered, failed, or cut before any audio). */
export const responsesLost = (m: RunMeasure): number => Math.max(0, m.client.expected - delivered(m));

/** Every session opened and completed, and every expected response delivered. */
export const allDelivered = (m: RunMeasure, sessions: number): boolean =>
  m.client.sessionsOpened === sessions && m.client.sessionsCompleted === sessions && responsesLost(m) === 0;

/** The p99 of first audio after the utterance's stop over every answered utterance of a run, ms. */
export const firstAudioP99 = (m: RunMeasure): number => percentile(m.client.firstAudioMs, 99);

/**
 * The JSON line of one load run (`bench: "load"`): counts, first-audio percentiles, engine-added percentiles, the
 * server's CPU (cores) and peak RSS (MiB), and, when a relay ran with the same load, its CPU and the ratio of CPU
 * per session. Numbers the run could not measure are null.
 */
export const loadLine = (o: LoadRunOptions, server: RunMeasure, relay: RunMeasure | null): Record<string, unknown> => {
  const c = server.client;
  const engine = server.engineAdded;
  const engineCount = engine?.at(-1)?.count ?? 0;
  const engineMs = (q: number) => (engine === null ? null : round(histogramQuantile(engine, q) * 1000, 2));
  const top = engine?.filter((b) => Number.isFinite(b.le)).at(-1);
  const perSession = (m: RunMeasure | null) => (m?.cpuCores == null ? null : m.cpuCores / o.sessions);
  const serverPer = perSession(server);
  const relayPer = perSession(relay);
  return {
    bench: "load",
    meaning: LOAD_MEANING,
    lane: o.lane,
    first_audio_from: o.lane === "turn" ? "speech_stopped received" : "stop sent",
    sessions: o.sessions,
    seconds: o.seconds,
    server: o.url ?? "duplex serve (started by the bench, echo runner)",
    store: o.url !== undefined ? null : o.postgresUrl === undefined ? "sqlite" : "postgres",
    sessions_opened: c.sessionsOpened,
    sessions_completed: c.sessionsCompleted,
    sessions_drain_timed_out: c.sessionsDrainTimedOut,
    responses_expected: c.expected,
    responses_received: c.completed,
    responses_interrupted: c.interrupted,
    responses_lost: responsesLost(server),
    responses_other_ends: c.otherEnds,
    responses_unprompted: c.unprompted,
    all_delivered: allDelivered(server, o.sessions),
    first_audio_after_stop_samples: c.firstAudioMs.length,
    first_audio_after_stop_ms_p50: round(percentile(c.firstAudioMs, 50), 1),
    first_audio_after_stop_ms_p90: round(percentile(c.firstAudioMs, 90), 1),
    first_audio_after_stop_ms_p99: round(percentile(c.firstAudioMs, 99), 1),
    engine_added_samples: engine === null ? null : engineCount,
    engine_added_ms_p50: engineMs(0.5),
    engine_added_ms_p99: engineMs(0.99),
    engine_added_ms_top_bucket: top === undefined ? null : round(top.le * 1000, 2),
    engine_added_share_above_top_bucket:
      top === undefined || engineCount === 0 ? null : round((engineCount - top.count) / engineCount, 3),
    server_event_loop_delay_ms_p99: round(server.eventLoopDelayMsP99, 1),
    server_event_loop_delay_ms_max: round(server.eventLoopDelayMsMax, 1),
    server_gc_share: server.gcSeconds === null ? null : round(server.gcSeconds / (c.wallMs / 1000), 3),
    server_cpu_cores: round(server.cpuCores, 3),
    server_rss_mib_peak: round(server.rssMibPeak, 1),
    client_cpu_cores: round(c.cpuCores, 3),
    client_send_late_ms_p99: round(c.sendLateMsP99, 1),
    client_send_late_ms_max: round(c.sendLateMsMax, 1),
    client_saturated: c.cpuCores > CLIENT_SATURATED.cpuCores || c.sendLateMsP99 > CLIENT_SATURATED.sendLateMsP99,
    relay_cpu_cores: relay === null ? null : round(relay.cpuCores, 3),
    relay_rss_mib_peak: relay === null ? null : round(relay.rssMibPeak, 1),
    relay_deltas_per_append:
      relay === null ? null : round(relay.client.audioDeltas / Math.max(1, relay.client.appendsSent), 3),
    cpu_per_session_ratio_to_relay: serverPer === null || relayPer === null ? null : round(serverPer / relayPer, 1),
    errors: c.errors,
    wall_s: round(c.wallMs / 1000, 1),
  };
};

const cell = (value: unknown): string => (value === null || value === undefined ? "-" : String(value));

/** An engine-added quantile, `>= bound` when it lies beyond the histogram's top finite bucket. */
const engineCell = (l: Record<string, unknown>, q: number, value: unknown): string =>
  Number(l.engine_added_share_above_top_bucket) > 1 - q ? `>= ${cell(l.engine_added_ms_top_bucket)}` : cell(value);

/** A Markdown table of `bench: "load"` lines, one row each (for stderr beside the JSON lines). */
export const loadTable = (lines: readonly Record<string, unknown>[]): string => {
  const header = [
    "lane",
    "sessions",
    "opened / completed",
    "responses expected / received / interrupted / lost",
    "first audio p50 / p90 / p99 (ms)",
    "engine added p50 / p99 (ms)",
    "server CPU (cores)",
    "server RSS peak (MiB)",
    "server loop delay p99 (ms) / GC share",
    "load client CPU (cores) / send late p99 (ms)",
    "relay CPU (cores)",
    "CPU per session vs relay",
    "errors",
  ];
  const rows = lines.map((l) => [
    cell(l.lane),
    cell(l.sessions),
    `${cell(l.sessions_opened)} / ${cell(l.sessions_completed)}`,
    `${cell(l.responses_expected)} / ${cell(l.responses_received)} / ${cell(l.responses_interrupted)} / ${cell(l.responses_lost)}`,
    `${cell(l.first_audio_after_stop_ms_p50)} / ${cell(l.first_audio_after_stop_ms_p90)} / ${cell(l.first_audio_after_stop_ms_p99)}`,
    `${engineCell(l, 0.5, l.engine_added_ms_p50)} / ${engineCell(l, 0.99, l.engine_added_ms_p99)}`,
    cell(l.server_cpu_cores),
    cell(l.server_rss_mib_peak),
    `${cell(l.server_event_loop_delay_ms_p99)} / ${cell(l.server_gc_share)}`,
    `${cell(l.client_cpu_cores)} / ${cell(l.client_send_late_ms_p99)}${l.client_saturated === true ? " (saturated)" : ""}`,
    cell(l.relay_cpu_cores),
    l.cpu_per_session_ratio_to_relay === null ? "-" : `${cell(l.cpu_per_session_ratio_to_relay)}x`,
    Object.entries((l.errors as Record<string, number> | undefined) ?? {})
      .map(([code, n]) => `${code}: ${n}`)
      .join(", ") || "none",
  ]);
  const row = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;
  return [row(header), row(header.map(() => "---")), ...rows.map(row)].join("\n");
};
