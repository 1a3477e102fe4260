import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { PCM16_BROTLI, packBlob, unpackBlob } from "../../src/infra/event-store/blob-packing.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { sharedAudio } from "../support/server.ts";

const bytesOf = (samples: Int16Array): Uint8Array =>
  new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);

describe("blob packing", () => {
  it("gives back every blob byte for byte, whatever its length and content", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 4096 }), async (blob) => {
        const { bytes, codec } = await packBlob(blob);
        expect(Buffer.from(unpackBlob(bytes, codec))).toEqual(Buffer.from(blob));
      }),
      { numRuns: 200 },
    );
  });

  it("gives back PCM16 at the extremes (wrap-around of the predictor)", async () => {
    const samples = Int16Array.from({ length: 4000 }, (_, i) => (i % 3 === 0 ? 32767 : i % 3 === 1 ? -32768 : 0));
    const { bytes, codec } = await packBlob(bytesOf(samples));
    expect(codec).toBe(PCM16_BROTLI);
    expect(Buffer.from(unpackBlob(bytes, codec))).toEqual(Buffer.from(bytesOf(samples)));
  });

  it("keeps at most 70% of real speech (20 s in 100 ms chunks), and stores noise as it is", async () => {
    const speech = (await readWavFile(sharedAudio("speech_60s_16k.wav"))).samples;
    let raw = 0;
    let packed = 0;
    for (let i = 0; i + 1600 <= Math.min(speech.length, 16000 * 20); i += 1600) {
      const chunk = bytesOf(speech.subarray(i, i + 1600));
      const { bytes, codec } = await packBlob(chunk);
      expect(Buffer.from(unpackBlob(bytes, codec))).toEqual(Buffer.from(chunk));
      raw += chunk.byteLength;
      packed += bytes.byteLength;
    }
    expect(packed / raw).toBeLessThan(0.7);
    const noise = new Uint8Array(randomBytes(3200));
    const stored = await packBlob(noise);
    expect(stored.codec).toBeNull();
    expect(stored.bytes).toBe(noise);
  });

  it("refuses a codec it does not know", () => {
    expect(() => unpackBlob(new Uint8Array(4), "flac")).toThrow(RangeError);
  });
});

describe("the sqlite store with packed blobs", () => {
  it("reads a file written before blob packing (no bin_codec column) and appends packed entries to it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "duplex-packing-"));
    const path = join(dir, "old.sqlite");
    try {
      const audio = bytesOf((await readWavFile(sharedAudio("jfk_16k.wav"))).samples.subarray(0, 1600));
      const old = new Database(path);
      old.exec(`CREATE TABLE entries (position INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL,
        revision INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, bin BLOB, metadata TEXT NOT NULL,
        UNIQUE (stream, revision));
        CREATE TABLE streams (stream TEXT PRIMARY KEY, revision INTEGER NOT NULL, first_position INTEGER NOT NULL,
        first_at REAL NOT NULL, last_at REAL NOT NULL);`);
      old
        .prepare("INSERT INTO entries (stream, revision, type, data, bin, metadata) VALUES (?, 0, 'A', ?, ?, ?)")
        .run("s", JSON.stringify({ audio: { $bin: [0, audio.byteLength] } }), audio, JSON.stringify({ at: 1 }));
      old.prepare("INSERT INTO streams VALUES ('s', 0, 1, 1, 1)").run();
      old.close();

      const store = createSqliteEventStore({ path });
      await store.append("s", [{ type: "B", data: { audio }, metadata: { at: 2, epoch: 0, turnId: 0 } }], 0);
      const entries = await store.read("s");
      expect(entries.map((e) => e.type)).toEqual(["A", "B"]);
      for (const entry of entries)
        expect(Buffer.from((entry.data as { audio: Uint8Array }).audio)).toEqual(Buffer.from(audio));
      await store.close();
      const db = new Database(path, { readonly: true });
      const rows = db.prepare("SELECT type, bin_codec, length(bin) AS n FROM entries ORDER BY position").all();
      db.close();
      expect(rows).toEqual([
        { type: "A", bin_codec: null, n: audio.byteLength },
        { type: "B", bin_codec: PCM16_BROTLI, n: expect.any(Number) },
      ]);
      expect((rows[1] as { n: number }).n).toBeLessThan(audio.byteLength);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
