import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { firstValueFrom } from "rxjs";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type EntryMetadata, type NewEntry, WrongExpectedRevisionError } from "../../src/engine/ports/event-store.ts";
import { packBlob } from "../../src/infra/event-store/blob-packing.ts";
import { createSqliteEventStore, EventStoreClosedError } from "../../src/infra/event-store/index.ts";
import { textCodecs } from "../../src/infra/event-store/sqlite-writer.ts";
import { unpackText } from "../../src/infra/event-store/text-packing.ts";
import { eventStoreContract } from "../contract/event-store.contract.ts";
import { createLayout1File } from "../support/layout1.ts";
import { createLayout2File } from "../support/layout2.ts";
import { recordedSessions, reportRowOf } from "../support/session-list-reference.ts";

const folders: string[] = [];

/** A fresh folder under the OS temp dir, removed after the file's tests. */
function freshFolder(): string {
  const folder = mkdtempSync(join(tmpdir(), "sqlite-event-store-"));
  folders.push(folder);
  return folder;
}

afterAll(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

function entry(type: string, data: unknown = null, at = 1_000): NewEntry {
  const metadata: EntryMetadata = { at, epoch: 0, turnId: 0 };
  return { type, data, metadata };
}

eventStoreContract("sqlite :memory:", async () => createSqliteEventStore({ path: ":memory:" }));

eventStoreContract("sqlite file", async () => createSqliteEventStore({ path: join(freshFolder(), "events.db") }));

describe("sqlite event store", () => {
  const opened: { close(): Promise<void> | void }[] = [];
  afterEach(async () => {
    for (const resource of opened.splice(0)) await resource.close();
  });

  function open(path: string) {
    const store = createSqliteEventStore({ path });
    opened.push(store);
    return store;
  }

  it("keeps every entry, stream and position across a close and a reopen of the same file", async () => {
    const path = join(freshFolder(), "restart.db");
    const first = open(path);
    await first.append(
      "session-a",
      [entry("a0", { audio: Uint8Array.of(1, 2, 3) }, 10), entry("a1", null, 20)],
      "no_stream",
    );
    await first.append("session-b", [entry("b0", { n: 1 }, 30)], "no_stream");
    const before = { a: await first.read("session-a"), b: await first.read("session-b") };
    await first.close();

    const second = open(path);

    expect(await second.read("session-a")).toEqual(before.a);
    expect(await second.read("session-b")).toEqual(before.b);
    expect(await second.listStreams("session-")).toEqual([
      { stream: "session-a", revision: 1, count: 2, firstAt: 10, lastAt: 20 },
      { stream: "session-b", revision: 0, count: 1, firstAt: 30, lastAt: 30 },
    ]);
    await expect(second.append("session-a", [entry("stale")], 0)).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    expect(await second.append("session-a", [entry("a2")], 1)).toBe(2);
    const [a2] = await second.read("session-a", 2);
    expect(a2?.position).toBe(4);
  });

  it("opens the file in WAL mode with synchronous NORMAL, creating missing parent folders", async () => {
    const path = join(freshFolder(), "nested", "deeper", "wal.db");
    const store = open(path);
    await store.append("s", [entry("a")], "no_stream");

    const raw = new Database(path, { readonly: true });
    opened.push({ close: () => void raw.close() });

    expect(raw.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(await store.read("s")).toHaveLength(1);
  });

  it("keeps bytes out of the JSON: the data column holds references, the bin column the bytes", async () => {
    const path = join(freshFolder(), "layout.db");
    const store = open(path);
    await store.append(
      "s",
      [entry("audio", { pcm: Uint8Array.of(0xde, 0xad), tail: Uint8Array.of(0xbe, 0xef) })],
      "any",
    );
    await store.append("s", [entry("plain", { $bin: "user" })], "any");

    const raw = new Database(path, { readonly: true });
    opened.push({ close: () => void raw.close() });
    const rows = raw.prepare("SELECT data, bin, metadata, text_codec FROM entries ORDER BY position").all() as {
      data: string | Buffer;
      bin: Buffer | null;
      metadata: string;
      text_codec: number | null;
    }[];

    // The texts may be packed (text-packing.ts): the JSON is read through the codec the row names.
    expect(rows.map((row) => unpackText(row.data, row.metadata, textCodecs.name(row.text_codec)).json)).toEqual([
      '{"pcm":{"$bin":[0,2]},"tail":{"$bin":[2,2]}}',
      '{"$$bin":"user"}',
    ]);
    expect(rows[0]?.bin?.toString("hex")).toBe("deadbeef");
    expect(rows[1]?.bin).toBeNull();
  });

  it("numbers positions 1, 2, 3, ... with no gap left by a failed batch", async () => {
    const store = open(":memory:");
    await store.append("a", [entry("a0"), entry("a1")], "no_stream");
    await expect(store.append("b", [entry("b0"), { ...entry("bad"), data: { n: 1n } }], "no_stream")).rejects.toThrow(
      TypeError,
    );
    await expect(store.append("a", [entry("late")], "no_stream")).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    await store.append("b", [entry("b0")], "no_stream");

    const all = [...(await store.read("a")), ...(await store.read("b"))];

    expect(all.map((e) => [e.position, e.stream, e.type])).toEqual([
      [1, "a", "a0"],
      [2, "a", "a1"],
      [3, "b", "b0"],
    ]);
  });

  it("answers an empty batch with -1 for a missing stream and still checks the expected revision", async () => {
    const store = open(":memory:");

    expect(await store.append("s", [], "no_stream")).toBe(-1);
    expect(await store.append("s", [], "any")).toBe(-1);
    await expect(store.append("s", [], 0)).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    expect(await store.listStreams("")).toEqual([]);
  });

  it("checks the revision against appends made by another instance on the same file", async () => {
    const path = join(freshFolder(), "shared.db");
    const left = open(path);
    const right = open(path);

    await left.append("s", [entry("left")], "no_stream");

    const error = await right.append("s", [entry("right")], "no_stream").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WrongExpectedRevisionError);
    expect(error).toMatchObject({ actual: 0 });
    expect(await right.append("s", [entry("right")], 0)).toBe(1);
    expect((await left.read("s")).map((e) => e.type)).toEqual(["left", "right"]);
  });

  it("refuses to append to $all", async () => {
    const store = open(":memory:");

    await expect(store.append("$all", [entry("a")], "any")).rejects.toThrow("cannot append to stream $all");
    expect(await store.listStreams("")).toEqual([]);
  });

  it("rejects every use after close with EventStoreClosedError", async () => {
    const store = open(":memory:");
    await store.close();

    await expect(store.append("s", [entry("a")], "any")).rejects.toBeInstanceOf(EventStoreClosedError);
    await expect(store.append("s", [entry("a")], "any")).rejects.toThrow("event store is closed: cannot append");
    await expect(store.read("s")).rejects.toBeInstanceOf(EventStoreClosedError);
    await expect(store.listStreams("")).rejects.toBeInstanceOf(EventStoreClosedError);
    await expect(firstValueFrom(store.subscribe("s"))).rejects.toBeInstanceOf(EventStoreClosedError);
  });

  it("migrates a file of layout 1 (stream names in every row): entries, positions, streams and the position counter kept", async () => {
    const path = join(freshFolder(), "layout1.sqlite");
    const old = createLayout1File(path);
    const insert = old.prepare(
      'INSERT INTO entries (stream, revision, type, data, bin, metadata, bin_codec) VALUES (?, ?, ?, ?, ?, \'{"at":5,"epoch":0,"turnId":0}\', ?)',
    );
    // Stream a's first entry holds 100 ms of silence packed under layout 1, its codec by name (pcm16-d2-rice).
    const silence = packBlob(new Uint8Array(3200));
    // Stream b began first; a, then b again; a third stream's entries (positions 5 and 6) were deleted with it.
    insert.run("b", 0, "b0", '{"pcm":{"$bin":[0,2]}}', Uint8Array.of(1, 2), null);
    insert.run("a", 0, "a0", '{"pcm":{"$bin":[0,3200]}}', silence.bytes, silence.codec);
    insert.run("b", 1, "b1", "null", null, null);
    insert.run("a", 1, "a1", "null", null, null);
    insert.run("gone", 0, "g0", "null", null, null);
    insert.run("gone", 1, "g1", "null", null, null);
    old.exec(`DELETE FROM entries WHERE stream = 'gone';
      INSERT INTO streams VALUES ('b', 1, 1, 5, 5), ('a', 1, 2, 5, 5);`);
    old.close();

    const store = open(path);
    expect((await store.read("b")).map((e) => [e.position, e.revision, e.type, e.data])).toEqual([
      [1, 0, "b0", { pcm: Uint8Array.of(1, 2) }],
      [3, 1, "b1", null],
    ]);
    expect((await store.listStreams("")).map((s) => [s.stream, s.revision])).toEqual([
      ["b", 1],
      ["a", 1],
    ]);
    // The counter stood at 6: a new entry takes 7, not a position the deleted stream had.
    await store.append("a", [entry("a2")], 1);
    expect((await store.read("a")).map((e) => [e.position, e.type])).toEqual([
      [2, "a0"],
      [4, "a1"],
      [7, "a2"],
    ]);
    // A blob packed under layout 1 (its codec by name) reads back after the migration (by id).
    expect((await store.read("a"))[0]?.data).toEqual({ pcm: new Uint8Array(3200) });
    const raw = new Database(path, { readonly: true });
    opened.push({ close: () => void raw.close() });
    expect(raw.pragma("user_version", { simple: true })).toBe(3);
    expect(
      raw
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .all()
        .map((r) => (r as { name: string }).name),
    ).toEqual(["entries", "sqlite_sequence", "streams", "summaries"]);
    // Layout 3's summaries were folded from the migrated logs: one row per stream, at its last revision.
    expect(
      raw.prepare("SELECT stream, json_extract(fold, '$.revision') AS revision FROM summaries ORDER BY stream").all(),
    ).toEqual([
      { stream: "a", revision: 2 },
      { stream: "b", revision: 1 },
    ]);
  });

  it("migrates a file of layout 2 (the release before summaries): each session's summary folded from its log, as reportOf tells it", async () => {
    const path = join(freshFolder(), "layout2.sqlite");
    const sessions = await recordedSessions();
    const old = createLayout2File(path);
    for (const { stream, entries } of sessions) old.append(stream, entries);
    old.db.close();
    expect(() => createSqliteEventStore({ path, migrate: false })).toThrow(
      /has layout 2 \(user_version 2\): the server migrates it to layout 3 when it next starts on it/,
    );

    const store = open(path);
    const page = await store.listSummaries({ prefix: "session-", limit: 100 });
    expect(page.hasMore).toBe(false);
    expect(page.summaries.map((s) => s.stream).sort()).toEqual(sessions.map((s) => s.stream).sort());
    for (const { stream, entries } of sessions) {
      const row = page.summaries.find((s) => s.stream === stream);
      expect(row?.summary, stream).toEqual(reportRowOf(entries));
      expect(row?.firstAt).toBe(entries[0]?.metadata.at);
    }
    // The summary goes on with the next append.
    const [first] = sessions;
    const stream = first?.stream ?? "";
    const head = (first?.entries.length ?? 0) - 1;
    await store.append(stream, [entry("RequestRejected", { code: "input_backpressure", message: "m" }, 9e12)], head);
    const moved = (await store.listSummaries({ prefix: stream, limit: 1 })).summaries[0]?.summary;
    expect(moved).toEqual(reportRowOf(await store.read(stream)));
    expect(moved?.error_codes.at(-1)).toBe("input_backpressure");
    const raw = new Database(path, { readonly: true });
    opened.push({ close: () => void raw.close() });
    expect(raw.pragma("user_version", { simple: true })).toBe(3);
  });

  it("rebuilds every summary from the logs (duplex reindex): a row someone spoiled comes back as the log tells it", async () => {
    const path = join(freshFolder(), "rebuild.sqlite");
    const sessions = (await recordedSessions()).slice(0, 3);
    const store = open(path);
    for (const { stream, entries } of sessions) await store.append(stream, entries, "no_stream");
    const before = await store.listSummaries({ prefix: "session-", limit: 10 });
    const spoiler = new Database(path);
    spoiler.exec("UPDATE summaries SET state = 'open', fold = json_set(fold, '$.responses', 99)");
    spoiler.close();
    expect((await store.listSummaries({ prefix: "session-", limit: 10 })).summaries[0]?.summary.responses).toBe(99);

    expect(await store.rebuildSummaries()).toBe(3);
    expect(await store.listSummaries({ prefix: "session-", limit: 10 })).toEqual(before);
  });

  it("refuses a file of a newer layout than its own, leaving it as it was", () => {
    const path = join(freshFolder(), "layout4.sqlite");
    const newer = new Database(path);
    newer.pragma("user_version = 4");
    newer.exec("CREATE TABLE entries (position INTEGER PRIMARY KEY, shape TEXT)");
    newer.close();

    expect(() => createSqliteEventStore({ path })).toThrow(/has layout 4, newer than this server's \(3\)/);
    const raw = new Database(path, { readonly: true });
    opened.push({ close: () => void raw.close() });
    expect(raw.pragma("user_version", { simple: true })).toBe(4);
  });

  it("leaves a file of layout 1 as it was when asked not to migrate, or when a blob names a codec it does not know", () => {
    const layout1 = (codec: string | null): string => {
      const path = join(freshFolder(), "layout1.sqlite");
      const old = createLayout1File(path);
      old
        .prepare(
          "INSERT INTO entries (stream, revision, type, data, bin, metadata, bin_codec) VALUES ('s', 0, 'A', ?, ?, '{}', ?)",
        )
        .run('{"pcm":{"$bin":[0,4]}}', Uint8Array.of(1, 2, 3, 4), codec);
      old.exec("INSERT INTO streams VALUES ('s', 0, 1, 1, 1)");
      old.close();
      return path;
    };
    const unchanged = (path: string): void => {
      const raw = new Database(path, { readonly: true });
      try {
        expect(raw.pragma("user_version", { simple: true })).toBe(0);
        expect(raw.prepare("SELECT stream, bin_codec FROM entries").all()).toHaveLength(1);
      } finally {
        raw.close();
      }
    };

    const plain = layout1(null);
    expect(() => createSqliteEventStore({ path: plain, migrate: false })).toThrow(
      /has layout 1 \(user_version 0\): the server migrates it to layout 3 when it next starts on it/,
    );
    unchanged(plain);

    const foreign = layout1("pcm16-opus");
    expect(() => createSqliteEventStore({ path: foreign })).toThrow(
      /blobs packed with "pcm16-opus", a codec this version does not know; nothing migrated/,
    );
    unchanged(foreign);
  });
});
