import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { parseConfig } from "../../src/infra/config.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { startServer } from "../../src/server/index.ts";

/**
 * One server per store (issue 10, "One server per store"): a second server on a store in use is refused before it
 * reads or writes anything, and the first server's sessions go on; a lock left by a dead process is taken over.
 */
describe("one server per store", () => {
  let dir = "";
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "duplex-lock-"));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  const configFor = (path: string) =>
    parseConfig({ log_level: "silent", listen: { host: "127.0.0.1", port: 0 }, event_store: { kind: "sqlite", path } });

  it("refuses a second server on a store in use, naming the process, and the first one's session goes on", async () => {
    const path = join(dir, "a", "duplex.sqlite");
    const first = await startServer(configFor(path));
    try {
      const client = await RealtimeClient.connect(first.url);
      const created = await client.waitFor("session.created", { since: 0 });
      client.send({ type: "session.update", session: {} });
      await client.waitFor("session.updated", { since: 0 });
      const before = await first.store.read(`session-${(created.session as { id: string }).id}`);
      await expect(startServer(configFor(path))).rejects.toMatchObject({
        name: "StoreInUseError",
        message: `${path} is used by process ${process.pid} (another duplex server); stop it, or pass another --data`,
      });
      // Nothing was recovered or written by the refused server: the session's log is as it was, and it goes on.
      expect(await first.store.read(`session-${(created.session as { id: string }).id}`)).toEqual(before);
      client.send({ type: "session.heartbeat" });
      await client.waitFor("session.heartbeat_ack", { since: 0 });
      client.send({ type: "session.close" });
      await client.closed;
    } finally {
      await first.close();
    }
    // Closing released the lock: the store opens again.
    const again = await startServer(configFor(path));
    await again.close();
  });

  it("takes over a lock whose process is gone", async () => {
    const path = join(dir, "b", "duplex.sqlite");
    const first = await startServer(configFor(path));
    await first.close();
    await writeFile(`${path}.lock`, "2147483646\n");
    const server = await startServer(configFor(path));
    expect((await readFile(`${path}.lock`, "utf8")).trim()).toBe(String(process.pid));
    await server.close();
  });

  it("fails on a port in use before recovering anything, and leaves the store unlocked", async () => {
    const path = join(dir, "c", "duplex.sqlite");
    const holder = await startServer(configFor(join(dir, "holder", "duplex.sqlite")));
    try {
      const busy = parseConfig({
        log_level: "silent",
        listen: { host: "127.0.0.1", port: holder.port },
        event_store: { kind: "sqlite", path },
      });
      await expect(startServer(busy)).rejects.toMatchObject({ code: "EADDRINUSE" });
      const free = await startServer(configFor(path));
      await free.close();
    } finally {
      await holder.close();
    }
  });
});

describe("retention in the deployment file", () => {
  it("removes finished sessions older than retention.older_than at start, after exporting them; open ones stay", async () => {
    const dir = await mkdtemp(join(tmpdir(), "duplex-retention-"));
    const path = join(dir, "data", "duplex.sqlite");
    const exportDir = join(dir, "exported");
    try {
      const config = (extra: Record<string, unknown> = {}) =>
        parseConfig({
          log_level: "silent",
          listen: { host: "127.0.0.1", port: 0 },
          event_store: { kind: "sqlite", path },
          ...extra,
        });
      const first = await startServer(config());
      const done = await RealtimeClient.connect(first.url);
      const doneId = ((await done.waitFor("session.created", { since: 0 })).session as { id: string }).id;
      done.send({ type: "session.close" });
      await done.closed;
      const live = await RealtimeClient.connect(first.url);
      const liveId = ((await live.waitFor("session.created", { since: 0 })).session as { id: string }).id;
      live.send({ type: "session.update", session: {} });
      await live.waitFor("session.updated", { since: 0 });
      await first.close();

      const second = await startServer(config({ retention: { older_than: "0", export_dir: exportDir } }));
      try {
        const streams = (await second.store.listStreams("session-")).map((s) => s.stream);
        expect(streams).toEqual([`session-${liveId}`]);
        const exported = await readSessionFile(join(exportDir, `${doneId}.jsonl`));
        expect(replayEntries(exported.entries).divergence).toBeNull();
      } finally {
        await second.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("refuses a retention that is not a duration, naming the key", () => {
    expect(() => parseConfig({ retention: { older_than: "a week" } })).toThrow(
      /retention\.older_than: expected a duration/,
    );
  });
});
