import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { VadModel, VadStream } from "../../src/engine/ports/vad.ts";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { createSileroVad, SILERO_VAD_V5_SHA256 } from "../../src/infra/vad/index.ts";
import { createSileroStreams, INPUT_SIZE, STATE_UNITS } from "../../src/infra/vad/silero-streams.ts";

const audio = (name: string) => new URL(`../../../shared/audio/${name}`, import.meta.url);
const shippedModel = join(
  dirname(createRequire(import.meta.url).resolve("@ricky0123/vad-web/package.json")),
  "dist",
  "silero_vad_v5.onnx",
);

/** Streams `samples` through `stream` in chunks of `chunk` samples; returns every probability in order. */
async function run(stream: VadStream, samples: Int16Array, chunk = 1600): Promise<number[]> {
  const probabilities: number[] = [];
  for (let offset = 0; offset < samples.length; offset += chunk) {
    probabilities.push(...(await stream.process(samples.subarray(offset, offset + chunk))));
  }
  return probabilities;
}

/** Lengths of the runs of consecutive frames below `threshold`. */
function quietRuns(probabilities: number[], threshold: number): number[] {
  const runs: number[] = [];
  let length = 0;
  for (const p of [...probabilities, 1]) {
    if (p < threshold) {
      length++;
    } else if (length > 0) {
      runs.push(length);
      length = 0;
    }
  }
  return runs;
}

describe("silero vad", () => {
  let vad: VadModel;
  let jfk: Int16Array;
  let speech: Int16Array;
  let jfkAlone: number[];

  beforeAll(async () => {
    vad = await createSileroVad();
    jfk = (await readWavFile(audio("jfk_16k.wav"))).samples;
    speech = (await readWavFile(audio("speech_60s_16k.wav"))).samples;
    jfkAlone = await run(vad.createStream(), jfk);
  });
  afterAll(async () => {
    await vad?.close();
  });

  it("runs 512-sample frames at 16 kHz", () => {
    expect(vad.sampleRate).toBe(16000);
    expect(vad.frameSamples).toBe(512);
  });

  it("returns one probability per complete frame of jfk streamed in 1600-sample chunks", () => {
    expect(jfk.length).toBe(176000);
    expect(jfkAlone.length).toBe(Math.floor(176000 / 512));
    for (const p of jfkAlone) {
      expect(p).toBeGreaterThanOrEqual(0);
      expect(p).toBeLessThanOrEqual(1);
    }
  });

  it("feeds the model the previous 64 samples before each 512-sample frame, as the reference OnnxWrapper does", async () => {
    // Frame k is run on samples [512k - 64, 512k + 512) / 32768, zeros before the start, with the state carried.
    const session = await ort.InferenceSession.create(shippedModel);
    const expected: number[] = [];
    let state = new Float32Array(256);
    for (let k = 0; k < 40; k++) {
      const input = new Float32Array(576);
      for (let i = 0; i < 576; i++) {
        input[i] = (jfk[512 * k - 64 + i] ?? 0) / 32768;
      }
      const outputs = await session.run({
        input: new ort.Tensor("float32", input, [1, 576]),
        state: new ort.Tensor("float32", state, [2, 1, 128]),
        sr: new ort.Tensor("int64", BigInt64Array.of(16000n), []),
      });
      const { output, stateN } = outputs;
      if (output === undefined || stateN === undefined) {
        throw new Error(`expected "output" and "stateN", got ${Object.keys(outputs).join(", ")}`);
      }
      expected.push(output.data[0] as number);
      state = (stateN.data as Float32Array).slice();
    }
    await session.release();
    expect(jfkAlone.slice(0, 40)).toEqual(expected);
  });

  it("hears speech in most frames of the first 3 s of jfk", () => {
    const first3s = jfkAlone.slice(0, Math.floor((3 * 16000) / 512));
    const speaking = first3s.filter((p) => p >= 0.5).length;
    expect(speaking).toBeGreaterThan(first3s.length / 2);
    // The speech starts within the first half second.
    expect(jfkAlone.findIndex((p) => p >= 0.5)).toBeLessThan(16);
  });

  it("hears nothing in 2 s of digital silence", async () => {
    const probabilities = await run(vad.createStream(), new Int16Array(32000));
    expect(probabilities.length).toBe(62);
    expect(probabilities.filter((p) => p >= 0.1)).toEqual([]);
  });

  it("finds the pauses between sentences of speech_60s", async () => {
    const probabilities = await run(vad.createStream(), speech);
    expect(probabilities.length).toBe(Math.floor(speech.length / 512));
    const pauses = quietRuns(probabilities, 0.35).filter((length) => length >= 10);
    expect(pauses.length).toBeGreaterThanOrEqual(5);
    expect(probabilities.filter((p) => p >= 0.5).length).toBeGreaterThan(probabilities.length / 2);
  });

  it("gives the same probabilities whatever the chunk sizes", async () => {
    expect(await run(vad.createStream(), jfk, jfk.length)).toEqual(jfkAlone);
    expect(await run(vad.createStream(), jfk, 333)).toEqual(jfkAlone);
    const stream = vad.createStream();
    expect(await stream.process(jfk.subarray(0, 511))).toEqual([]);
    expect(await stream.process(jfk.subarray(511, 512))).toEqual(jfkAlone.slice(0, 1));
    expect(await stream.process(new Int16Array(0))).toEqual([]);
  });

  it("keeps the state of interleaved streams apart", async () => {
    const other = speech.subarray(0, jfk.length);
    const otherAlone = await run(vad.createStream(), other);
    const a = vad.createStream();
    const b = vad.createStream();
    const fromA: number[] = [];
    const fromB: number[] = [];
    for (let offset = 0; offset < jfk.length; offset += 1600) {
      // Both streams' frames are in flight on the shared session at the same time.
      const [pa, pb] = await Promise.all([
        a.process(jfk.subarray(offset, offset + 1600)),
        b.process(other.subarray(offset, offset + 1600)),
      ]);
      fromA.push(...pa);
      fromB.push(...pb);
    }
    expect(fromA).toEqual(jfkAlone);
    expect(fromB).toEqual(otherAlone);
    expect(fromB).not.toEqual(fromA);
  });

  it("gives 16 streams running at once (one batch a frame) the probabilities each gets alone", async () => {
    const inputs = Array.from({ length: 16 }, (_, i) => speech.subarray(i * 16000, i * 16000 + 48000));
    const alone: number[][] = [];
    for (const input of inputs) alone.push(await run(vad.createStream(), input));
    const streams = inputs.map(() => vad.createStream());
    const together = await Promise.all(streams.map((stream, i) => run(stream, inputs[i] as Int16Array)));
    expect(together).toEqual(alone);
    expect(new Set(together.map((p) => p.join())).size).toBe(16);
  });

  it("gives the same probabilities with inference on the event loop as on its worker thread", async () => {
    const main = await createSileroVad({ thread: "main" });
    try {
      expect(await run(main.createStream(), jfk)).toEqual(jfkAlone);
    } finally {
      await main.close();
    }
  });

  it("runs calls on one stream in call order without awaiting each", async () => {
    const stream = vad.createStream();
    const calls: Promise<number[]>[] = [];
    for (let offset = 0; offset < jfk.length; offset += 1600) {
      calls.push(stream.process(jfk.subarray(offset, offset + 1600)));
    }
    expect((await Promise.all(calls)).flat()).toEqual(jfkAlone);
  });

  it("behaves as a new stream after reset(), with no leftover samples", async () => {
    const stream = vad.createStream();
    expect(await run(stream, jfk.subarray(0, 93 * 512))).toHaveLength(93);
    // 500 leftover samples: if they survived the reset, the first 1600 after it would finish 4 frames, not 3.
    expect(await stream.process(jfk.subarray(93 * 512, 93 * 512 + 500))).toEqual([]);
    stream.reset();
    expect(await run(stream, jfk)).toEqual(jfkAlone);
  });

  it("runs the frames of every stream waiting in one turn together: one batch per frame of a call", async () => {
    const session = await ort.InferenceSession.create(shippedModel);
    const sr = new ort.Tensor("int64", BigInt64Array.of(16000n), []);
    const batches: number[] = [];
    const streams = createSileroStreams(async (rows, input, state) => {
      batches.push(rows);
      const out = await session.run({
        input: new ort.Tensor("float32", input, [rows, INPUT_SIZE]),
        state: new ort.Tensor("float32", state, [2, rows, STATE_UNITS]),
        sr,
      });
      return { output: out.output?.data, stateN: out.stateN?.data };
    });
    try {
      const inputs = Array.from({ length: 10 }, (_, i) => speech.subarray(i * 16000, i * 16000 + 1600));
      const alone: number[][] = [];
      for (const input of inputs) alone.push(await run(vad.createStream(), input));
      for (const i of inputs.keys()) streams.open(i);
      // 1600 samples: three frames each, which depend on each other's state, so three batches of ten rows.
      const together = await Promise.all(inputs.map((input, i) => streams.process(i, input)));
      expect(batches).toEqual([10, 10, 10]);
      expect(together).toEqual(alone);
    } finally {
      await streams.shutdown();
      await session.release();
    }
  });

  it("lets a closed stream's waiting call resolve with what ran, and refuses calls after close()", async () => {
    const stream = vad.createStream();
    const waiting = stream.process(jfk.subarray(0, 16000));
    stream.close();
    expect(await waiting).toEqual([]);
    await expect(stream.process(jfk.subarray(0, 512))).rejects.toThrow(/no stream/);
  });

  it("drops samples pushed before a reset() that had not run yet", async () => {
    const stream = vad.createStream();
    const before = stream.process(jfk.subarray(0, 16000));
    stream.reset();
    expect(await before).toEqual([]);
    expect(await run(stream, jfk)).toEqual(jfkAlone);
  });
});

