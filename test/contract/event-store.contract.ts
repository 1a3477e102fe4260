import fc from "fast-check";
import { firstValueFrom, type Observable, take, timeout, toArray } from "rxjs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type EntryMetadata,
  EntryTooLargeError,
  type EventStore,
  type ExpectedRevision,
  MAX_ENTRY_BYTES,
  type NewEntry,
  type RecordedEntry,
  type SummaryQuery,
  WrongExpectedRevisionError,
} from "../../src/engine/ports/event-store.ts";

/** How long a test waits for live entries, in ms; adapters with a network in between deliver asynchronously. */
const LIVE_TIMEOUT_MS = 5_000;
/** How long a test waits to be sure that nothing more arrives, in ms. */
const QUIET_MS = 50;

let streamCounter = 0;

/** A stream name no other test (nor an earlier run against a shared server) has used. */
function uniqueStream(label: string): string {
  streamCounter += 1;
  return `${label}-${process.pid}-${Date.now().toString(36)}-${streamCounter}`;
}

function metadata(at: number, extra: Record<string, unknown> = {}): EntryMetadata {
  return { ...extra, at, epoch: 0, turnId: 0 };
}

function entry(type: string, data: unknown = { type }, at = 1_000): NewEntry {
  return { type, data, metadata: metadata(at) };
}

/** The first `count` entries of `source`, failing after `LIVE_TIMEOUT_MS`. */
function collect(source: Observable<RecordedEntry>, count: number): Promise<RecordedEntry[]> {
  return firstValueFrom(source.pipe(take(count), toArray(), timeout(LIVE_TIMEOUT_MS)));
}

function quiet(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, QUIET_MS));
}

/** A value as JSON carries it: `-0` is `0`, objects are plain, bytes are plain `Uint8Array` copies. */
function asJson(value: unknown): unknown {
  if (value instanceof Uint8Array) return new Uint8Array(value);
  if (Array.isArray(value)) return value.map(asJson);
  if (typeof value === "number") return Object.is(value, -0) ? 0 : value;
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, asJson(inner)]));
  }
  return value;
}

function isPlainUint8Array(value: unknown): boolean {
  return value instanceof Uint8Array && Object.getPrototypeOf(value) === Uint8Array.prototype;
}

/** Keys that an escaping scheme or a careless object build could get wrong. */
const keyArb = fc.oneof(
  fc.string({ maxLength: 6, unit: "binary" }),
  fc.constantFrom("$bin", "$$bin", "$", "__proto__"),
);

/** Any JSON value, with `Uint8Array`s (empty ones included) nested at any depth. */
const dataArb = fc.letrec((tie) => ({
  value: fc.oneof(
    { maxDepth: 3, depthIdentifier: "data" },
    fc.jsonValue({ maxDepth: 2, stringUnit: "binary" }),
    fc.uint8Array({ maxLength: 48 }),
    tie("array"),
    tie("object"),
  ),
  array: fc.array(tie("value"), { maxLength: 4, depthIdentifier: "data" }),
  object: fc.dictionary(keyArb, tie("value"), { maxKeys: 4, depthIdentifier: "data" }),
})).value;

const metadataArb = fc
  .record({
    at: fc.integer({ min: 0, max: 2 ** 47 }),
    epoch: fc.nat(),
    turnId: fc.nat(),
    extra: fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 }),
  })
  .map(({ at, epoch, turnId, extra }): EntryMetadata => ({ ...extra, at, epoch, turnId }));

const newEntryArb = fc.record({
  type: fc.string({ minLength: 1, maxLength: 16 }),
  data: dataArb,
  metadata: metadataArb,
});

/**
 * The EventStore contract (STYLE.md, "One contract suite per port"): defines a `describe` block that every adapter
 * must pass. `make` gives a fresh, open store for each test; the suite closes it afterwards (closing twice is part
 * of the contract). Stream names are unique per test, so a shared server works; `$all` tests only look at their
 * own streams.
 */
