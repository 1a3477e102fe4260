import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createResampler,
  createSpeexStreamResampler,
  durationMs,
  encodeWav,
  MAX_RESAMPLE_RATIO,
  pcm16FromBytes,
  pcm16ToBytes,
  readEncodedWav,
  readWav,
  readWavFile,
  readWavHeader,
  resamplePcm16,
  rms,
  WavError,
  writeWavFile,
} from "../../src/infra/audio/index.ts";

const audio = (name: string) => new URL(`../../../shared/audio/${name}`, import.meta.url);

/** A tone of `hz` at `sampleRate`, `amplitude` in PCM16 units. */
function sine(hz: number, sampleRate: number, samples: number, amplitude = 10000): Int16Array {
  return Int16Array.from({ length: samples }, (_, i) =>
    Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / sampleRate)),
  );
}

/** Sign changes between `from` and `to` (exclusive); a tone of f Hz has 2f per second. */
function zeroCrossings(samples: Int16Array, from = 0, to = samples.length): number {
  let count = 0;
  for (let i = from + 1; i < to; i++) {
    if ((samples[i - 1] ?? 0) < 0 !== (samples[i] ?? 0) < 0) {
      count++;
    }
  }
  return count;
}

/** A RIFF/WAVE file from raw chunks, each `[id, body]`. */
function riff(chunks: [string, Uint8Array][]): Uint8Array {
  const parts: number[] = [...ascii("WAVE")];
  for (const [id, body] of chunks) {
    parts.push(...ascii(id), ...u32(body.length), ...body);
    if (body.length % 2 === 1) {
      parts.push(0);
    }
  }
  return Uint8Array.from([...ascii("RIFF"), ...u32(parts.length), ...parts]);
}

function fmt(tag: number, channels: number, sampleRate: number, bits: number, extra: number[] = []): Uint8Array {
  const blockAlign = (channels * bits) / 8;
  return Uint8Array.from([
    ...u16(tag),
    ...u16(channels),
    ...u32(sampleRate),
    ...u32(sampleRate * blockAlign),
    ...u16(blockAlign),
    ...u16(bits),
    ...extra,
  ]);
}

function ascii(text: string): number[] {
  return [...text].map((c) => c.charCodeAt(0));
}
function u16(value: number): number[] {
  return [value & 0xff, (value >> 8) & 0xff];
}
function u32(value: number): number[] {
  return [value & 0xff, (value >> 8) & 0xff, (value >> 16) & 0xff, (value >>> 24) & 0xff];
}

