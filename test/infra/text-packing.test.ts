import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { JSON_DEFLATE_D1, packText, unpackText } from "../../src/infra/event-store/text-packing.ts";
import { createLayout1File } from "../support/layout1.ts";

/** An audio append's AudioBuffered entry and its metadata, as a session writes ten of them a second. */
const audioBuffered = {
  json: '{"durationMs":100,"bytes":3200,"clockMs":299900,"vadFrames":9371,"endpointer":{"phase":"speech","runStartMs":null,"silenceStartMs":299808,"floorMs":290432}}',
  metadata:
    '{"at":1796184420623,"epoch":0,"turnId":26,"wire":[],"chain":"024de8836994c4b7ef7657dc93ac6eac11505e1924e7ae29920b91fd235cc381"}',
};

describe("text packing", () => {
  it("gives back any entry's data and metadata text exactly, packed or not", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (data, metadata) => {
        const json = JSON.stringify(data);
        const meta = JSON.stringify(metadata);
        const packed = packText(json, meta);
        const back = packed === null ? unpackText(json, meta, null) : unpackText(packed.bytes, "", packed.codec);
        expect(back).toEqual({ json, metadata: meta });
      }),
      { numRuns: 300 },
    );
  });

  it("packs a frequent entry to well under half its bytes, and leaves short texts plain", () => {
    const plain = Buffer.byteLength(`${audioBuffered.json}\n${audioBuffered.metadata}`);
    const packed = packText(audioBuffered.json, audioBuffered.metadata);
    expect(packed?.codec).toBe(JSON_DEFLATE_D1);
    expect(packed?.bytes.byteLength).toBeLessThan(plain * 0.4);
    expect(packText("{}", '{"at":1}')).toBeNull();
  });

  it("names what it cannot read: an unknown codec, a packed text stored as a string, bytes that are not DEFLATE", () => {
    expect(() => unpackText("{}", "{}", "zstd")).toThrow(/unknown codec "zstd"/);
    expect(() => unpackText("{}", "", JSON_DEFLATE_D1)).toThrow(RangeError);
    expect(() => unpackText(Uint8Array.of(0xff, 0xff, 0xff), "", JSON_DEFLATE_D1)).toThrow();
  });

  it("reads a file written before text packing (no text_codec column) and appends packed entries to it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "duplex-text-packing-"));
    const path = join(dir, "old.sqlite");
    try {
      const old = createLayout1File(path);
      old
        .prepare("INSERT INTO entries (stream, revision, type, data, metadata) VALUES ('s', 0, 'AudioBuffered', ?, ?)")
        .run(audioBuffered.json, audioBuffered.metadata);
      old.prepare("INSERT INTO streams VALUES ('s', 0, 1, 1, 1)").run();
      old.close();

      const store = createSqliteEventStore({ path });
      const data = JSON.parse(audioBuffered.json) as unknown;
      const metadata = { ...(JSON.parse(audioBuffered.metadata) as { at: number }), epoch: 1, turnId: 27 };
      await store.append("s", [{ type: "AudioBuffered", data, metadata }], 0);
      const entries = await store.read("s");
      expect(entries.map((e) => [e.revision, e.data, e.metadata])).toEqual([
        [0, data, JSON.parse(audioBuffered.metadata)],
        [1, data, metadata],
      ]);
      await store.close();
      const db = new Database(path, { readonly: true });
      const rows = db.prepare("SELECT text_codec, metadata, typeof(data) AS kind FROM entries ORDER BY position").all();
      db.close();
      expect(rows).toEqual([
        { text_codec: null, metadata: audioBuffered.metadata, kind: "text" },
        // Layout 2 stores codecs as ids: 1 is json-deflate-d1 (sqlite-writer.ts, textCodecs).
        { text_codec: 1, metadata: "", kind: "blob" },
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
