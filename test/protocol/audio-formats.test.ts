import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  bytesPerSample,
  decodeAudio,
  encodeAudio,
  formatSpellings,
  parseAudioFormat,
  type WireAudioFormat,
  type WireEncoding,
} from "../../src/protocol/audio-formats.ts";

const PCM16: WireAudioFormat = { encoding: "pcm16", rate: 16000 };
const ULAW: WireAudioFormat = { encoding: "g711_ulaw", rate: 8000 };
const ALAW: WireAudioFormat = { encoding: "g711_alaw", rate: 8000 };
const F32: WireAudioFormat = { encoding: "pcm_f32le", rate: 24000 };
const ALL_FORMATS = [PCM16, ULAW, ALAW, F32];

const int16 = fc.integer({ min: -32768, max: 32767 });
const samplesArb = fc.array(int16, { maxLength: 64 }).map((values) => Int16Array.from(values));
const EVERY_INT16 = Int16Array.from({ length: 65536 }, (_, i) => i - 32768);
const hex = (code: number): string => `0x${code.toString(16).toUpperCase().padStart(2, "0")}`;
const EVERY_CODE = Uint8Array.from({ length: 256 }, (_, i) => i);

/** Unwraps a decode that must succeed, failing the test with the refusal otherwise. */
const decoded = (format: WireAudioFormat, bytes: Uint8Array): number[] => {
  const result = decodeAudio(format, bytes);
  if (!(result instanceof Int16Array)) throw new Error(`expected samples, got ${JSON.stringify(result)}`);
  return [...result];
};

const f32Bytes = (values: readonly number[]): Uint8Array => {
  const bytes = new Uint8Array(values.length * 4);
  const view = new DataView(bytes.buffer);
  for (const [i, value] of values.entries()) view.setFloat32(i * 4, value, true);
  return bytes;
};

// The decoder output values of ITU-T G.711 (11/1988), derived here from the tables rather than from the code under
// test. A code is P S S S Q Q Q Q (polarity, segment, quantisation step).
// mu-law, Table 2a/2b: every bit is transmitted inverted; polarity 1 (after inversion 0) is positive; the output of
// segment s, step q is ((2q + 33) * 2^s) - 33 on the 8159 scale (14 bits), so times 4 on the int16 scale.
const g711Ulaw = (code: number): number => {
  const c = ~code & 0xff;
  const magnitude = ((2 * (c & 15) + 33) << ((c >> 4) & 7)) - 33;
  // Both zero codes decode to 0: int16 has no negative zero.
  return magnitude === 0 ? 0 : (c & 0x80 ? -magnitude : magnitude) * 4;
};
// A-law, Table 1a/1b: the even bits are transmitted inverted (XOR 0x55); polarity 1 is positive; segment 0 outputs
// 1, 3, ..., 31 and segment s >= 1 outputs (2q + 33) * 2^(s-1) on the 4096 scale (13 bits), so times 8 on int16.
const g711Alaw = (code: number): number => {
  const c = code ^ 0x55;
  const segment = (c >> 4) & 7;
  const q = c & 15;
  const magnitude = segment === 0 ? 2 * q + 1 : (2 * q + 33) << (segment - 1);
  return (c & 0x80 ? magnitude : -magnitude) * 8;
};
// The encoders of ITU-T G.191's Software Tool Library (g711.c), transcribed line by line: the ITU-T's reference
// for G.711 on 16-bit linear input, negative samples taken by their one's complement.
const g191UlawCompress = (x: number): number => {
  let absno = x < 0 ? (~x >> 2) + 33 : (x >> 2) + 33;
  if (absno > 0x1fff) absno = 0x1fff;
  let i = absno >> 6;
  let segno = 1;
  while (i !== 0) {
    segno++;
    i >>= 1;
  }
  const highNibble = 0x0008 - segno;
  const lowNibble = 0x000f - ((absno >> segno) & 0x000f);
  const res = (highNibble << 4) | lowNibble;
  return x >= 0 ? res | 0x0080 : res;
};
const g191AlawCompress = (x: number): number => {
  let ix = x < 0 ? ~x >> 4 : x >> 4;
  if (ix > 15) {
    let iexp = 1;
    while (ix > 16 + 15) {
      ix >>= 1;
      iexp++;
    }
    ix -= 16;
    ix += iexp << 4;
  }
  if (x >= 0) ix |= 0x0080;
  return ix ^ 0x0055;
};
/** Half a quantisation step of a code's segment, on the int16 scale (G.711 Tables 1 and 2: steps 2^(s+1) / 2^s). */
const halfStepUlaw = (code: number): number => 4 << ((~code >> 4) & 7);
const halfStepAlaw = (code: number): number => 8 << Math.max(0, (((code ^ 0x55) >> 4) & 7) - 1);

