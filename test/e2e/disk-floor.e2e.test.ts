import { tmpdir } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { streamOf } from "../../src/engine/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { createDiskGuard, diskLevelOf, statfsFreeBytes } from "../../src/server/disk-guard.ts";
import { connectRaw, type Peer } from "../support/raw-socket.ts";
import { startTestServer } from "../support/server.ts";

/**
 * The store's disk (issue 32, part 2, "Disk"; docs/deploy.md, "Limits"): below `limits.disk_free_floor_mb` a new
 * session is refused with `resource_exhausted` exactly as at `max_sessions` while open ones go on; below
 * `limits.disk_hard_floor_mb` open sessions end cleanly (`resource_exhausted`, `session.closed`, close 1013) with
 * `SessionClosed` in their logs, which replay identical; each change is logged once. The free space is injected.
 */

const MB = 1024 * 1024;

describe("the disk guard", () => {
  const recording = () => {
    const lines: [string, string][] = [];
    const at = (level: string) => (_: object, msg: string) => void lines.push([level, msg]);
    return { lines, log: { info: at("info"), warn: at("warn"), error: at("error") } };
  };

  it("tells the level of the free space against the floors", () => {
    const floors = { floorMb: 256, hardFloorMb: 64 };
    expect(diskLevelOf(256 * MB, floors)).toBe("ok");
    expect(diskLevelOf(256 * MB - 1, floors)).toBe("low");
    expect(diskLevelOf(64 * MB, floors)).toBe("low");
    expect(diskLevelOf(64 * MB - 1, floors)).toBe("critical");
    // A hard floor above the floor refuses new sessions from it too.
    expect(diskLevelOf(100 * MB, { floorMb: 10, hardFloorMb: 200 })).toBe("critical");
  });

  it("logs each change of level once, refuses while below the floor, and ends sessions on every look below the hard floor", async () => {
    const { lines, log } = recording();
    const ended: string[] = [];
    let free = 1000 * MB;
    const guard = createDiskGuard({
      dir: tmpdir(),
      floorMb: 256,
      hardFloorMb: 64,
      freeBytes: async () => free,
      log,
      onHardFloor: (message) => ended.push(message),
    });
    const levels: string[] = [];
    const refusals: (string | null)[] = [];
    for (const mb of [1000, 200, 199, 150, 50, 40, 300, 300]) {
      free = mb * MB;
      levels.push(await guard.check());
      refusals.push(guard.refusal()?.code ?? null);
    }
    expect(levels).toEqual(["ok", "low", "low", "low", "critical", "critical", "ok", "ok"]);
    expect(refusals).toEqual([null, ...Array(5).fill("resource_exhausted"), null, null]);
    expect(lines).toEqual([
      ["warn", "store disk below limits.disk_free_floor_mb: new sessions are refused"],
      ["error", "store disk below limits.disk_hard_floor_mb: open sessions are ended"],
      ["info", "store disk has room again: new sessions are admitted"],
    ]);
    expect(ended).toEqual([
      expect.stringContaining("has 50 MB free, below limits.disk_hard_floor_mb (64 MB)"),
      expect.stringContaining("has 40 MB free"),
    ]);
    expect(guard.refusal()).toBeNull();
  });

  it("keeps its level when statfs fails, and says so once", async () => {
    const { lines, log } = recording();
    let fail = false;
    const guard = createDiskGuard({
      dir: tmpdir(),
      floorMb: 256,
      hardFloorMb: 64,
      freeBytes: async () => {
        if (fail) throw new Error("gone");
        return 100 * MB;
      },
      log,
      onHardFloor: () => undefined,
    });
    expect(await guard.check()).toBe("low");
    fail = true;
    expect(await guard.check()).toBe("low");
    expect(await guard.check()).toBe("low");
    expect(lines.map(([level]) => level)).toEqual(["warn", "warn"]);
    expect(lines[1]?.[1]).toBe("store disk free space unknown: statfs failed");
  });

  it("reads the real free space with statfs", async () => {
    expect(await statfsFreeBytes(tmpdir())).toBeGreaterThan(0);
  });
});