describe("wav", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "wav-test-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("encodes mono PCM16 with a 44-byte header and reads it back unchanged", () => {
    const samples = Int16Array.from([0, 1, -1, 32767, -32768, 1234, -4321]);
    const bytes = encodeWav(samples, 24000);
    expect(bytes.length).toBe(44 + samples.length * 2);
    expect(String.fromCharCode(...bytes.subarray(0, 4))).toBe("RIFF");
    expect(String.fromCharCode(...bytes.subarray(36, 40))).toBe("data");
    const decoded = readWav(bytes);
    expect(decoded.sampleRate).toBe(24000);
    expect(decoded.channels).toBe(1);
    expect([...decoded.samples]).toEqual([...samples]);
  });

  it("writes a file and reads it back unchanged", async () => {
    const path = join(dir, "tone.wav");
    const samples = sine(440, 16000, 1600);
    await writeWavFile(path, samples, 16000);
    const decoded = await readWavFile(path);
    expect(decoded.sampleRate).toBe(16000);
    expect([...decoded.samples]).toEqual([...samples]);
  });

  it("skips LIST and other chunks (odd sizes padded) before and after data", () => {
    const data = Uint8Array.from([...u16(5), ...u16(0xfffb), ...u16(300)]);
    const bytes = riff([
      ["LIST", Uint8Array.from(ascii("INFOISFT\x03\x00\x00\x00ab\x00"))],
      ["fmt ", fmt(1, 1, 8000, 16)],
      ["fact", Uint8Array.from([1, 2, 3])],
      ["data", data],
      ["LIST", Uint8Array.from(ascii("junk"))],
    ]);
    const decoded = readWav(bytes);
    expect(decoded.sampleRate).toBe(8000);
    expect([...decoded.samples]).toEqual([5, -5, 300]);
  });

  it("mixes stereo down to mono (the mean of each frame) and reads WAVE_FORMAT_EXTENSIBLE with the PCM sub-format", () => {
    const extensible = fmt(0xfffe, 2, 48000, 16, [...u16(22), ...u16(16), ...u32(3), ...u16(1), ...Array(14).fill(0)]);
    const decoded = readWav(
      riff([
        ["fmt ", extensible],
        ["data", Uint8Array.from([...u16(1), ...u16(3), ...u16(0xfffc), ...u16(0xfffe), ...u16(32767), ...u16(32767)])],
      ]),
    );
    expect(decoded.channels).toBe(2);
    expect(decoded.sampleRate).toBe(48000);
    // (1 + 3) / 2, (-4 + -2) / 2, and full scale stays full scale.
    expect([...decoded.samples]).toEqual([2, -3, 32767]);
  });

  it("hears a stereo tone on both channels as mono of the same length and level, and one channel at half its level", () => {
    const rate = 16000;
    const tone = sine(440, rate, 2 * rate, 12000);
    const both = new Uint8Array(44 + tone.length * 4);
    both.set(encodeWav(new Int16Array(tone.length * 2), rate).subarray(0, 44));
    const view = new DataView(both.buffer);
    // The canonical header, made stereo: 2 channels, 4 bytes a frame, the data twice as long.
    view.setUint16(22, 2, true);
    view.setUint32(28, rate * 4, true);
    view.setUint16(32, 4, true);
    const leftOnly = both.slice();
    const leftOnlyView = new DataView(leftOnly.buffer);
    tone.forEach((sample, i) => {
      view.setInt16(44 + i * 4, sample, true);
      view.setInt16(46 + i * 4, sample, true);
      leftOnlyView.setInt16(44 + i * 4, sample, true);
    });
    const mono = readWav(both);
    expect(mono.channels).toBe(2);
    expect(mono.samples.length).toBe(2 * rate);
    expect(durationMs(mono.samples.length, mono.sampleRate)).toBe(2000);
    expect(rms(mono.samples)).toBeCloseTo(rms(tone), 3);
    expect(zeroCrossings(mono.samples)).toBe(zeroCrossings(tone));
    const half = readWav(leftOnly);
    expect(half.samples.length).toBe(2 * rate);
    expect(rms(half.samples) / rms(tone)).toBeCloseTo(0.5, 2);
  });

  it("reads a data chunk that claims more bytes than there are up to the last whole sample", () => {
    const bytes = encodeWav(Int16Array.from([7, 8, 9]), 16000);
    new DataView(bytes.buffer).setUint32(40, 0xffffffff, true);
    expect([...readWav(bytes.subarray(0, bytes.length - 1)).samples]).toEqual([7, 8]);
  });

  it("returns samples that do not share memory with the input bytes", () => {
    const bytes = encodeWav(Int16Array.from([1, 2]), 16000);
    const decoded = readWav(bytes);
    bytes.fill(0);
    expect([...decoded.samples]).toEqual([1, 2]);
  });

  it("rejects bytes that are not PCM16 RIFF/WAVE, naming what it expected and found", () => {
    expect(() => readWav(Uint8Array.from([1, 2, 3]))).toThrow(/expected at least a 12-byte RIFF header, got 3 bytes/);
    expect(() => readWav(Uint8Array.from([...ascii("OggS"), 0, 0, 0, 0, ...ascii("WAVE")]))).toThrow(
      /expected "RIFF" \.\.\. "WAVE".*found "OggS"/,
    );
    expect(() =>
      readWav(
        riff([
          ["fmt ", fmt(1, 1, 16000, 8)],
          ["data", new Uint8Array(4)],
        ]),
      ),
    ).toThrow(/expected PCM 16-bit, found PCM 8-bit \(format tag 1, 8 bits per sample\)/);
    expect(() =>
      readWav(
        riff([
          ["fmt ", fmt(3, 1, 16000, 32)],
          ["data", new Uint8Array(8)],
        ]),
      ),
    ).toThrow(/expected PCM 16-bit, found IEEE float 32-bit/);
    expect(() =>
      readWav(
        riff([
          ["data", new Uint8Array(4)],
          ["fmt ", fmt(1, 1, 16000, 16)],
        ]),
      ),
    ).toThrow(/expected a "fmt " chunk before the "data" chunk/);
    expect(() => readWav(riff([["fmt ", fmt(1, 1, 16000, 16)]]))).toThrow(/expected a "data" chunk, found none/);
  });

  it("reads the audio of A-law, mu-law, float and PCM16 files as stored, walking the chunks as readWav does", () => {
    const alaw = riff([
      ["LIST", Uint8Array.from(ascii("INFOx"))],
      ["fmt ", fmt(6, 1, 8000, 8)],
      ["fact", Uint8Array.from([1, 2, 3])],
      ["data", Uint8Array.from([0xd5, 0x55, 0x2a])],
      ["LIST", Uint8Array.from(ascii("junk"))],
    ]);
    expect(readEncodedWav(alaw)).toEqual({
      encoding: "g711_alaw",
      sampleRate: 8000,
      channels: 1,
      data: Uint8Array.from([0xd5, 0x55, 0x2a]),
      missingBytes: 0,
    });
    expect(
      readEncodedWav(
        riff([
          ["fmt ", fmt(7, 1, 8000, 8)],
          ["data", new Uint8Array(2)],
        ]),
      ).encoding,
    ).toBe("g711_ulaw");
    expect(
      readEncodedWav(
        riff([
          ["fmt ", fmt(3, 1, 24000, 32)],
          ["data", new Uint8Array(8)],
        ]),
      ).encoding,
    ).toBe("pcm_f32le");
    // A data chunk that claims more than the file holds: what it holds, and how much is missing.
    const cut = encodeWav(Int16Array.from([7, 8, 9]), 16000);
    const read = readEncodedWav(cut.subarray(0, cut.length - 2));
    expect(read).toMatchObject({ encoding: "pcm16", sampleRate: 16000, missingBytes: 2 });
    expect([...read.data]).toEqual([7, 0, 8, 0]);
  });

  it("refuses what readEncodedWav cannot send, naming it", () => {
    expect(() => readEncodedWav(Uint8Array.from([...ascii("OggS"), 0, 0, 0, 0, ...ascii("WAVE")]))).toThrow(
      /not a RIFF\/WAVE file: an Ogg file \(Opus or Vorbis\)/,
    );
    expect(() =>
      readEncodedWav(
        riff([
          ["fmt ", fmt(1, 1, 16000, 8)],
          ["data", new Uint8Array(4)],
        ]),
      ),
    ).toThrow(/PCM 8-bit \(PCM 16-bit, IEEE float 32-bit, A-law or mu-law are sent\)/);
    expect(() =>
      readEncodedWav(
        riff([
          ["fmt ", fmt(1, 1, 16000, 24)],
          ["data", new Uint8Array(6)],
        ]),
      ),
    ).toThrow(/PCM 24-bit \(PCM 16-bit, IEEE float 32-bit, A-law or mu-law are sent\)/);
    expect(() =>
      readEncodedWav(
        riff([
          ["fmt ", fmt(1, 1, 1, 16)],
          ["data", new Uint8Array(6)],
        ]),
      ),
    ).toThrow(/expected a sample rate of 8000 to 96000 Hz, found 1 Hz/);
    expect(() =>
      readEncodedWav(
        riff([
          ["fmt ", fmt(6, 3, 8000, 8)],
          ["data", new Uint8Array(6)],
        ]),
      ),
    ).toThrow(/expected 1 or 2 channels \(mono or stereo\), found 3/);
    expect(() =>
      readEncodedWav(
        riff([
          ["data", new Uint8Array(4)],
          ["fmt ", fmt(1, 1, 16000, 16)],
        ]),
      ),
    ).toThrow(/a "data" chunk before any "fmt " chunk/);
    expect(() => readEncodedWav(riff([["fmt ", fmt(1, 1, 16000, 16)]]))).toThrow(/truncated: no "data" chunk/);
    expect(() => readEncodedWav(riff([["LIST", new Uint8Array(4)]]))).toThrow(/no "fmt " and "data" chunks/);
  });

  it("prefixes the path to a decoding error when reading a file", async () => {
    const path = join(dir, "not.wav");
    await writeFile(path, "hello, not a wav file");
    await expect(readWavFile(path)).rejects.toThrow(`${path}: WAV: expected "RIFF"`);
  });

  it("refuses a sample rate that is not a positive integer", () => {
    expect(() => encodeWav(new Int16Array(1), 0)).toThrow(/positive integer sample rate in Hz, got 0/);
    expect(() => encodeWav(new Int16Array(1), 16000.5)).toThrow(/got 16000.5/);
  });

  it("reads jfk_16k.wav as 11 s of 16 kHz mono speech", async () => {
    const jfk = await readWavFile(audio("jfk_16k.wav"));
    expect(jfk.sampleRate).toBe(16000);
    expect(jfk.channels).toBe(1);
    expect(jfk.samples.length).toBe(176000);
    expect(durationMs(jfk.samples.length, jfk.sampleRate)).toBe(11000);
    expect(rms(jfk.samples)).toBeGreaterThan(0.01);
  });
});