describe("parseAudioFormat", () => {
  it.each([
    ["pcm16", "pcm16"],
    ["pcm", "pcm16"],
    ["audio/pcm", "pcm16"],
    ["pcm_f32le", "pcm_f32le"],
    ["audio/pcm_f32le", "pcm_f32le"],
    ["f32le", "pcm_f32le"],
  ] as const)("reads the string %j as %s at the default rate", (spelling, encoding) => {
    expect(parseAudioFormat(spelling, 16000)).toEqual({ encoding, rate: 16000 });
    expect(parseAudioFormat(spelling, 24000)).toEqual({ encoding, rate: 24000 });
  });

  it.each([
    ["audio/pcm", "pcm16"],
    ["pcm16", "pcm16"],
    ["audio/pcm_f32le", "pcm_f32le"],
  ] as const)("reads the object {type: %j} with its own rate, else the default", (type, encoding) => {
    expect(parseAudioFormat({ type, rate: 48000 }, 16000)).toEqual({ encoding, rate: 48000 });
    expect(parseAudioFormat({ type }, 16000)).toEqual({ encoding, rate: 16000 });
  });

  it.each([
    ["g711_ulaw", "g711_ulaw"],
    ["audio/pcmu", "g711_ulaw"],
    ["pcmu", "g711_ulaw"],
    ["g711_alaw", "g711_alaw"],
    ["audio/pcma", "g711_alaw"],
    ["pcma", "g711_alaw"],
  ] as const)("reads %j as %s at 8000 Hz whatever the default rate", (spelling, encoding) => {
    expect(parseAudioFormat(spelling, 24000)).toEqual({ encoding, rate: 8000 });
    expect(parseAudioFormat({ type: spelling }, 16000)).toEqual({ encoding, rate: 8000 });
    expect(parseAudioFormat({ type: spelling, rate: 8000 }, 16000)).toEqual({ encoding, rate: 8000 });
  });

  it.each(["audio/mpeg", "opus", "mp3", "PCM16", "audio/PCMU", "", "pcm24"])(
    "refuses %j as unsupported, listing every supported spelling",
    (spelling) => {
      for (const value of [spelling, { type: spelling, rate: 16000 }]) {
        const result = parseAudioFormat(value, 16000);
        expect(result).toMatchObject({ code: "unsupported_audio_format" });
        const message = "message" in result ? result.message : "";
        expect(message).toContain(JSON.stringify(spelling));
        for (const supported of ["pcm16", "audio/pcm", "g711_ulaw", "audio/pcmu", "g711_alaw", "audio/pcma"])
          expect(message).toContain(`"${supported}"`);
        expect(message).toContain('"pcm_f32le"');
      }
    },
  );

  it("refuses a G.711 object whose rate is not 8000 Hz, naming the rate that came", () => {
    const result = parseAudioFormat({ type: "audio/pcmu", rate: 16000 }, 16000);
    expect(result).toEqual({
      code: "unsupported_audio_format",
      message: 'audio format "audio/pcmu" is G.711 at 8000 Hz only; got rate 16000',
    });
    expect(parseAudioFormat({ type: "audio/pcma", rate: 24000 }, 8000)).toMatchObject({
      code: "unsupported_audio_format",
    });
  });

  it.each([0, -16000, 16000.5, Number.NaN, Number.POSITIVE_INFINITY])(
    "refuses a rate of %s Hz, which is no positive whole number",
    (rate) => {
      expect(parseAudioFormat({ type: "audio/pcm", rate }, 16000)).toMatchObject({ code: "unsupported_audio_format" });
      expect(parseAudioFormat("pcm_f32le", rate)).toMatchObject({ code: "unsupported_audio_format" });
    },
  );
});

