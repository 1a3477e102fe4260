import { describe, expect, it } from "vitest";
import { createCatchUpThenLive } from "../../src/infra/event-store/catch-up-then-live.ts";

/** A fake stream of rows keyed by revision: `read` pages from a key, `append` stores and notifies the seam. */
function fakeStream(pageSize = 2) {
  const stored: number[] = [];
  const delivered: number[] = [];
  let closed = false;
  const seam = createCatchUpThenLive<number>({
    from: 0,
    keyOf: (row) => row,
    emit: (row) => delivered.push(row),
    isClosed: () => closed,
  });
  const append = (): void => {
    const row = stored.length;
    stored.push(row);
    seam.live([row]);
  };
  const page = (next: number): number[] => stored.filter((row) => row >= next).slice(0, pageSize);
  return {
    seam,
    stored,
    delivered,
    append,
    page,
    close: () => {
      closed = true;
    },
  };
}

describe("catch-up-then-live", () => {
  it("delivers each row once, in order, when appends land at the seam of a synchronous catch-up", () => {
    const s = fakeStream();
    for (let i = 0; i < 3; i += 1) s.append();
    let reads = 0;
    s.seam.catchUpSync(
      (next) => {
        reads += 1;
        // An append between two reads, and one right at the end of the stored rows: both notified while catching up.
        if (reads === 1 || reads === 3) s.append();
        return s.page(next);
      },
      (row) => row,
      () => false,
    );
    s.append();
    expect(s.delivered).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it("delivers each row once, in order, across an asynchronous catch-up", async () => {
    const s = fakeStream();
    for (let i = 0; i < 5; i += 1) s.append();
    const done = s.seam.catchUp(
      async (next) => {
        const rows = s.page(next);
        s.append();
        return rows;
      },
      (row) => row,
      () => s.stored.length > 20,
    );
    s.append();
    await done;
    s.append();
    expect(s.delivered).toEqual(s.stored);
    expect(new Set(s.delivered).size).toBe(s.delivered.length);
  });

  it("holds a live row past a gap until the gap read fills it, when gap filling is on", async () => {
    const stored = [0, 1, 2, 3];
    const delivered: number[] = [];
    const seam = createCatchUpThenLive<number>({
      from: 0,
      keyOf: (row) => row,
      emit: (row) => delivered.push(row),
      isClosed: () => false,
      gapFill: { read: async (next) => stored.filter((row) => row >= next), fail: () => undefined },
    });
    await seam.catchUp(
      async () => [],
      (row) => row,
      () => false,
    );
    // Rows 0 and 1 were never notified: row 3 arrives first and waits, row 2 arrives out of order.
    seam.live([3, 2]);
    expect(delivered).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(delivered).toEqual([0, 1, 2, 3]);
  });

  it("passes a gap read's error to fail", async () => {
    const failures: unknown[] = [];
    const seam = createCatchUpThenLive<number>({
      from: 0,
      keyOf: (row) => row,
      emit: () => undefined,
      // As a subscriber that errored is closed (else the seam reads the gap again, and again).
      isClosed: () => failures.length > 0,
      gapFill: {
        read: async () => {
          throw new Error("read failed");
        },
        fail: (error) => failures.push(error),
      },
    });
    await seam.catchUp(
      async () => [],
      (row) => row,
      () => false,
    );
    seam.live([5]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(failures).toEqual([new Error("read failed")]);
  });

  it("delivers nothing live while catching up, nor after the subscriber closed, and rethrows a read error", () => {
    const s = fakeStream();
    s.append();
    expect(() =>
      s.seam.catchUpSync(
        () => {
          throw new Error("disk");
        },
        (row: number) => row,
        () => false,
      ),
    ).toThrow("disk");
    s.append();
    expect(s.delivered).toEqual([]);
    const t = fakeStream();
    t.seam.catchUpSync(
      t.page,
      (row) => row,
      () => false,
    );
    t.append();
    t.close();
    t.append();
    expect(t.delivered).toEqual([0]);
  });

  it("drops rows below the key it starts from, and live rows the catch-up already delivered", () => {
    const delivered: number[] = [];
    const seam = createCatchUpThenLive<number>({
      from: 2,
      keyOf: (row) => row,
      emit: (row) => delivered.push(row),
      isClosed: () => false,
    });
    seam.live([2, 3]);
    let first = true;
    seam.catchUpSync(
      (next) => {
        const rows = first ? [0, 1, 2, 3].filter((row) => row >= next) : [];
        first = false;
        return rows;
      },
      (row) => row,
      () => false,
    );
    seam.live([3, 4]);
    expect(delivered).toEqual([2, 3, 4]);
  });
});