const until = async (what: string, test: () => boolean, timeoutMs = 5_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

describe("a server whose store's disk fills up", () => {
  let server: Awaited<ReturnType<typeof startTestServer>> | undefined;
  const peers: Peer[] = [];
  afterEach(async () => {
    for (const peer of peers.splice(0)) if (peer.ws.readyState === WebSocket.OPEN) peer.ws.close();
    await server?.stop();
    server = undefined;
  });

  /** A socket whose session is its own (its first event answered). */
  const open = async (url: string): Promise<{ peer: Peer; id: string }> => {
    const peer = await connectRaw(url);
    peers.push(peer);
    const created = await peer.waitFor((e) => e.type === "session.created", 0);
    peer.ws.send(JSON.stringify({ type: "session.heartbeat", event_id: "first" }));
    await peer.waitFor((e) => e.type === "session.heartbeat_ack", 0);
    return { peer, id: String((created.session as { id: string }).id) };
  };

  /** A socket refused at admission: what it got for its first event, and its close. */
  const refused = async (
    url: string,
  ): Promise<{ error: Record<string, unknown> | undefined; close: number; all: string[] }> => {
    const peer = await connectRaw(url);
    peers.push(peer);
    peer.ws.send(JSON.stringify({ type: "session.update", event_id: "knock", session: {} }));
    const { code } = await peer.closed;
    return {
      error: peer.received.find((e) => e.type === "error")?.error as Record<string, unknown> | undefined,
      close: code,
      all: peer.received.map((e) => e.type),
    };
  };

  it("refuses new sessions below the floor as max_sessions does, and ends open ones cleanly below the hard floor", async () => {
    let free = 10_000 * MB;
    server = await startTestServer(
      { duplex_session: { max_sessions: 2 } },
      { disk: { freeBytes: async () => free, intervalMs: 20 } },
    );
    const running = server;
    const a = await open(running.url);
    const b = await open(running.url);
    // At max_sessions: what a refused client sees.
    const byCapacity = await refused(running.url);
    b.peer.ws.send(JSON.stringify({ type: "session.close" }));
    await b.peer.closed;
    await until("a free slot", () => running.engine.admission() === null);

    free = 200 * MB;
    await until("the guard's look", () => running.engine.admission() !== null);
    const byDisk = await refused(running.url);
    expect(byDisk.error).toMatchObject({
      type: "rate_limit_error",
      code: "resource_exhausted",
      event_id: "knock",
      message: expect.stringContaining("below limits.disk_free_floor_mb (256 MB)"),
    });
    // Exactly what max_sessions gives, but for the message.
    const withoutMessage = (r: typeof byDisk) => ({ ...r, error: { ...r.error, message: undefined } });
    expect(withoutMessage(byDisk)).toEqual(withoutMessage(byCapacity));
    expect(byDisk.close).toBe(1013);

    // The open session goes on.
    const since = a.peer.received.length;
    a.peer.ws.send(JSON.stringify({ type: "session.heartbeat", event_id: "still" }));
    await a.peer.waitFor((e) => e.type === "session.heartbeat_ack", since);

    // Below the hard floor it ends, told why, its socket closed with 1013, its log closed and replayable.
    free = 32 * MB;
    const closed = await a.peer.closed;
    expect(closed.code).toBe(1013);
    const tail = a.peer.received.slice(since + 1);
    expect(tail.map((e) => e.type)).toEqual(["error", "session.closed"]);
    expect(tail[0]?.error).toMatchObject({
      type: "rate_limit_error",
      code: "resource_exhausted",
      event_id: null,
      message: expect.stringContaining("below limits.disk_hard_floor_mb (64 MB)"),
    });
    expect(tail[1]).toMatchObject({ session_id: a.id, reason: "resource_exhausted" });
    const entries = await running.store.read(streamOf(a.id));
    expect(entries.slice(-3).map((e) => e.type)).toEqual(["ResourceExhausted", "RequestRejected", "SessionClosed"]);
    expect(entries.at(-1)?.data).toEqual({ reason: "resource_exhausted" });
    expect(replayEntries(entries).divergence).toBeNull();
    expect(running.engine.get(a.id)).toBeUndefined();

    // Space freed: sessions are admitted again.
    free = 10_000 * MB;
    await until("the guard's look", () => running.engine.admission() === null);
    await open(running.url);
  });

  it("has no guard for a store without a local disk (sqlite :memory:)", async () => {
    server = await startTestServer(
      { event_store: { kind: "sqlite", path: ":memory:" } },
      { disk: { freeBytes: async () => 0, intervalMs: 20 } },
    );
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(server.engine.admission()).toBeNull();
    await open(server.url);
  });
});