describe("formatSpellings", () => {
  it.each([
    [PCM16, { beta: "pcm16", ga: { type: "audio/pcm", rate: 16000 } }],
    [ULAW, { beta: "g711_ulaw", ga: { type: "audio/pcmu" } }],
    [ALAW, { beta: "g711_alaw", ga: { type: "audio/pcma" } }],
    [F32, { beta: "pcm_f32le", ga: { type: "audio/pcm_f32le", rate: 24000 } }],
  ])("spells %j in beta and GA", (format, spellings) => {
    expect(formatSpellings(format)).toStrictEqual(spellings);
  });

  it("is inverted by parseAudioFormat: either spelling of any format parses back to it", () => {
    const formatArb = fc.oneof(
      fc.record({
        encoding: fc.constantFrom<WireEncoding>("pcm16", "pcm_f32le"),
        rate: fc.integer({ min: 1, max: 192000 }),
      }),
      fc.record({ encoding: fc.constantFrom<WireEncoding>("g711_ulaw", "g711_alaw"), rate: fc.constant(8000) }),
    );
    fc.assert(
      fc.property(formatArb, fc.integer({ min: 1, max: 192000 }), (format, otherRate) => {
        const { beta, ga } = formatSpellings(format);
        expect(parseAudioFormat(beta, format.rate)).toEqual(format);
        expect(parseAudioFormat(ga, otherRate)).toEqual(format);
      }),
    );
  });
});

describe("bytesPerSample", () => {
  it("is 2 for pcm16, 1 for G.711 and 4 for pcm_f32le", () => {
    expect(ALL_FORMATS.map((f) => bytesPerSample(f.encoding))).toEqual([2, 1, 1, 4]);
  });

  it("sizes what encodeAudio writes and decodeAudio reads, for every format", () => {
    fc.assert(
      fc.property(fc.constantFrom(...ALL_FORMATS), samplesArb, (format, samples) => {
        const bytes = encodeAudio(format, samples);
        expect(bytes.byteLength).toBe(samples.length * bytesPerSample(format.encoding));
        expect(decoded(format, bytes)).toHaveLength(samples.length);
      }),
    );
  });
});

describe("pcm16", () => {
  it("reads signed 16-bit little-endian samples", () => {
    expect(decoded(PCM16, Uint8Array.of(0x01, 0x00, 0xff, 0xff, 0x00, 0x80, 0xff, 0x7f, 0x34, 0x12))).toEqual([
      1, -1, -32768, 32767, 0x1234,
    ]);
  });

  it("writes signed 16-bit little-endian samples", () => {
    expect([...encodeAudio(PCM16, Int16Array.of(1, -1, -32768, 32767, 0x1234))]).toEqual([
      0x01, 0x00, 0xff, 0xff, 0x00, 0x80, 0xff, 0x7f, 0x34, 0x12,
    ]);
  });

  it("reads a view that starts inside a larger buffer from the view's first byte", () => {
    const backing = Uint8Array.of(0xaa, 0x02, 0x00, 0xfe, 0xff, 0xbb);
    expect(decoded(PCM16, backing.subarray(1, 5))).toEqual([2, -2]);
  });

  it("round-trips every sequence of samples exactly", () => {
    fc.assert(
      fc.property(samplesArb, (samples) => {
        expect(decoded(PCM16, encodeAudio(PCM16, samples))).toEqual([...samples]);
      }),
    );
  });

  it.each([1, 3, 6401])("refuses %i bytes, which are no whole number of 2-byte samples", (length) => {
    expect(decodeAudio(PCM16, new Uint8Array(length))).toEqual({
      code: "bad_audio",
      message: `pcm16 audio must be a whole number of 2-byte samples; got ${length} bytes`,
    });
  });
});

