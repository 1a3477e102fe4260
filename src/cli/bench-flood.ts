import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RealtimeClient } from "../client/index.ts";
import { percentile } from "./load/stats.ts";
import { freePort, startServerProcess } from "./server-process.ts";

/** Options of {@link benchFlood}. */
export interface FloodOptions {
  readonly print: (line: Record<string, unknown>) => void;
}

/** Frames a flood sends (20,000), over FLOOD_MS (2 s), in slices every 10 ms. */
const FLOOD = 20_000;
const FLOOD_MS = 2_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The floods: tiny client events (the event bucket), and one-sample audio appends (the appends' bucket). */
const FLOODS = [
  { what: "tiny events", frame: (i: number) => `{"type":"input_audio_buffer.clear","event_id":"f${i}"}` },
  {
    what: "one-sample audio appends",
    frame: (i: number) => `{"type":"input_audio_buffer.append","audio":"AAA=","event_id":"f${i}"}`,
  },
] as const;

/** Opens a session and makes it the socket's own with a heartbeat (its first event). */
const openSession = async (url: string): Promise<RealtimeClient> => {
  const client = await RealtimeClient.connect(url);
  await client.waitFor("session.created", { since: 0, timeoutMs: 30_000 });
  const since = client.received.length;
  client.send({ type: "session.heartbeat" });
  await client.waitFor("session.heartbeat_ack", { since, timeoutMs: 30_000 });
  return client;
};

/** Heartbeat round trips (ms) of `client`, one at a time 20 ms apart, until `until` resolves. */
const roundTripsUntil = async (client: RealtimeClient, until: Promise<unknown>): Promise<number[]> => {
  let done = false;
  void until.then(() => {
    done = true;
  });
  const trips: number[] = [];
  while (!done) {
    const since = client.received.length;
    const sent = performance.now();
    client.send({ type: "session.heartbeat" });
    await client.waitFor("session.heartbeat_ack", { since, timeoutMs: 10_000 });
    trips.push(performance.now() - sent);
    await sleep(20);
  }
  return trips;
};

/** FLOOD frames from `client`, paced evenly over FLOOD_MS; resolves with the time it took (ms). */
const flood = async (client: RealtimeClient, frame: (i: number) => string): Promise<number> => {
  const started = performance.now();
  let sent = 0;
  while (sent < FLOOD) {
    const due = Math.min(FLOOD, Math.ceil(((performance.now() - started) / FLOOD_MS) * FLOOD) + 100);
    for (; sent < due; sent += 1) client.sendRaw(frame(sent));
    await sleep(10);
  }
  return performance.now() - started;
};

const figures = (trips: readonly number[]) => ({
  heartbeats: trips.length,
  p50_ms: Math.round(percentile(trips, 50) * 10) / 10,
  p95_ms: Math.round(percentile(trips, 95) * 10) / 10,
  max_ms: Math.round(Math.max(...trips) * 10) / 10,
});

/**
 * `duplex bench --only flood` (issue 32, part 2, "Event rate": another session's heartbeats stay under 150 ms while
 * one session floods): a real server process (its event and appends buckets at 100 a second, bursts of 200), a
 * bystander session that sends heartbeats one at a time, 20 ms apart, and a flooder that sends 20,000 frames in 2 s,
 * first tiny events, then one-sample audio appends. The baseline is the bystander's round trips for 2 s without a
 * flood, in the same process. Prints one line per run: round trips measured, p50, p95 and max (ms), and the flood's
 * own duration (ms). The refusals and the store's growth are what test/e2e/event-rate.e2e.test.ts asserts.
 */
export const benchFlood = async (o: FloodOptions): Promise<void> => {
  const dir = await mkdtemp(join(tmpdir(), "duplex-flood-"));
  const config = join(dir, "config.yaml");
  await writeFile(config, "limits: { events_per_s: 100, event_burst: 200, appends_per_s: 100, append_burst: 200 }\n");
  const port = await freePort();
  const { child } = await startServerProcess(port, join(dir, "data"), 60_000, ["--config", config]);
  const url = `ws://127.0.0.1:${port}/v1/realtime`;
  const clients: RealtimeClient[] = [];
  try {
    const bystander = await openSession(url);
    clients.push(bystander);
    const meaning = "a bystander's heartbeat round trips while another session floods, against none: lower is better";
    o.print({ bench: "flood", meaning, flood: "none", ...figures(await roundTripsUntil(bystander, sleep(FLOOD_MS))) });
    for (const { what, frame } of FLOODS) {
      const flooder = await openSession(url);
      clients.push(flooder);
      const flooding = flood(flooder, frame);
      const trips = await roundTripsUntil(bystander, flooding);
      o.print({ bench: "flood", meaning, flood: what, flood_ms: Math.round(await flooding), ...figures(trips) });
    }
  } finally {
    await Promise.all(clients.map((c) => c.terminate()));
    child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  }
};