export function eventStoreContract(name: string, make: () => Promise<EventStore>): void {
  describe(`event store contract: ${name}`, () => {
    let store: EventStore;

    beforeEach(async () => {
      store = await make();
    });

    afterEach(async () => {
      await store.close();
    });

    describe("append", () => {
      it("takes a repeated append (its reply lost) as done: nothing stored twice, the same revision back", async () => {
        const stream = uniqueStream("retry");
        const audio = Uint8Array.from({ length: 3200 }, (_, i) => (i * 7) & 0xff);
        const first = [entry("a", { audio }), entry("b")];
        expect(await store.append(stream, first, "no_stream")).toBe(1);
        expect(await store.append(stream, first, "no_stream")).toBe(1);
        const second = [entry("c", { n: 1 })];
        expect(await store.append(stream, second, 1)).toBe(2);
        // Retries of either call, even after later appends, find their entries where they were stored.
        expect(await store.append(stream, second, 1)).toBe(2);
        expect(await store.append(stream, first, "no_stream")).toBe(1);
        expect((await store.read(stream)).map((e) => e.type)).toEqual(["a", "b", "c"]);
        // Not a retry: other entries (a byte of audio, a field) at that place.
        const changed = new Uint8Array(audio);
        changed[100] = (changed[100] ?? 0) ^ 1;
        await expect(store.append(stream, [entry("a", { audio: changed }), entry("b")], "no_stream")).rejects.toThrow(
          WrongExpectedRevisionError,
        );
        await expect(store.append(stream, [entry("c", { n: 2 })], 1)).rejects.toThrow(WrongExpectedRevisionError);
        await expect(store.append(stream, [...second, entry("d")], 1)).rejects.toThrow(WrongExpectedRevisionError);
        expect((await store.read(stream)).map((e) => e.type)).toEqual(["a", "b", "c"]);
      });

      it("refuses an entry larger than MAX_ENTRY_BYTES with entry_too_large and stores nothing of the batch", async () => {
        const stream = uniqueStream("too-large");
        await store.append(stream, [entry("a")], "no_stream");
        const huge = new Uint8Array(MAX_ENTRY_BYTES + 1);

        const refused = store.append(stream, [entry("b"), entry("huge", { audio: huge })], 0);

        await expect(refused).rejects.toThrow(EntryTooLargeError);
        await expect(refused).rejects.toMatchObject({ code: "entry_too_large", stream });
        expect((await store.read(stream)).map((e) => e.type)).toEqual(["a"]);
        // The stream goes on at the revision it had.
        expect(await store.append(stream, [entry("b")], 0)).toBe(1);
      });

      it("reads a page: at most limit entries from a revision, in order, and nothing past the end", async () => {
        const stream = uniqueStream("page");
        await store.append(stream, [entry("a"), entry("b"), entry("c"), entry("d")], "no_stream");
        expect((await store.read(stream, 1, 2)).map((e) => [e.revision, e.type])).toEqual([
          [1, "b"],
          [2, "c"],
        ]);
        expect((await store.read(stream, 3, 10)).map((e) => e.type)).toEqual(["d"]);
        expect(await store.read(stream, 4, 10)).toEqual([]);
        expect((await store.read(stream, 0)).length).toBe(4);
      });

      it("creates a stream with no_stream and returns the revision of the last entry", async () => {
        const stream = uniqueStream("new");

        const revision = await store.append(stream, [entry("a"), entry("b"), entry("c")], "no_stream");

        expect(revision).toBe(2);
        const read = await store.read(stream);
        expect(read.map((e) => [e.stream, e.revision, e.type])).toEqual([
          [stream, 0, "a"],
          [stream, 1, "b"],
          [stream, 2, "c"],
        ]);
      });

      it("appends when the expected revision is the last one", async () => {
        const stream = uniqueStream("expected");
        await store.append(stream, [entry("a"), entry("b")], "no_stream");

        const revision = await store.append(stream, [entry("c"), entry("d")], 1);

        expect(revision).toBe(3);
        expect((await store.read(stream)).map((e) => e.type)).toEqual(["a", "b", "c", "d"]);
      });

      it("rejects a wrong expected revision and stores nothing of the batch", async () => {
        const stream = uniqueStream("wrong");
        await store.append(stream, [entry("a"), entry("b")], "no_stream");

        const error = await store.append(stream, [entry("x"), entry("y")], 0).catch((e: unknown) => e);

        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ code: "wrong_expected_revision", stream, expected: 0, actual: 1 });
        expect((await store.read(stream)).map((e) => e.type)).toEqual(["a", "b"]);
      });

      it("rejects a numeric expected revision on a stream that does not exist", async () => {
        const stream = uniqueStream("missing");

        const error = await store.append(stream, [entry("x")], 0).catch((e: unknown) => e);

        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ expected: 0, actual: "no_stream" });
        expect(await store.read(stream)).toEqual([]);
      });

      it("rejects no_stream on a stream that exists", async () => {
        const stream = uniqueStream("exists");
        await store.append(stream, [entry("a")], "no_stream");

        const error = await store.append(stream, [entry("x")], "no_stream").catch((e: unknown) => e);

        expect(error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(error).toMatchObject({ stream, expected: "no_stream", actual: 0 });
        expect((await store.read(stream)).map((e) => e.type)).toEqual(["a"]);
      });

      it("appends with any whether the stream exists or not", async () => {
        const stream = uniqueStream("any");

        expect(await store.append(stream, [entry("a")], "any")).toBe(0);
        expect(await store.append(stream, [entry("b"), entry("c")], "any")).toBe(2);

        expect((await store.read(stream)).map((e) => [e.revision, e.type])).toEqual([
          [0, "a"],
          [1, "b"],
          [2, "c"],
        ]);
      });

      it("returns the current revision and stores nothing when the batch is empty", async () => {
        const stream = uniqueStream("empty-batch");
        await store.append(stream, [entry("a"), entry("b")], "no_stream");

        expect(await store.append(stream, [], 1)).toBe(1);

        expect((await store.read(stream)).map((e) => e.type)).toEqual(["a", "b"]);
      });

      it("stores a batch whole or not at all, and a failed batch leaves the revision where it was", async () => {
        const stream = uniqueStream("atomic");
        await store.append(stream, [entry("a")], "no_stream");
        const live: string[] = [];
        const subscription = store.subscribe(stream).subscribe((e) => live.push(e.type));
        // A bigint is not JSON: the third entry cannot be stored, after the first two could have been.
        const unstorable: NewEntry = { type: "bad", data: { n: 1n }, metadata: metadata(1) };

        await expect(store.append(stream, [entry("b"), entry("c"), unstorable], 0)).rejects.toThrow();

        expect((await store.read(stream)).map((e) => e.type)).toEqual(["a"]);
        expect(await store.append(stream, [entry("d")], 0)).toBe(1);
        expect((await store.read(stream)).map((e) => [e.revision, e.type])).toEqual([
          [0, "a"],
          [1, "d"],
        ]);
        await quiet();
        subscription.unsubscribe();
        expect(live).toEqual(["a", "d"]);
      });

      it("lets exactly one of two concurrent appends with the same expected revision win", async () => {
        const stream = uniqueStream("race");
        await store.append(stream, [entry("base")], "no_stream");

        const results = await Promise.allSettled([
          store.append(stream, [entry("left-1"), entry("left-2")], 0),
          store.append(stream, [entry("right-1"), entry("right-2")], 0),
        ]);

        const won = results.flatMap((r, i) => (r.status === "fulfilled" ? [i === 0 ? "left" : "right"] : []));
        const lost = results.flatMap((r) => (r.status === "rejected" ? [r.reason] : []));
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(1);
        expect(lost[0]).toBeInstanceOf(WrongExpectedRevisionError);
        expect((await store.read(stream)).map((e) => e.type)).toEqual(["base", `${won[0]}-1`, `${won[0]}-2`]);
      });

      it("lets exactly one of two concurrent creations of the same stream win", async () => {
        const stream = uniqueStream("race-create");

        const results = await Promise.allSettled([
          store.append(stream, [entry("left")], "no_stream"),
          store.append(stream, [entry("right")], "no_stream"),
        ]);

        const won = results.flatMap((r, i) => (r.status === "fulfilled" ? [i === 0 ? "left" : "right"] : []));
        expect(won).toHaveLength(1);
        expect(results.filter((r) => r.status === "rejected").map((r) => r.reason)).toEqual([
          expect.any(WrongExpectedRevisionError),
        ]);
        expect((await store.read(stream)).map((e) => e.type)).toEqual(won);
      });
    });

    describe("entry contents", () => {
      it("gives back Uint8Array values at any depth byte for byte, as plain Uint8Array copies", async () => {
        const stream = uniqueStream("binary");
        const big = new Uint8Array(1024 * 1024);
        for (let i = 0; i < big.length; i += 1) big[i] = (i * 31 + 7) & 0xff;
        const view = big.subarray(1000, 1010);
        const data = {
          audio: Uint8Array.of(0, 1, 127, 128, 255),
          empty: new Uint8Array(0),
          buffer: Buffer.from([4, 5, 6]),
          view,
          nested: { deeper: [Uint8Array.of(9), { bytes: big }, [], new Uint8Array(0)] },
        };

        await store.append(
          stream,
          [entry("nested", data), entry("top-level", Uint8Array.of(1, 2, 3)), entry("only-empty", [new Uint8Array(0)])],
          "no_stream",
        );

        const [nested, topLevel, onlyEmpty] = await store.read(stream);
        const got = nested?.data as typeof data;
        const gotBig = got.nested.deeper[1] as { bytes: Uint8Array };
        expect(gotBig.bytes.byteLength).toBe(big.byteLength);
        expect(Buffer.compare(gotBig.bytes, big)).toBe(0);
        expect({ ...got, nested: { deeper: [got.nested.deeper[0], "big", ...got.nested.deeper.slice(2)] } }).toEqual({
          audio: Uint8Array.of(0, 1, 127, 128, 255),
          empty: new Uint8Array(0),
          buffer: Uint8Array.of(4, 5, 6),
          view: new Uint8Array(view),
          nested: { deeper: [Uint8Array.of(9), "big", [], new Uint8Array(0)] },
        });
        for (const bytes of [got.audio, got.empty, got.buffer, got.view, gotBig.bytes]) {
          expect(isPlainUint8Array(bytes)).toBe(true);
        }
        expect(topLevel?.data).toEqual(Uint8Array.of(1, 2, 3));
        expect(isPlainUint8Array(topLevel?.data)).toBe(true);
        expect(onlyEmpty?.data).toEqual([new Uint8Array(0)]);
      });

      it("gives back audio of 0 B, 1 B and 256 KiB byte for byte, read and live", async () => {
        const stream = uniqueStream("sizes");
        const sizes = [0, 1, 256 * 1024];
        const blobs = sizes.map((n) => Uint8Array.from({ length: n }, (_, i) => (i * 131 + 17) & 0xff));
        const live = collect(store.subscribe(stream), sizes.length);

        await store.append(
          stream,
          blobs.map((audio, i) => entry(`audio-${sizes[i]}`, { audio })),
          "no_stream",
        );

        for (const got of [await store.read(stream), await live]) {
          expect(got.map((e) => (e.data as { audio: Uint8Array }).audio.byteLength)).toEqual(sizes);
          for (const [i, e] of got.entries()) {
            const audio = (e.data as { audio: Uint8Array }).audio;
            expect(isPlainUint8Array(audio)).toBe(true);
            expect(Buffer.compare(audio, blobs[i] as Uint8Array)).toBe(0);
          }
        }
      });

      it("gives back objects whose keys look like the adapter's own markers", async () => {
        const stream = uniqueStream("markers");
        const data = { $bin: [0, 3], $$bin: "x", $: 1, inner: { $bin: Uint8Array.of(7), $ref: null } };

        await store.append(stream, [entry("markers", data)], "no_stream");

        const [read] = await store.read(stream);
        expect(read?.data).toEqual(data);
      });

      it("gives back every JSON shape of data", async () => {
        const stream = uniqueStream("shapes");
        const shapes: unknown[] = [null, 42, -1.5, "text ✓ é", true, [], {}, [1, [2, [3]], { a: null }]];

        await store.append(
          stream,
          shapes.map((data, i) => entry(`shape-${i}`, data)),
          "no_stream",
        );

        expect((await store.read(stream)).map((e) => e.data)).toEqual(shapes);
      });

      it("gives back metadata with its extra keys untouched", async () => {
        const stream = uniqueStream("metadata");
        const meta = { at: 1_700_000_000_123.5, epoch: 3, turnId: 7, correlationId: "c-1", nested: { list: [1, "x"] } };

        await store.append(stream, [{ type: "m", data: null, metadata: meta }], "no_stream");

        const [read] = await store.read(stream);
        expect(read?.metadata).toEqual(meta);
        expect(read?.type).toBe("m");
      });
    });

    describe("read", () => {
      it("reads from a revision, inclusive, to the end", async () => {
        const stream = uniqueStream("from");
        await store.append(
          stream,
          ["a", "b", "c", "d", "e"].map((t) => entry(t)),
          "no_stream",
        );

        expect((await store.read(stream, 2)).map((e) => [e.revision, e.type])).toEqual([
          [2, "c"],
          [3, "d"],
          [4, "e"],
        ]);
        expect(await store.read(stream, 5)).toEqual([]);
        expect(await store.read(stream)).toEqual(await store.read(stream, 0));
      });

      it("reads an unknown stream as empty", async () => {
        expect(await store.read(uniqueStream("unknown"))).toEqual([]);
      });

      it("gives global positions that grow with every append, across streams", async () => {
        const a = uniqueStream("pos-a");
        const b = uniqueStream("pos-b");
        await store.append(a, [entry("a0"), entry("a1")], "no_stream");
        await store.append(b, [entry("b0")], "no_stream");
        await store.append(a, [entry("a2")], 1);

        const [a0, a1, a2] = await store.read(a);
        const [b0] = await store.read(b);
        const positions = [a0, a1, b0, a2].map((e) => e?.position ?? Number.NaN);
        expect(positions[0]).toBeGreaterThanOrEqual(1);
        expect(positions).toEqual([...positions].sort((x, y) => x - y));
        expect(new Set(positions).size).toBe(4);
      });
    });

    describe("subscribe", () => {
      it("delivers the stored entries, then live ones, in order and once each, while appends interleave", async () => {
        const stream = uniqueStream("live");
        await store.append(stream, [entry("stored-0"), entry("stored-1")], "no_stream");
        await store.append(stream, [entry("stored-2")], 1);
        const appends: Promise<number>[] = [];
        const seen: RecordedEntry[] = [];
        const subscription = store.subscribe(stream).subscribe((e) => {
          seen.push(e);
          // Appends made from inside the subscriber, during the catch-up and during the live part.
          if (e.type === "stored-1") appends.push(store.append(stream, [entry("during-catch-up")], "any"));
          if (e.type === "live-0") appends.push(store.append(stream, [entry("during-live")], "any"));
        });
        // Subscribed after the appending subscriber: it must not see that subscriber's appends jump the queue.
        const bystander: RecordedEntry[] = [];
        const bystanding = store.subscribe(stream).subscribe((e) => bystander.push(e));

        appends.push(store.append(stream, [entry("live-0"), entry("live-1")], "any"));
        appends.push(store.append(stream, [entry("live-2")], "any"));
        await expect.poll(async () => (await store.read(stream)).length, { timeout: LIVE_TIMEOUT_MS }).toBe(8);
        await Promise.all(appends);
        await expect.poll(() => seen.length, { timeout: LIVE_TIMEOUT_MS }).toBe(8);
        await expect.poll(() => bystander.length, { timeout: LIVE_TIMEOUT_MS }).toBe(8);
        const stored = await store.read(stream);
        await quiet();
        subscription.unsubscribe();
        bystanding.unsubscribe();

        expect(seen).toEqual(stored);
        expect(bystander).toEqual(stored);
        expect(seen.map((e) => e.revision)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      });

      it("starts at the given revision and ignores other streams", async () => {
        const stream = uniqueStream("sub-from");
        const other = uniqueStream("sub-other");
        await store.append(
          stream,
          ["a", "b", "c"].map((t) => entry(t)),
          "no_stream",
        );

        const received = collect(store.subscribe(stream, 1), 4);
        await store.append(other, [entry("elsewhere")], "no_stream");
        await store.append(stream, [entry("d"), entry("e")], 2);

        expect((await received).map((e) => [e.revision, e.type])).toEqual([
          [1, "b"],
          [2, "c"],
          [3, "d"],
          [4, "e"],
        ]);
      });

      it("waits for a stream that does not exist yet", async () => {
        const stream = uniqueStream("sub-later");

        const received = collect(store.subscribe(stream), 2);
        await store.append(stream, [entry("a"), entry("b")], "no_stream");

        expect((await received).map((e) => e.type)).toEqual(["a", "b"]);
      });

      it("delivers $all across streams in position order, stored then live", async () => {
        const a = uniqueStream("all-a");
        const b = uniqueStream("all-b");
        await store.append(a, [entry("a0")], "no_stream");
        const start = (await store.read(a))[0]?.position ?? Number.NaN;
        await store.append(b, [entry("b0"), entry("b1")], "no_stream");
        await store.append(a, [entry("a1")], 0);
        const ours = new Set([a, b]);
        const seen: RecordedEntry[] = [];
        const subscription = store.subscribe("$all", start).subscribe((e) => {
          if (ours.has(e.stream)) seen.push(e);
        });

        await store.append(b, [entry("b2")], 1);
        await store.append(a, [entry("a2"), entry("a3")], 1);
        await expect.poll(() => seen.length, { timeout: LIVE_TIMEOUT_MS }).toBe(7);
        await quiet();
        subscription.unsubscribe();

        expect(seen.map((e) => e.type)).toEqual(["a0", "b0", "b1", "a1", "b2", "a2", "a3"]);
        const positions = seen.map((e) => e.position);
        expect(positions).toEqual([...positions].sort((x, y) => x - y));
        expect(new Set(positions).size).toBe(7);
        const stored = [...(await store.read(a)), ...(await store.read(b))].sort((x, y) => x.position - y.position);
        expect(seen).toEqual(stored);
      });

      it("starts $all at the given position, inclusive", async () => {
        const stream = uniqueStream("all-from");
        await store.append(
          stream,
          ["a", "b", "c"].map((t) => entry(t)),
          "no_stream",
        );
        const b = (await store.read(stream, 1))[0];

        const first = await firstValueFrom(store.subscribe("$all", b?.position).pipe(timeout(LIVE_TIMEOUT_MS)));

        expect(first).toEqual(b);
      });

      it("stops delivering once unsubscribed", async () => {
        const stream = uniqueStream("unsubscribe");
        const seen: string[] = [];
        const subscription = store.subscribe(stream).subscribe((e) => seen.push(e.type));
        await store.append(stream, [entry("before")], "no_stream");
        await expect.poll(() => seen.length, { timeout: LIVE_TIMEOUT_MS }).toBe(1);

        subscription.unsubscribe();
        await store.append(stream, [entry("after")], 0);
        await quiet();

        expect(seen).toEqual(["before"]);
      });

      it("completes every subscription when the store closes, and closing twice is fine", async () => {
        const stream = uniqueStream("close");
        await store.append(stream, [entry("a")], "no_stream");
        const completed = (source: Observable<RecordedEntry>) =>
          new Promise<string[]>((resolve, reject) => {
            const seen: string[] = [];
            source.subscribe({ next: (e) => seen.push(e.type), error: reject, complete: () => resolve(seen) });
          });
        const one = completed(store.subscribe(stream));
        const all = completed(store.subscribe("$all"));
        await expect.poll(async () => (await store.read(stream)).length).toBe(1);

        await store.close();
        await store.close();

        expect(await one).toEqual(["a"]);
        expect(await all).toContain("a");
      });
    });

    describe("listStreams", () => {
      it("lists the streams with a prefix in order of creation, with revision, count and times", async () => {
        // `_` and `%` would be wildcards to a careless LIKE.
        const prefix = `${uniqueStream("ls_%")}/`;
        const decoy = prefix.replace("ls_%", "lsX%");
        await store.append(`${prefix}zeta`, [entry("z0", null, 100), entry("z1", null, 200)], "no_stream");
        await store.append(decoy, [entry("d0", null, 150)], "no_stream");
        await store.append(`${prefix}alpha`, [entry("a0", null, 300)], "no_stream");
        await store.append(`${prefix}zeta`, [entry("z2", null, 400), entry("z3", null, 500)], 1);

        expect(await store.listStreams(prefix)).toEqual([
          { stream: `${prefix}zeta`, revision: 3, count: 4, firstAt: 100, lastAt: 500 },
          { stream: `${prefix}alpha`, revision: 0, count: 1, firstAt: 300, lastAt: 300 },
        ]);
        expect((await store.listStreams(`${prefix}al`)).map((s) => s.stream)).toEqual([`${prefix}alpha`]);
        expect(await store.listStreams(uniqueStream("nothing"))).toEqual([]);
      });
    });

    describe("listSummaries", () => {
      /** A made-up session's log: opened at `at`, its model, its responses, refusals and ending. */
      const session = (
        id: string,
        at: number,
        shape: { model: string; responses?: number; codes?: string[]; closed?: string },
      ): NewEntry[] => [
        entry("SessionOpened", { sessionId: id }, at),
        entry("SessionCreated", { sessionId: id, config: { model: shape.model } }, at),
        ...Array.from({ length: shape.responses ?? 0 }, (_, i) =>
          entry("ResponseStarted", { n: i }, at + 100 * (i + 1)),
        ),
        ...(shape.codes ?? []).map((code) => entry("RequestRejected", { code, message: code }, at + 1_000)),
        ...(shape.closed === undefined ? [] : [entry("SessionClosed", { reason: shape.closed }, at + 2_000)]),
      ];

      it("keeps each stream's summary as entries land, and filters, orders and pages in the store", async () => {
        const prefix = `${uniqueStream("sum")}/`;
        // b and c open at the same ms: the stream name orders them.
        await store.append(`${prefix}a`, session("a", 1_000, { model: "m1", responses: 2 }), "no_stream");
        await store.append(`${prefix}c`, session("c", 2_000, { model: "m2", codes: ["x", "y", "x"] }), "no_stream");
        await store.append(`${prefix}b`, session("b", 2_000, { model: "m1", closed: "session_close" }), "no_stream");
        await store.append(
          `${prefix}d`,
          session("d", 3_000, { model: "m1", codes: ["y"], closed: "unused" }),
          "no_stream",
        );
        await store.append(`${uniqueStream("other")}/a`, session("z", 1_500, { model: "m1" }), "no_stream");
        // a moves on: its summary with it.
        await store.append(`${prefix}a`, [entry("SessionClosed", { reason: "idle_ttl_expired" }, 4_000)], 3);
        const list = async (query: Partial<SummaryQuery>) => {
          const page = await store.listSummaries({ prefix, limit: 10, ...query });
          return { ids: page.summaries.map((s) => s.summary.id), hasMore: page.hasMore };
        };

        const all = await store.listSummaries({ prefix, limit: 10 });
        expect(all.hasMore).toBe(false);
        expect(all.summaries.map((s) => [s.stream, s.firstAt])).toEqual([
          [`${prefix}a`, 1_000],
          [`${prefix}b`, 2_000],
          [`${prefix}c`, 2_000],
          [`${prefix}d`, 3_000],
        ]);
        expect(all.summaries[0]?.summary).toEqual({
          id: "a",
          opened_at: new Date(1_000).toISOString(),
          duration_s: 3,
          state: "expired (idle)",
          model: "m1",
          responses: 2,
          revision: 4,
          error_codes: [],
        });
        expect(all.summaries[2]?.summary).toMatchObject({ state: "open", error_codes: ["x", "y"], revision: 4 });
        expect(await list({ order: "desc" })).toEqual({ ids: ["d", "c", "b", "a"], hasMore: false });
        expect(await list({ state: "closed" })).toEqual({ ids: ["b"], hasMore: false });
        expect(await list({ state: "expired" })).toEqual({ ids: ["a"], hasMore: false });
        expect(await list({ model: "m1" })).toEqual({ ids: ["a", "b", "d"], hasMore: false });
        expect(await list({ error: "y" })).toEqual({ ids: ["c", "d"], hasMore: false });
        expect(await list({ since: 2_000, until: 2_999 })).toEqual({ ids: ["b", "c"], hasMore: false });
        // has_more only when another row passes the filters: d is the last m1, so a page ending on it has no more.
        expect(await list({ model: "m1", limit: 2 })).toEqual({ ids: ["a", "b"], hasMore: true });
        expect(await list({ model: "m1", limit: 2, after: { firstAt: 2_000, stream: `${prefix}b` } })).toEqual({
          ids: ["d"],
          hasMore: false,
        });
        expect(await list({ model: "m1", limit: 3 })).toEqual({ ids: ["a", "b", "d"], hasMore: false });
        expect(await list({ order: "desc", limit: 1, after: { firstAt: 2_000, stream: `${prefix}c` } })).toEqual({
          ids: ["b"],
          hasMore: true,
        });
        expect(await list({ state: "failed" })).toEqual({ ids: [], hasMore: false });
      });

      it("drops a deleted stream's summary, and summarises the stream made anew from its new entries", async () => {
        const prefix = `${uniqueStream("sumdel")}/`;
        await store.append(`${prefix}s`, session("old", 1_000, { model: "m1", codes: ["x"] }), "no_stream");
        expect(await store.deleteStream(`${prefix}s`)).toBe(true);
        expect((await store.listSummaries({ prefix, limit: 5 })).summaries).toEqual([]);
        await store.append(`${prefix}s`, session("new", 5_000, { model: "m2" }), "no_stream");
        const [only] = (await store.listSummaries({ prefix, limit: 5 })).summaries;
        expect(only?.summary).toMatchObject({ id: "new", model: "m2", revision: 1, error_codes: [] });
      });

      it("rebuilds the summaries from the logs to the same rows", async () => {
        const prefix = `${uniqueStream("sumre")}/`;
        await store.append(`${prefix}a`, session("a", 1_000, { model: "m1", responses: 1, codes: ["x"] }), "no_stream");
        await store.append(`${prefix}b`, session("b", 2_000, { model: "m2", closed: "disconnect" }), "no_stream");
        const before = await store.listSummaries({ prefix, limit: 5 });
        expect(await store.rebuildSummaries()).toBeGreaterThanOrEqual(2);
        expect(await store.listSummaries({ prefix, limit: 5 })).toEqual(before);
        expect(before.summaries.map((s) => s.summary.state)).toEqual(["open", "disconnected"]);
      });
    });

    describe("deleteStream", () => {
      it("removes a stream and its entries, leaves the others, and lets the stream be created anew", async () => {
        const prefix = `${uniqueStream("del")}/`;
        await store.append(`${prefix}gone`, [entry("g0", null, 100), entry("g1", null, 200)], "no_stream");
        await store.append(`${prefix}kept`, [entry("k0", null, 300)], "no_stream");
        expect(await store.deleteStream(`${prefix}gone`)).toBe(true);
        expect(await store.read(`${prefix}gone`)).toEqual([]);
        expect((await store.listStreams(prefix)).map((s) => s.stream)).toEqual([`${prefix}kept`]);
        expect((await store.read(`${prefix}kept`)).map((e) => e.type)).toEqual(["k0"]);
        expect(await store.deleteStream(`${prefix}gone`)).toBe(false);
        expect(await store.append(`${prefix}gone`, [entry("n0", null, 400)], "no_stream")).toBe(0);
        expect((await store.read(`${prefix}gone`)).map((e) => e.type)).toEqual(["n0"]);
      });
    });

    describe("properties", () => {
      it("reading a stream returns exactly the appended entries in order", async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.array(fc.array(newEntryArb, { minLength: 1, maxLength: 4 }), { maxLength: 4 }),
            async (batches) => {
              const stream = uniqueStream("property");
              const appended: NewEntry[] = [];
              let expected: ExpectedRevision = "no_stream";
              for (const batch of batches) {
                const revision = await store.append(stream, batch, expected);
                appended.push(...batch);
                expect(revision).toBe(appended.length - 1);
                expected = revision;
              }

              const read = await store.read(stream);

              expect(read.map((e) => [e.stream, e.revision])).toEqual(appended.map((_, i) => [stream, i]));
              expect(read.map(({ type, data, metadata }) => ({ type, data, metadata }))).toEqual(
                appended.map(({ type, data, metadata }) => ({ type, data: asJson(data), metadata: asJson(metadata) })),
              );
            },
          ),
          { numRuns: 100 },
        );
      });
    });
  });
}