describe("G.711 mu-law", () => {
  it.each(
    [
      [0xff, 0],
      [0x7f, 0],
      [0x00, -32124],
      [0x80, 32124],
      [0xfe, 8],
      [0x7e, -8],
      [0xf0, 120],
      [0xef, 132],
      [0x8f, 16764],
    ].map(([code, value]) => [hex(code as number), code as number, value as number] as const),
  )("decodes code %s to %i (G.711 Table 2)", (_, code, value) => {
    expect(decoded(ULAW, Uint8Array.of(code))).toEqual([value]);
  });

  it("decodes all 256 codes to the decoder output values of G.711 Table 2", () => {
    expect(decoded(ULAW, EVERY_CODE)).toEqual([...EVERY_CODE].map(g711Ulaw));
  });

  it("re-encodes every decoded code to itself, but for negative zero 0x7F, which encodes as 0xFF", () => {
    const again = encodeAudio(ULAW, Int16Array.from(decoded(ULAW, EVERY_CODE)));
    const changed = [...EVERY_CODE].filter((code) => again[code] !== code);
    expect(changed).toEqual([0x7f]);
    expect(again[0x7f]).toBe(0xff);
  });

  it("encodes silence as 0xFF and full scale as 0x80 / 0x00, clipping beyond +-32124", () => {
    expect([...encodeAudio(ULAW, Int16Array.of(0, 32767, -32768, 32124, -32124))]).toEqual([
      0xff, 0x80, 0x00, 0x80, 0x00,
    ]);
  });

  it("encodes -1 to -4 as negative zero 0x7F and -5 as 0x7E, taking negatives by their one's complement", () => {
    expect([...encodeAudio(ULAW, Int16Array.of(-1, -4, -5, 3, 4))]).toEqual([0x7f, 0x7f, 0x7e, 0xff, 0xfe]);
  });

  it("encodes every int16 as ITU-T G.191's ulaw_compress does", () => {
    const codes = encodeAudio(ULAW, EVERY_INT16);
    const differing = [...EVERY_INT16].filter((x, i) => codes[i] !== g191UlawCompress(x));
    expect(differing).toEqual([]);
  });

  it("round-trips any sample within half the quantisation step of its segment, plus the 2 bits dropped", () => {
    fc.assert(
      fc.property(int16, (x) => {
        const code = encodeAudio(ULAW, Int16Array.of(x))[0] as number;
        const back = decoded(ULAW, Uint8Array.of(code))[0] as number;
        if (Math.abs(x) > 32124 + halfStepUlaw(code)) expect(back).toBe(Math.sign(x) * 32124);
        else expect(Math.abs(back - x)).toBeLessThanOrEqual(halfStepUlaw(code) + 3);
      }),
      { numRuns: 5000 },
    );
  });

  it("round-trips every int16 within max(16, |x|/16), the step size of its segment", () => {
    const back = decoded(ULAW, encodeAudio(ULAW, EVERY_INT16));
    const outside = [...EVERY_INT16].filter(
      (x, i) => Math.abs((back[i] as number) - x) > Math.max(16, Math.abs(x) / 16),
    );
    expect(outside).toEqual([]);
  });

  it("maps larger samples to larger or equal decoded values (the quantiser is monotonic)", () => {
    const back = decoded(ULAW, encodeAudio(ULAW, EVERY_INT16));
    const inversions = back.flatMap((value, i) => (i > 0 && value < (back[i - 1] as number) ? [i - 32768] : []));
    expect(inversions).toEqual([]);
  });
});

describe("G.711 A-law", () => {
  it.each(
    [
      [0xd5, 8],
      [0x55, -8],
      [0x2a, -32256],
      [0xaa, 32256],
      [0xd4, 24],
      [0xc5, 264],
      [0x54, -24],
    ].map(([code, value]) => [hex(code as number), code as number, value as number] as const),
  )("decodes code %s to %i (G.711 Table 1)", (_, code, value) => {
    expect(decoded(ALAW, Uint8Array.of(code))).toEqual([value]);
  });

  it("decodes all 256 codes to the decoder output values of G.711 Table 1", () => {
    expect(decoded(ALAW, EVERY_CODE)).toEqual([...EVERY_CODE].map(g711Alaw));
  });

  it("re-encodes every decoded code to itself (A-law has no second zero)", () => {
    const again = encodeAudio(ALAW, Int16Array.from(decoded(ALAW, EVERY_CODE)));
    expect([...again]).toEqual([...EVERY_CODE]);
  });

  it("encodes silence as 0xD5, -1 as 0x55 and full scale as 0xAA / 0x2A", () => {
    expect([...encodeAudio(ALAW, Int16Array.of(0, -1, 32767, -32768))]).toEqual([0xd5, 0x55, 0xaa, 0x2a]);
  });

  it("encodes -16 as 0x55 and -17 as 0x54, taking negatives by their one's complement", () => {
    expect([...encodeAudio(ALAW, Int16Array.of(-16, -17, 15, 16))]).toEqual([0x55, 0x54, 0xd5, 0xd4]);
  });

  it("encodes every int16 as ITU-T G.191's alaw_compress does", () => {
    const codes = encodeAudio(ALAW, EVERY_INT16);
    const differing = [...EVERY_INT16].filter((x, i) => codes[i] !== g191AlawCompress(x));
    expect(differing).toEqual([]);
  });

  it("round-trips any sample within half the quantisation step of its segment, plus the 3 bits dropped", () => {
    fc.assert(
      fc.property(int16, (x) => {
        const code = encodeAudio(ALAW, Int16Array.of(x))[0] as number;
        const back = decoded(ALAW, Uint8Array.of(code))[0] as number;
        expect(Math.abs(back - x)).toBeLessThanOrEqual(halfStepAlaw(code) + 7);
      }),
      { numRuns: 5000 },
    );
  });

  it("round-trips every int16 within max(16, |x|/16), the step size of its segment", () => {
    const back = decoded(ALAW, encodeAudio(ALAW, EVERY_INT16));
    const outside = [...EVERY_INT16].filter(
      (x, i) => Math.abs((back[i] as number) - x) > Math.max(16, Math.abs(x) / 16),
    );
    expect(outside).toEqual([]);
  });

  it("maps larger samples to larger or equal decoded values (the quantiser is monotonic)", () => {
    const back = decoded(ALAW, encodeAudio(ALAW, EVERY_INT16));
    const inversions = back.flatMap((value, i) => (i > 0 && value < (back[i - 1] as number) ? [i - 32768] : []));
    expect(inversions).toEqual([]);
  });
});

