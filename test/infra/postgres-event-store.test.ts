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
});
