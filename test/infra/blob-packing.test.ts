import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { brotliCompressSync } from "node:zlib";
import Database from "better-sqlite3";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { readWavFile } from "../../src/infra/audio/index.ts";
import {
  PCM16_BROTLI,
  PCM16_LPC_RICE,
  PCM16_RICE,
  packBlob,
  unpackBlob,
} from "../../src/infra/event-store/blob-packing.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { createLayout1File } from "../support/layout1.ts";
import { sharedAudio } from "../support/server.ts";

const bytesOf = (samples: Int16Array): Uint8Array =>
  new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);

describe("blob packing", () => {
  it("gives back every blob byte for byte, whatever its length and content", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), (blob) => {
        const { bytes, codec } = packBlob(blob);
        expect(Buffer.from(unpackBlob(bytes, codec))).toEqual(Buffer.from(blob));
      }),
      { numRuns: 200 },
    );
  });

  it("gives back any PCM16, whatever its scale changes between blocks, packed or not", () => {
    fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 1, max: 600 }), fc.integer({ min: 0, max: 15 })), {
          minLength: 1,
          maxLength: 8,
        }),
        fc.integer(),
        (runs, seed) => {
          // Runs of samples of varying loudness (2^scale), so blocks take every Rice parameter and escapes occur.
          let state = seed;
          const samples = Int16Array.from(
            runs.flatMap(([length, scale]) =>
              Array.from({ length }, () => {
                state = (Math.imul(state, 1103515245) + 12345) | 0;
                return Math.max(-32768, Math.min(32767, (state >> 8) % 2 ** (scale + 1)));
              }),
            ),
          );
          const { bytes, codec } = packBlob(bytesOf(samples));
          expect([PCM16_RICE, PCM16_LPC_RICE, null]).toContain(codec);
          expect(Buffer.from(unpackBlob(bytes, codec))).toEqual(Buffer.from(bytesOf(samples)));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("gives back loud, clipped, predictable audio, whichever predictor takes it", () => {
    // Sums of tones driven past full scale and clipped: the fitted predictor overshoots at the clips, where its
    // residual is largest (or beyond the escape's range, when the blob keeps the second order).
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.double({ min: 0.001, max: 1.5, noNaN: true }), fc.integer({ min: 0, max: 60_000 })), {
          minLength: 1,
          maxLength: 4,
        }),
        fc.integer({ min: 40, max: 3000 }),
        (tones, length) => {
          const samples = Int16Array.from({ length }, (_, i) => {
            const x = tones.reduce((sum, [w, a]) => sum + a * Math.sin(w * i), 0);
            return Math.max(-32768, Math.min(32767, Math.round(x)));
          });
          const { bytes, codec } = packBlob(bytesOf(samples));
          expect(Buffer.from(unpackBlob(bytes, codec))).toEqual(Buffer.from(bytesOf(samples)));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("gives back PCM16 at the extremes (the largest residuals, escaped)", () => {
    // Quiet audio with full-scale clicks: the clicks' residuals (up to 2^17) are escaped, the rest Rice-coded.
    const samples = Int16Array.from({ length: 4000 }, (_, i) =>
      i % 500 === 0 ? 32767 : i % 500 === 1 ? -32768 : Math.round(300 * Math.sin(i / 5)),
    );
    const { bytes, codec } = packBlob(bytesOf(samples));
    expect(codec).toBe(PCM16_RICE);
    expect(Buffer.from(unpackBlob(bytes, codec))).toEqual(Buffer.from(bytesOf(samples)));
    const silence = packBlob(new Uint8Array(3200));
    expect(silence.codec).toBe(PCM16_RICE);
    expect(silence.bytes.byteLength).toBeLessThan(220);
    expect(Buffer.from(unpackBlob(silence.bytes, silence.codec))).toEqual(Buffer.alloc(3200));
  });

  it("packs a Buffer view at an odd offset from its own bytes", () => {
    const speech = Int16Array.from({ length: 800 }, (_, i) => Math.round(8000 * Math.sin(i / 7)));
    const backing = Buffer.alloc(1601 + 7, 0x11);
    backing.set(bytesOf(speech), 1);
    // An odd-length buffer behind it, as well: a copy of the whole buffer could not even be read as samples.
    const view = Buffer.from(backing.buffer, backing.byteOffset + 1, 1600);
    const { bytes, codec } = packBlob(view);
    expect(codec).not.toBeNull();
    expect(Buffer.from(unpackBlob(bytes, codec))).toEqual(Buffer.from(bytesOf(speech)));
  });

  it("refuses packed bytes cut short or with a header out of range, for either predictor", () => {
    // A pure tone is predicted best by the fitted predictor; silence has nothing to fit and keeps the second order.
    const tone = Int16Array.from({ length: 1600 }, (_, i) => Math.round(8000 * Math.sin(i / 7)));
    const silence = new Int16Array(1600);
    for (const [samples, expected, body] of [
      [tone, PCM16_LPC_RICE, 22],
      [silence, PCM16_RICE, 4],
    ] as const) {
      const { bytes, codec } = packBlob(bytesOf(samples));
      expect(codec).toBe(expected);
      expect(Buffer.from(unpackBlob(bytes, codec))).toEqual(Buffer.from(bytesOf(samples)));
      expect(() => unpackBlob(bytes.subarray(0, bytes.byteLength - 40), codec)).toThrow(RangeError);
      expect(() => unpackBlob(bytes.subarray(0, 3), codec)).toThrow(RangeError);
      // A sample count the bytes cannot hold, and a Rice parameter beyond 17.
      const counted = new Uint8Array(bytes);
      new DataView(counted.buffer).setUint32(0, 0xffffffff, true);
      expect(() => unpackBlob(counted, codec)).toThrow(RangeError);
      const badK = new Uint8Array(bytes);
      badK[body] = 0xff;
      expect(() => unpackBlob(badK, codec)).toThrow(/Rice parameter 31/);
    }
    const { bytes } = packBlob(bytesOf(tone));
    for (const [at, value] of [
      [4, 0],
      [4, 200],
      [5, 40],
    ] as const) {
      const bad = new Uint8Array(bytes);
      bad[at] = value;
      expect(() => unpackBlob(bad, PCM16_LPC_RICE)).toThrow(/LPC order \d+ or shift \d+ out of range/);
    }
  });

  it("reads blobs packed by earlier versions (residual byte planes, brotli)", () => {
    const samples = Int16Array.from({ length: 1600 }, (_, i) => Math.round(8000 * Math.sin(i / 7) + (i % 13) * 50));
    // The earlier packing: the same predictor's residual modulo 2^16, low bytes then high bytes, brotli-compressed.
    const planes = new Uint8Array(3200);
    for (let i = 0; i < 1600; i++) {
      const d = ((samples[i] as number) - 2 * (samples[i - 1] ?? 0) + (samples[i - 2] ?? 0)) & 0xffff;
      planes[i] = d & 0xff;
      planes[1600 + i] = d >> 8;
    }
    const stored = new Uint8Array(brotliCompressSync(planes));
    expect(Buffer.from(unpackBlob(stored, PCM16_BROTLI))).toEqual(Buffer.from(bytesOf(samples)));
  });

  it("keeps at most 53% of real 16 kHz speech and 52% of 24 kHz speech (in chunks), and stores noise as it is", async () => {
    // The second-order predictor alone kept 54.9% and 56.6% of these: the fitted one is what brings them under.
    for (const [file, chunkSamples, bound] of [
      ["speech_60s_16k.wav", 1600, 0.53],
      ["jfk_24k.wav", 4800, 0.52],
    ] as const) {
      const speech = (await readWavFile(sharedAudio(file))).samples;
      let raw = 0;
      let packed = 0;
      for (let i = 0; i + chunkSamples <= Math.min(speech.length, chunkSamples * 200); i += chunkSamples) {
        const chunk = bytesOf(speech.subarray(i, i + chunkSamples));
        const { bytes, codec } = packBlob(chunk);
        expect(Buffer.from(unpackBlob(bytes, codec))).toEqual(Buffer.from(chunk));
        raw += chunk.byteLength;
        packed += bytes.byteLength;
      }
      expect(packed / raw).toBeLessThan(bound);
    }
    const noise = new Uint8Array(randomBytes(3200));
    const stored = packBlob(noise);
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
      const old = createLayout1File(path, { binCodec: false });
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
        // Layout 2 stores codecs as ids: 3 is pcm16-lpc8-rice (sqlite-writer.ts, binCodecs).
        { type: "B", bin_codec: 3, n: expect.any(Number) },
      ]);
      expect((rows[1] as { n: number }).n).toBeLessThan(audio.byteLength);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
