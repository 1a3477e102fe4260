import pg from "pg";
import { firstValueFrom, take, timeout, toArray } from "rxjs";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type EventStore, WrongExpectedRevisionError } from "../../src/engine/ports/event-store.ts";
import { createPostgresEventStore } from "../../src/infra/event-store/postgres.ts";
import { eventStoreContract } from "../contract/event-store.contract.ts";

/**
 * The PostgreSQL adapter (issue 22, part 2) against a real PostgreSQL server (test/support/postgres.ts starts one for
 * the run): the whole EventStore contract, then what only a shared database has: appends of many sessions in one
 * transaction where one conflict fails none of the others, and two stores (two nodes) over one database.
 */
const url = inject("postgresUrl");
if (url === null) console.warn("PostgreSQL tests skipped: PostgreSQL is not installed (apt-get install postgresql)");

if (url !== null) eventStoreContract("postgres", () => createPostgresEventStore({ url, pollMs: 20 }));

const at = (n: number) => ({ at: n, epoch: 0, turnId: 0 });
let counter = 0;
const unique = (label: string) => `${label}-${process.pid}-${Date.now().toString(36)}-${++counter}`;

describe.skipIf(url === null)("postgres event store", () => {
  const stores: EventStore[] = [];
  let admin: pg.Client;
  beforeAll(async () => {
    admin = new pg.Client(url ?? "");
    await admin.connect();
  });
  afterAll(async () => {
    for (const store of stores) await store.close();
    await admin.end();
  });
  const open = async () => {
    const store = await createPostgresEventStore({ url: url ?? "", pollMs: 20 });
    stores.push(store);
    return store;
  };

  it("commits the appends of many sessions together, and one session's conflict fails none of the others", async () => {
    const store = await open();
    const streams = Array.from({ length: 40 }, () => unique("group"));
    for (const stream of streams) await store.append(stream, [{ type: "a", data: {}, metadata: at(1) }], "no_stream");
    const audio = new Uint8Array(3200).fill(7);
    const results = await Promise.allSettled(
      streams.map((stream, i) =>
        store.append(stream, [{ type: "b", data: { audio }, metadata: at(2) }], i === 13 ? 5 : 0),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(streams.map((_, i) => (i === 13 ? "rejected" : "fulfilled")));
    expect((results[13] as PromiseRejectedResult).reason).toBeInstanceOf(WrongExpectedRevisionError);
    // The 39 appends went in few transactions (rows of one transaction share its xmin), not one each.
    const { rows } = await admin.query<{ transactions: string }>(
      "SELECT count(DISTINCT xmin::text)::text AS transactions FROM duplex_entries WHERE stream = ANY($1) AND revision = 1",
      [streams],
    );
    expect(Number(rows[0]?.transactions)).toBeLessThanOrEqual(3);
    // The audio is stored as its bytes.
    const sizes = await admin.query<{ n: number }>(
      "SELECT octet_length(bin) AS n FROM duplex_entries WHERE stream = $1 AND revision = 1",
      [streams[0]],
    );
    expect(sizes.rows[0]?.n).toBe(3200);
  });

  it("two stores over one database: a live tail on one sees the other's appends once, in order", async () => {
    const [a, b] = [await open(), await open()];
    const stream = unique("nodes");
    await a.append(stream, [{ type: "e0", data: {}, metadata: at(1) }], "no_stream");
    const tail = firstValueFrom(b.subscribe(stream).pipe(take(6), toArray(), timeout(5_000)));
    let revision = 0;
    for (let i = 1; i < 6; i += 1) {
      const writer = i % 2 === 0 ? b : a;
      revision = await writer.append(stream, [{ type: `e${i}`, data: {}, metadata: at(i) }], revision);
    }
    expect((await tail).map((e) => [e.revision, e.type])).toEqual(Array.from({ length: 6 }, (_, i) => [i, `e${i}`]));
  });

  it("two stores appending at the same expected revision: exactly one wins, the other is refused", async () => {
    const [a, b] = [await open(), await open()];
    for (let round = 0; round < 10; round += 1) {
      const stream = unique("race");
      await a.append(stream, [{ type: "start", data: {}, metadata: at(1) }], "no_stream");
      const results = await Promise.allSettled([
        a.append(stream, [{ type: "from-a", data: {}, metadata: at(2) }], 0),
        b.append(stream, [{ type: "from-b", data: {}, metadata: at(2) }], 0),
      ]);
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      const refused = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
      expect(refused.reason).toBeInstanceOf(WrongExpectedRevisionError);
      expect((await a.read(stream)).map((e) => e.revision)).toEqual([0, 1]);
    }
  });

  it("summarises at start the streams a node of an earlier release wrote (no row, or a row behind), and an append folds a stale row on from the log", async () => {
    const writer = await open();
    const prefix = `${unique("legacy")}/`;
    const opened = (id: string, n: number) => [
      { type: "SessionOpened", data: { sessionId: id }, metadata: at(n) },
      { type: "SessionCreated", data: { sessionId: id, config: { model: "m" } }, metadata: at(n) },
    ];
    await writer.append(`${prefix}none`, opened("none", 10), "no_stream");
    await writer.append(`${prefix}behind`, opened("behind", 20), "no_stream");
    await writer.append(`${prefix}later`, opened("later", 30), "no_stream");
    // As the release before summaries left them: no row for one stream; entries appended without the summary for the
    // others (a node of that release went on writing).
    await admin.query("DELETE FROM duplex_summaries WHERE stream = $1", [`${prefix}none`]);
    for (const [stream, code] of [
      [`${prefix}behind`, "item_not_found"],
      [`${prefix}later`, "bad_event"],
    ]) {
      // Under the append lock, as every writer: positions are given one transaction at a time.
      await admin.query("BEGIN");
      await admin.query(`SELECT pg_advisory_xact_lock(${0x6475706c6578})`);
      await admin.query(
        `INSERT INTO duplex_entries (position, stream, revision, type, data, metadata)
         SELECT coalesce(max(position), 0) + 1, $1, 2, 'RequestRejected', $2, '{"at":40,"epoch":0,"turnId":0}' FROM duplex_entries`,
        [stream, JSON.stringify({ code, message: "m" })],
      );
      await admin.query("UPDATE duplex_streams SET revision = 2, last_at = 40 WHERE stream = $1", [stream]);
      await admin.query("COMMIT");
    }
    const stale = await writer.listSummaries({ prefix, limit: 10 });
    expect(stale.summaries.map((s) => [s.summary.id, s.summary.revision])).toEqual([
      ["behind", 1],
      ["later", 1],
    ]);

    // An append by this release folds `later`'s row on from the log before its own entries.
    await writer.append(`${prefix}later`, [{ type: "SessionDetached", data: {}, metadata: at(50) }], 2);
    expect((await writer.listSummaries({ prefix, limit: 10, error: "bad_event" })).summaries[0]?.summary).toMatchObject(
      { id: "later", revision: 3, state: "detached", error_codes: ["bad_event"] },
    );
    // A store opening now summarises the others.
    const next = await open();
    const rows = (await next.listSummaries({ prefix, limit: 10 })).summaries.map((s) => s.summary);
    expect(rows.map((r) => [r.id, r.revision, r.error_codes])).toEqual([
      ["none", 1, []],
      ["behind", 2, ["item_not_found"]],
      ["later", 3, ["bad_event"]],
    ]);
  });
});