describe("pcm_f32le", () => {
  it("scales floats by 32768, rounding half away from zero and clipping to int16", () => {
    const values = [0, 0.5, -0.5, 1, -1, 0.25, 1 / 65536, -1 / 65536, 3 / 65536, 1e-9];
    expect(decoded(F32, f32Bytes(values))).toEqual([0, 16384, -16384, 32767, -32768, 8192, 1, -1, 2, 0]);
  });

  it("clamps samples outside [-1, 1] to full scale", () => {
    expect(decoded(F32, f32Bytes([1.5, -2, 3.4e38, -3.4e38]))).toEqual([32767, -32768, 32767, -32768]);
  });

  it("writes sample / 32768 as a little-endian float32", () => {
    expect([...encodeAudio(F32, Int16Array.of(16384, -32768))]).toEqual([0, 0, 0, 0x3f, 0, 0, 0x80, 0xbf]);
  });

  it("decodes any finite float in [-1, 1] within half an LSB of x * 32768 (clipped)", () => {
    fc.assert(
      fc.property(fc.float({ min: -1, max: 1, noNaN: true }), (x) => {
        const [value] = decoded(F32, f32Bytes([x]));
        expect(Math.abs((value as number) - Math.min(32767, x * 32768))).toBeLessThanOrEqual(0.5);
      }),
    );
  });

  it("round-trips every sequence of int16 samples within 1 LSB (in fact exactly)", () => {
    fc.assert(
      fc.property(samplesArb, (samples) => {
        const back = decoded(F32, encodeAudio(F32, samples));
        for (const [i, value] of back.entries())
          expect(Math.abs(value - (samples[i] as number))).toBeLessThanOrEqual(1);
        expect(back).toEqual([...samples]);
      }),
    );
  });

  it("reads a view that starts inside a larger buffer from the view's first byte", () => {
    const backing = new Uint8Array(10);
    backing.set(f32Bytes([0.5, -0.25]), 1);
    expect(decoded(F32, backing.subarray(1, 9))).toEqual([16384, -8192]);
  });

  it.each([1, 2, 3, 6, 9601])("refuses %i bytes, which are no whole number of 4-byte samples", (length) => {
    expect(decodeAudio(F32, new Uint8Array(length))).toEqual({
      code: "bad_audio",
      message: `pcm_f32le audio must be a whole number of 4-byte samples; got ${length} bytes`,
    });
  });

  it.each([
    [Number.NaN, "NaN"],
    [Number.POSITIVE_INFINITY, "Infinity"],
    [Number.NEGATIVE_INFINITY, "-Infinity"],
  ])("refuses a %s sample, naming its index and value", (bad, shown) => {
    expect(decodeAudio(F32, f32Bytes([0.1, 0.2, bad, 0.3]))).toEqual({
      code: "bad_audio",
      message: `pcm_f32le audio must hold finite samples in [-1, 1]; sample 2 is ${shown}`,
    });
  });
});

describe("empty audio", () => {
  it.each(ALL_FORMATS)("decodes and encodes no bytes as no samples in $encoding", (format) => {
    expect(decoded(format, new Uint8Array(0))).toEqual([]);
    expect(encodeAudio(format, new Int16Array(0)).byteLength).toBe(0);
  });
});
