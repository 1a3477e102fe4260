import { readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { streamOf } from "../../src/engine/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { connectRaw, type Peer } from "../support/raw-socket.ts";
import { startTestServer } from "../support/server.ts";

/**
 * The event rate end to end (issue 32, part 2, "Event rate"; BEHAVIOUR.md, "The edges"): one client floods its
 * session with 20,000 tiny events in 2 s over a real socket while another session sends heartbeats. The store grows
 * by less than 3 MB, the flooder is told `input_backpressure` at most once a second with the event_id of the event
 * refused, the other session's heartbeats are answered throughout, and the flooded session answers a command
 * afterwards. (The bucket's rule itself, on a virtual clock: test/engine/event-rate.test.ts. How fast the other
 * session's heartbeats are answered meanwhile, against none, is a benchmark: `duplex bench --only flood`.)
 */

const FLOOD = 20_000;
const FLOOD_MS = 2_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Bytes of the store's files (the sqlite file, its WAL and shared memory). */
const storeBytes = async (dir: string): Promise<number> => {
  let total = 0;
  for (const name of await readdir(dir))
    if (name.startsWith("duplex.sqlite")) total += (await stat(join(dir, name))).size;
  return total;
};

/** Opens a socket's session and makes it the socket's own (its first event); returns the peer and the session id. */
const openSession = async (url: string): Promise<{ peer: Peer; id: string }> => {
  const peer = await connectRaw(url);
  const created = await peer.waitFor((e) => e.type === "session.created", 0);
  peer.ws.send(JSON.stringify({ type: "session.heartbeat", event_id: "first" }));
  await peer.waitFor((e) => e.type === "session.heartbeat_ack", 0);
  return { peer, id: String((created.session as { id: string }).id) };
};

describe("a flood of tiny events", () => {
  let server: Awaited<ReturnType<typeof startTestServer>> | undefined;
  const peers: Peer[] = [];
  afterEach(async () => {
    for (const peer of peers.splice(0)) if (peer.ws.readyState === WebSocket.OPEN) peer.ws.close();
    await server?.stop();
    server = undefined;
  });

  it.each([
    {
      what: "tiny events",
      type: "input_audio_buffer.clear",
      frame: (i: number) => `{"type":"input_audio_buffer.clear","event_id":"f${i}"}`,
    },
    {
      what: "one-sample audio appends",
      type: "input_audio_buffer.append",
      frame: (i: number) => `{"type":"input_audio_buffer.append","audio":"AAA=","event_id":"f${i}"}`,
    },
  ])(
    "a flood of $what grows the store by less than 3 MB, is told input_backpressure at most once a second, and leaves another session's heartbeats answered",
    async ({ type, frame }) => {
      // The appends' bucket set to the events' numbers (its defaults are 1000 a second, a burst of 4000).
      server = await startTestServer({ limits: { appends_per_s: 100, append_burst: 200 } });
      const flooder = await openSession(server.url);
      const bystander = await openSession(server.url);
      peers.push(flooder.peer, bystander.peer);
      const host = server.engine.get(flooder.id);
      await host?.settled();
      const bytesBefore = await storeBytes(server.dataDir);
      const entriesBefore = (await server.store.read(streamOf(flooder.id))).length;

      // The bystander's heartbeats, one at a time, round trips measured, all through the flood.
      const roundTrips: number[] = [];
      let flooding = true;
      const heartbeats = (async () => {
        while (flooding) {
          const since = bystander.peer.received.length;
          const sent = performance.now();
          bystander.peer.ws.send(JSON.stringify({ type: "session.heartbeat" }));
          await bystander.peer.waitFor((e) => e.type === "session.heartbeat_ack", since, 5_000);
          roundTrips.push(performance.now() - sent);
          await sleep(20);
        }
      })();

      // 20,000 frames paced evenly over 2 s, in slices every 10 ms.
      const started = performance.now();
      const since = flooder.peer.received.length;
      let sent = 0;
      while (sent < FLOOD) {
        const due = Math.min(FLOOD, Math.ceil(((performance.now() - started) / FLOOD_MS) * FLOOD) + 100);
        for (; sent < due; sent += 1) flooder.peer.ws.send(frame(sent));
        await sleep(10);
      }
      const floodMs = performance.now() - started;
      // Every frame sent has reached the server and been decided or dropped before anything is measured.
      await sleep(200);
      await host?.settled();
      flooding = false;
      await heartbeats;

      const grown = (await storeBytes(server.dataDir)) - bytesBefore;
      const received = flooder.peer.received.slice(since);
      const refusals = received.filter((e) => e.type === "error");
      const entries = await server.store.read(streamOf(flooder.id));
      // The flood's frames the session took: its commands of that type in the log.
      const cleared = entries
        .slice(entriesBefore)
        .filter(
          (e) => e.type === "CommandReceived" && (e.data as { command: { type: string } }).command.type === type,
        ).length;
      const rejected = entries.filter((e) => e.type === "RequestRejected").slice(-refusals.length);
      console.log(
        `flood: ${FLOOD} events in ${floodMs.toFixed(0)} ms; store +${(grown / 1024).toFixed(0)} KiB, +${entries.length - entriesBefore} entries; ${cleared} answered, ${refusals.length} refusals told; heartbeat round trips: ${roundTrips.length}, max ${Math.max(...roundTrips).toFixed(1)} ms`,
      );

      // The burst and the refill: 200 + 100 a second, and nothing else of the flood answered.
      expect(cleared).toBeGreaterThanOrEqual(200);
      expect(cleared).toBeLessThanOrEqual(200 + Math.ceil((floodMs + 400) / 10));
      expect(entries.length - entriesBefore).toBeLessThanOrEqual(2 * cleared + 2 * refusals.length);
      // Told at most once a second, each with the event_id of the event refused, as the log records them.
      expect(refusals.length).toBeGreaterThanOrEqual(1);
      expect(refusals.length).toBeLessThanOrEqual(Math.ceil((floodMs + 400) / 1000));
      for (const refusal of refusals)
        expect(refusal.error).toMatchObject({
          type: "rate_limit_error",
          code: "input_backpressure",
          event_id: expect.stringMatching(/^f\d+$/),
        });
      expect(rejected.map((e) => (e.data as { clientEventId: string }).clientEventId)).toEqual(
        refusals.map((e) => (e.error as { event_id: string }).event_id),
      );
      const told = rejected.map((e) => e.metadata.at);
      for (let i = 1; i < told.length; i += 1)
        expect((told[i] as number) - (told[i - 1] as number)).toBeGreaterThanOrEqual(1_000);
      // The bystander was served throughout: each heartbeat answered before the next was sent.
      expect(roundTrips.length).toBeGreaterThan(20);

      // The flooded session still works, and its log replays identical.
      await sleep(50);
      const after = flooder.peer.received.length;
      flooder.peer.ws.send(
        JSON.stringify({ type: "session.update", event_id: "after", session: { instructions: "still here" } }),
      );
      await flooder.peer.waitFor((e) => e.type === "session.updated", after);
      expect(flooder.peer.received.slice(after).filter((e) => e.type === "error")).toEqual([]);
      expect(replayEntries(await server.store.read(streamOf(flooder.id))).divergence).toBeNull();

      // The whole store once closed (its WAL written back into the file), the two sessions and the flood included.
      const { dataDir } = server;
      await server.close();
      const closed = await storeBytes(dataDir);
      console.log(`store closed: ${(closed / 1024).toFixed(0)} KiB in all`);
      expect(closed).toBeLessThan(3 * 1024 * 1024);
      server = undefined;
      await rm(dataDir, { recursive: true, force: true });
    },
  );

  it("does not count audio appends against the event rate", async () => {
    server = await startTestServer();
    const { peer, id } = await openSession(server.url);
    peers.push(peer);
    const audio = Buffer.alloc(480).toString("base64");
    const since = peer.received.length;
    for (let i = 0; i < 600; i += 1)
      peer.ws.send(JSON.stringify({ type: "input_audio_buffer.append", event_id: `a${i}`, audio }));
    peer.ws.send(JSON.stringify({ type: "session.heartbeat", event_id: "last" }));
    await peer.waitFor((e) => e.type === "session.heartbeat_ack", since);
    await server.engine.get(id)?.settled();
    expect(peer.received.slice(since).filter((e) => e.type === "error")).toEqual([]);
    const appends = (await server.store.read(streamOf(id))).filter(
      (e) =>
        e.type === "CommandReceived" &&
        (e.data as { command: { type: string } }).command.type === "input_audio_buffer.append",
    );
    expect(appends).toHaveLength(600);
  });
});