/** A PCM16 WAV whose header says `rate` Hz and `channels` channels, holding `frames` frames of silence. */
function pcm16Wav(rate: number, channels: number, frames: number): Uint8Array {
  return riff([
    ["fmt ", fmt(1, channels, rate, 16)],
    ["data", new Uint8Array(frames * channels * 2)],
  ]);
}

/** What `read` throws, as `{kind, message}` (a WavError's), or null when it does not throw. */
function refusal(read: () => unknown): { kind: string; message: string } | null {
  try {
    read();
    return null;
  } catch (error) {
    expect(error).toBeInstanceOf(WavError);
    return { kind: (error as WavError).kind, message: (error as WavError).message };
  }
}

describe("wav limits (issue 32, part 2)", () => {
  it.each([
    [7999, "unsupported_rate"],
    [8000, null],
    [44100, null],
    [96000, null],
    [96001, "unsupported_rate"],
    [1, "unsupported_rate"],
    [0, "unsupported_rate"],
    [0xffffffff, "unsupported_rate"],
  ])("at %i Hz: %s", (rate, kind) => {
    const refused = refusal(() => readWav(pcm16Wav(rate, 1, 4)));
    expect(refused?.kind ?? null).toBe(kind);
    if (kind !== null)
      expect(refused?.message).toBe(`WAV: expected a sample rate of 8000 to 96000 Hz, found ${rate} Hz`);
  });

  it.each([
    [0, "unsupported_channels"],
    [1, null],
    [2, null],
    [3, "unsupported_channels"],
    [6, "unsupported_channels"],
  ])("with %i channels: %s", (channels, kind) => {
    const refused = refusal(() => readWav(pcm16Wav(16000, channels, 4)));
    expect(refused?.kind ?? null).toBe(kind);
    if (kind !== null)
      expect(refused?.message).toBe(`WAV: expected 1 or 2 channels (mono or stereo), found ${channels}`);
  });

  it.each([
    ["IEEE float 32-bit", 3, 32],
    ["IEEE float 64-bit", 3, 64],
    ["PCM 24-bit", 1, 24],
    ["PCM 32-bit", 1, 32],
    ["PCM 8-bit", 1, 8],
    ["A-law", 6, 8],
    ["mu-law", 7, 8],
    ["Microsoft ADPCM", 2, 4],
    ["MPEG Layer 3 (MP3)", 0x55, 0],
    ["format tag 0x1234", 0x1234, 16],
  ])("refuses %s, naming it", (name, tag, bits) => {
    const refused = refusal(() =>
      readWav(
        riff([
          ["fmt ", fmt(tag, 1, 16000, bits)],
          ["data", new Uint8Array(16)],
        ]),
      ),
    );
    expect(refused).toEqual({
      kind: "unsupported_encoding",
      message: `WAV: expected PCM 16-bit, found ${name} (format tag ${tag}, ${bits} bits per sample)`,
    });
  });

  it("names the sub-format of a WAVE_FORMAT_EXTENSIBLE file: IEEE float 32-bit", () => {
    const extensible = fmt(0xfffe, 2, 48000, 32, [...u16(22), ...u16(32), ...u32(3), ...u16(3), ...Array(14).fill(0)]);
    expect(
      refusal(() =>
        readWav(
          riff([
            ["fmt ", extensible],
            ["data", new Uint8Array(16)],
          ]),
        ),
      )?.message,
    ).toMatch(/found IEEE float 32-bit \(format tag 3, 32 bits per sample\)/);
  });

  it("refuses audio longer than maxSeconds on the header, before decoding, and reads audio up to it", () => {
    const wav = pcm16Wav(8000, 2, 8000 * 3);
    expect(refusal(() => readWav(wav, { maxSeconds: 2.5 }))).toEqual({
      kind: "too_long",
      message: "WAV: expected at most 2.5 s of audio, found 3.0 s (24000 frames at 8000 Hz)",
    });
    expect(readWav(wav, { maxSeconds: 3 }).samples.length).toBe(24000);
    expect(readWavHeader(wav)).toEqual({
      sampleRate: 8000,
      channels: 2,
      frames: 24000,
      dataOffset: 44,
      missingBytes: 0,
    });
  });

  it("reads only the bytes present when the header declares a 2 GiB data chunk, allocating for those alone", () => {
    const samples = sine(440, 16000, 16000);
    const bytes = encodeWav(samples, 16000);
    const view = new DataView(bytes.buffer);
    view.setUint32(4, 0x80000024, true);
    view.setUint32(40, 0x80000000, true);
    const before = process.memoryUsage().arrayBuffers;
    const read = readWav(bytes);
    const grown = process.memoryUsage().arrayBuffers - before;
    expect(read.samples.length).toBe(16000);
    expect([...read.samples.subarray(0, 100)]).toEqual([...samples.subarray(0, 100)]);
    expect(read.missingBytes).toBe(0x80000000 - 32000);
    // 32 kB of samples, not 2 GiB.
    expect(grown).toBeLessThan(1024 * 1024);
    expect(readWavHeader(bytes).frames).toBe(16000);
    // readEncodedWav the same: the bytes there are, and what is missing.
    expect(readEncodedWav(bytes)).toMatchObject({ missingBytes: 0x80000000 - 32000, data: { length: 32000 } });
  });

  it("walks past a chunk that declares 4 GiB and finds no data in the bytes, refusing it as malformed", () => {
    const bytes = riff([
      ["fmt ", fmt(1, 1, 16000, 16)],
      ["LIST", new Uint8Array(8)],
      ["data", new Uint8Array(8)],
    ]);
    new DataView(bytes.buffer).setUint32(40, 0xffffffff, true);
    expect(refusal(() => readWav(bytes))).toEqual({
      kind: "malformed",
      message: `WAV: expected a "data" chunk, found none in ${bytes.length} bytes`,
    });
  });

  it("refuses a WAV the file reader reads with the same kind, the path before the message", async () => {
    const dir = await mkdtemp(join(tmpdir(), "wav-limits-"));
    try {
      const path = join(dir, "one-hertz.wav");
      await writeFile(path, pcm16Wav(1, 1, 4));
      const error = await readWavFile(path).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WavError);
      expect(error).toMatchObject({
        kind: "unsupported_rate",
        message: `${path}: WAV: expected a sample rate of 8000 to 96000 Hz, found 1 Hz`,
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("pcm", () => {
  it("reads little-endian samples, from an unaligned offset too", () => {
    const bytes = Uint8Array.from([0xaa, 0x01, 0x00, 0xff, 0x7f, 0x00, 0x80, 0xfe, 0xff]);
    expect([...pcm16FromBytes(bytes.subarray(1))]).toEqual([1, 32767, -32768, -2]);
    expect([...pcm16FromBytes(bytes.subarray(1, 5))]).toEqual([1, 32767]);
  });

  it("throws on an odd number of bytes", () => {
    expect(() => pcm16FromBytes(new Uint8Array(3))).toThrow(/even length .*got 3 bytes/);
  });

  it("writes little-endian bytes that read back as the same samples", () => {
    const samples = Int16Array.from([1, -2, 32767, -32768]);
    const bytes = pcm16ToBytes(samples);
    expect([...bytes]).toEqual([0x01, 0x00, 0xfe, 0xff, 0xff, 0x7f, 0x00, 0x80]);
    expect([...pcm16FromBytes(bytes)]).toEqual([...samples]);
  });

  it("measures RMS normalised to full scale", () => {
    expect(rms(new Int16Array(0))).toBe(0);
    expect(rms(new Int16Array(100))).toBe(0);
    expect(rms(new Int16Array(100).fill(-32768))).toBe(1);
    expect(rms(sine(1000, 16000, 16000, 16384))).toBeCloseTo(0.5 / Math.SQRT2, 3);
  });

  it("converts sample counts to milliseconds", () => {
    expect(durationMs(16000, 16000)).toBe(1000);
    expect(durationMs(480, 24000)).toBe(20);
    expect(durationMs(1, 48000)).toBeCloseTo(0.0208333, 6);
    expect(() => durationMs(1, 0)).toThrow(/positive number of Hz, got 0/);
  });
});

describe("resamplePcm16", () => {
  it("turns 11 s of jfk at 16 kHz into jfk_24k.wav (sox's resampling of it), sample by sample", async () => {
    const jfk = await readWavFile(audio("jfk_16k.wav"));
    const sox = (await readWavFile(audio("jfk_24k.wav"))).samples;
    const out = resamplePcm16(jfk.samples, 16000, 24000);
    expect(out.length).toBe(264000);
    let error = 0;
    let power = 0;
    for (let i = 2400; i < out.length - 2400; i++) {
      error += ((out[i] ?? 0) - (sox[i] ?? 0)) ** 2;
      power += (sox[i] ?? 0) ** 2;
    }
    // 74 dB here: aligned with sox to well under a sample (half a sample off would give about 15 dB).
    expect(10 * Math.log10(power / error)).toBeGreaterThan(60);
  });

  it("keeps the frequency and level of a 1 kHz tone from 16 kHz to 24 kHz, in phase with the input", () => {
    const out = resamplePcm16(sine(1000, 16000, 16000), 16000, 24000);
    expect(out.length).toBe(24000);
    // 1 s of 1 kHz: 2000 sign changes, counted away from the edges (0.1 s .. 0.9 s = 1600).
    expect(zeroCrossings(out, 2400, 21600)).toBeGreaterThanOrEqual(1599);
    expect(zeroCrossings(out, 2400, 21600)).toBeLessThanOrEqual(1601);
    expect(rms(out.subarray(2400, 21600))).toBeCloseTo(10000 / 32768 / Math.SQRT2, 2);
    const expected = sine(1000, 24000, 24000);
    let error = 0;
    for (let i = 2400; i < 21600; i++) error += ((out[i] ?? 0) - (expected[i] ?? 0)) ** 2;
    expect(Math.sqrt(error / 19200)).toBeLessThan(100);
  });

  it("keeps a 5 kHz tone and removes a 10 kHz one from 24 kHz to 16 kHz, leaving the input intact", () => {
    const pass = sine(5000, 24000, 24000);
    const before = pass.slice();
    const passed = resamplePcm16(pass, 24000, 16000);
    expect([...pass]).toEqual([...before]);
    expect(passed.length).toBe(16000);
    expect(zeroCrossings(passed, 1600, 14400)).toBeGreaterThanOrEqual(7999);
    expect(zeroCrossings(passed, 1600, 14400)).toBeLessThanOrEqual(8001);
    expect(rms(passed.subarray(1600, 14400)) / rms(pass)).toBeGreaterThan(0.9);
    const stopped = resamplePcm16(sine(10000, 24000, 24000), 24000, 16000);
    expect(rms(stopped.subarray(1600, 14400)) / rms(pass)).toBeLessThan(0.01);
  });

  it("gives floor(n * to / from) samples for ratios that do not divide, and for very short inputs", () => {
    expect(resamplePcm16(sine(440, 44100, 44101), 44100, 16000).length).toBe(Math.floor((44101 * 16000) / 44100));
    expect(resamplePcm16(sine(440, 16000, 16001), 16000, 44100).length).toBe(Math.floor((16001 * 44100) / 16000));
    expect(resamplePcm16(new Int16Array(0), 16000, 24000).length).toBe(0);
    expect(resamplePcm16(Int16Array.from([1000]), 16000, 24000).length).toBe(1);
    expect(resamplePcm16(Int16Array.from([1000, 1000]), 24000, 16000).length).toBe(1);
  });

  it("gives the same output for the same input on every call (no state kept between calls)", () => {
    const input = sine(700, 16000, 3200);
    const first = resamplePcm16(input, 16000, 24000);
    resamplePcm16(sine(3000, 16000, 1000), 16000, 24000);
    expect([...resamplePcm16(input, 16000, 24000)]).toEqual([...first]);
  });

  it("returns a copy when the rates are equal", () => {
    const samples = Int16Array.from([1, 2, 3]);
    const out = resamplePcm16(samples, 16000, 16000);
    expect(out).not.toBe(samples);
    expect([...out]).toEqual([1, 2, 3]);
  });

  it("refuses rates that are not positive integers", () => {
    expect(() => resamplePcm16(new Int16Array(4), 0, 16000)).toThrow(
      /fromHz must be a positive integer number of Hz, got 0/,
    );
    expect(() => resamplePcm16(new Int16Array(4), 16000, -1)).toThrow(/toHz .*got -1/);
    expect(() => createResampler(16000, 22050.5)).toThrow(/toHz .*got 22050.5/);
  });

  it(`refuses to make more than ${MAX_RESAMPLE_RATIO} output samples per input sample (a WAV's 1 Hz to 24 kHz)`, () => {
    expect(() => resamplePcm16(new Int16Array(20000), 1, 24000)).toThrow(
      /1 Hz -> 24000 Hz would make more than 48 output samples per input sample/,
    );
    expect(() => createResampler(1, 24000)).toThrow(/more than 48 output samples/);
    expect(() => createSpeexStreamResampler(100, 24000)).toThrow(/more than 48 output samples/);
    expect(resamplePcm16(new Int16Array(10), 8000, 384000).length).toBe(480);
  });
});

describe("createSpeexStreamResampler", () => {
  /** Pushes `samples` in chunks of `chunk` samples and joins what comes out. */
  const streamed = (fromHz: number, toHz: number, samples: Int16Array, chunk: number): Int16Array => {
    const resampler = createSpeexStreamResampler(fromHz, toHz);
    const parts: Int16Array[] = [];
    for (let i = 0; i < samples.length; i += chunk) parts.push(resampler.push(samples.subarray(i, i + chunk)));
    resampler.close();
    const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
    let offset = 0;
    for (const part of parts) {
      out.set(part, offset);
      offset += part.length;
    }
    return out;
  };

  it("streams 24 kHz speech to 8 kHz in 100 ms chunks as the whole-buffer resampler does, less its held-back tail", async () => {
    const jfk = resamplePcm16((await readWavFile(audio("jfk_16k.wav"))).samples, 16000, 24000);
    const whole = resamplePcm16(jfk, 24000, 8000);
    const out = streamed(24000, 8000, jfk, 2400);
    // The filter holds back 4 ms of the stream's end (32 samples at 8 kHz): a stream that stops never gives it out.
    expect(out.length).toBe(whole.length - 32);
    expect(out.length).toBeLessThanOrEqual(whole.length);
    let error = 0;
    let power = 0;
    for (let i = 800; i < out.length - 800; i++) {
      error += ((out[i] ?? 0) - (whole[i] ?? 0)) ** 2;
      power += (whole[i] ?? 0) ** 2;
    }
    // The same filter with the same alignment: no click at the chunk seams.
    expect(10 * Math.log10(power / error)).toBeGreaterThan(60);
  });

  it("filters: a 6 kHz tone at 24 kHz does not fold into an 8 kHz output (the linear interpolator lets it through)", () => {
    const tone = sine(6000, 24000, 24000);
    const filtered = streamed(24000, 8000, tone, 2400);
    const linear = createResampler(24000, 8000).push(tone);
    expect(rms(filtered.subarray(800, 7200))).toBeLessThan(0.01 * rms(tone));
    expect(rms(linear.subarray(800, 7200))).toBeGreaterThan(0.3 * rms(tone));
  });

  it("refuses a push after close, and closing twice is harmless", () => {
    const resampler = createSpeexStreamResampler(24000, 16000);
    expect(resampler.push(sine(440, 24000, 2400)).length).toBeGreaterThan(1500);
    resampler.close();
    resampler.close();
    expect(() => resampler.push(new Int16Array(10))).toThrow("the resampler is closed");
  });
});

describe("createResampler", () => {
  /** Pushes `samples` in chunks cycling through `sizes`; returns each chunk's input length and output. */
  function pushChunks(samples: Int16Array, fromHz: number, toHz: number, sizes: number[]) {
    const resampler = createResampler(fromHz, toHz);
    const chunks: { input: number; output: Int16Array }[] = [];
    for (let offset = 0, k = 0; offset < samples.length; k++) {
      const chunk = samples.subarray(offset, offset + (sizes[k % sizes.length] ?? 1));
      chunks.push({ input: chunk.length, output: resampler.push(chunk) });
      offset += chunk.length;
    }
    return chunks;
  }
  const pushAll = (samples: Int16Array, fromHz: number, toHz: number, sizes: number[]) =>
    pushChunks(samples, fromHz, toHz, sizes).map((c) => c.output);
  const concat = (chunks: Int16Array[]) => Int16Array.from(chunks.flatMap((c) => [...c]));

  it("outputs exactly floor(total * to / from) samples over many chunks, each ~n * to / from", async () => {
    const jfk = (await readWavFile(audio("jfk_16k.wav"))).samples;
    for (const [fromHz, toHz] of [
      [16000, 24000],
      [24000, 16000],
      [44100, 16000],
      [16000, 48000],
    ] as const) {
      const chunks = pushChunks(jfk, fromHz, toHz, [1, 7, 160, 333, 1600, 0, 480]);
      expect(chunks.reduce((sum, c) => sum + c.output.length, 0)).toBe(Math.floor((jfk.length * toHz) / fromHz));
      for (const { input, output } of chunks) {
        expect(output.length).toBeGreaterThanOrEqual(Math.floor((input * toHz) / fromHz));
        expect(output.length).toBeLessThanOrEqual(Math.ceil((input * toHz) / fromHz));
      }
    }
  });

  it("gives the same samples whatever the chunking", async () => {
    const jfk = (await readWavFile(audio("jfk_16k.wav"))).samples.subarray(0, 48000);
    const whole = concat(pushAll(jfk, 16000, 24000, [jfk.length]));
    expect(whole.length).toBe(72000);
    expect([...concat(pushAll(jfk, 16000, 24000, [1, 2, 3, 1597]))]).toEqual([...whole]);
    expect([...concat(pushAll(jfk, 16000, 24000, [320]))]).toEqual([...whole]);
  });

  it("keeps the frequency and level of a 1 kHz tone from 16 kHz to 24 kHz, in 20 ms chunks", () => {
    const out = concat(pushAll(sine(1000, 16000, 16000), 16000, 24000, [320]));
    expect(out.length).toBe(24000);
    expect(zeroCrossings(out, 2400, 21600)).toBeGreaterThanOrEqual(1599);
    expect(zeroCrossings(out, 2400, 21600)).toBeLessThanOrEqual(1601);
    expect(Math.abs(rms(out.subarray(2400, 21600)) / (10000 / 32768 / Math.SQRT2) - 1)).toBeLessThan(0.05);
  });

  it("interpolates between the last sample of one chunk and the first of the next", () => {
    const resampler = createResampler(16000, 32000);
    // Output k sits at input position (k + 1) / 2 - 1: -0.5, 0, 0.5, 1, ...; the sample before the stream is 0.
    expect([...resampler.push(Int16Array.from([100, 200]))]).toEqual([50, 100, 150, 200]);
    expect([...resampler.push(Int16Array.from([400]))]).toEqual([300, 400]);
  });

  it("passes samples through unchanged when the rates are equal", () => {
    const resampler = createResampler(24000, 24000);
    expect([...resampler.push(Int16Array.from([1, -2, 3]))]).toEqual([1, -2, 3]);
    expect([...resampler.push(new Int16Array(0))]).toEqual([]);
    expect([...resampler.push(Int16Array.from([4]))]).toEqual([4]);
  });
});