describe("silero vad loading", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "silero-test-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("loads a copy of the model with the expected SHA-256", async () => {
    const path = join(dir, "copy.onnx");
    await copyFile(shippedModel, path);
    const vad = await createSileroVad({ modelPath: path });
    expect(await vad.createStream().process(new Int16Array(1024))).toHaveLength(2);
    await vad.close();
  });

  it("refuses a model file with one byte changed, naming both digests", async () => {
    const bytes = await readFile(shippedModel);
    const middle = bytes.length >> 1;
    bytes[middle] = (bytes[middle] ?? 0) ^ 0x01;
    const path = join(dir, "tampered.onnx");
    await writeFile(path, bytes);
    const error = await createSileroVad({ modelPath: path }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toMatch(new RegExp(`expected .*tampered\\.onnx to have SHA-256 ${SILERO_VAD_V5_SHA256}`));
    expect(error?.message).toMatch(/found [0-9a-f]{64}$/);
    expect(error?.message).not.toMatch(new RegExp(`found ${SILERO_VAD_V5_SHA256}`));
  });

  it("says which file it could not read", async () => {
    await expect(createSileroVad({ modelPath: join(dir, "missing.onnx") })).rejects.toThrow(
      /cannot read the model file .*missing\.onnx/,
    );
  });

  it("refuses work after close()", async () => {
    const vad = await createSileroVad();
    const stream = vad.createStream();
    await vad.close();
    await vad.close();
    await expect(stream.process(new Int16Array(512))).rejects.toThrow(/closed/);
    expect(() => vad.createStream()).toThrow(/closed/);
  });
});
