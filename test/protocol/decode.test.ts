import { describe, expect, it } from "vitest";
import type { AudioFormat } from "../../src/domain/index.ts";
import {
  type DecodeContext,
  type DecodedFrame,
  decodeClientFrame,
  encodeAudio,
  MAX_JSON_VALUES,
  sessionObject,
} from "../../src/protocol/index.ts";

const PCM16_16K: DecodeContext = { inputRateHz: 16000 };
const session = (inputAudio: AudioFormat): DecodeContext => ({ inputRateHz: inputAudio.rate, inputAudio });

const decode = (event: Record<string, unknown>, ctx: DecodeContext = PCM16_16K): DecodedFrame => {
  const text = JSON.stringify(event);
  return decodeClientFrame(text, Buffer.byteLength(text), ctx);
};

const base64 = (bytes: Uint8Array | readonly number[]): string =>
  Buffer.from(Uint8Array.from(bytes)).toString("base64");

/** Little-endian PCM16 bytes of `samples`, written here by hand rather than by the code under test. */
const le16 = (samples: readonly number[]): Uint8Array => {
  const bytes = new Uint8Array(samples.length * 2);
  for (const [i, s] of samples.entries()) {
    const u = s & 0xffff;
    bytes[i * 2] = u & 0xff;
    bytes[i * 2 + 1] = u >> 8;
  }
  return bytes;
};

const f32le = (values: readonly number[]): Uint8Array => {
  const bytes = new Uint8Array(values.length * 4);
  const view = new DataView(bytes.buffer);
  for (const [i, v] of values.entries()) view.setFloat32(i * 4, v, true);
  return bytes;
};

/** Unwraps an append that must decode, failing the test with the refusal otherwise. */
const appended = (frame: DecodedFrame): { pcm16: number[]; sampleRateHz: number } => {
  if (frame.type !== "input_audio_buffer.append") throw new Error(`expected an append, got ${JSON.stringify(frame)}`);
  return { pcm16: [...frame.pcm16], sampleRateHz: frame.sampleRateHz };
};

const append = (audio: Uint8Array | readonly number[], extra: Record<string, unknown> = {}) => ({
  type: "input_audio_buffer.append",
  event_id: "a1",
  audio: base64(audio),
  ...extra,
});

const refusal = (code: string, param: string, message: string) => ({
  type: "invalid",
  eventId: "a1",
  code,
  param,
  message,
  eventType: "input_audio_buffer.append",
});

// ITU-T G.711 decoder outputs on the int16 scale (mu-law: 14-bit values times 4; A-law: 13-bit values times 8), as
// in the tables of Sun's reference g711.c: mu-law 0xFF and 0x7F are the two zeros, 0x80 / 0x00 full scale, 0xF0
// segment 0 step 15; A-law 0xD5 / 0x55 the smallest steps, 0xAA / 0x2A full scale, 0xFF segment 2 step 10.
const ULAW_CODES = [0xff, 0x7f, 0x80, 0x00, 0xf0, 0x70];
const ULAW_PCM = [0, 0, 32124, -32124, 120, -120];
const ALAW_CODES = [0xd5, 0x55, 0xaa, 0x2a, 0xff];
const ALAW_PCM = [8, -8, 32256, -32256, 848];

describe("frames of many values", () => {
  it("refuses a frame of more than 100,000 values with invalid_json before parsing it, echoing its event_id", () => {
    const frame = (n: number) =>
      `{"event_id":"evt_wide","type":"session.update","session":{"instructions":"hi","x":[${Array(n).fill("0").join(",")}]}}`;
    const wide = frame(MAX_JSON_VALUES);
    expect(decodeClientFrame(wide, Buffer.byteLength(wide), PCM16_16K)).toMatchObject({
      type: "invalid",
      code: "invalid_json",
      eventId: "evt_wide",
    });
    // Within the limit the frame is decoded as what it is (here refused for its unknown field, not for its size).
    const within = frame(MAX_JSON_VALUES - 10);
    const decoded = decodeClientFrame(within, Buffer.byteLength(within), PCM16_16K);
    expect(decoded.type === "invalid" && decoded.code === "invalid_json").toBe(false);
  });
});

describe("input_audio_buffer.append formats", () => {
  it("passes pcm16 through unchanged at the session's rate", () => {
    const bytes = le16([0, 1, -1, 32767, -32768]);
    expect(appended(decode(append(bytes)))).toEqual({ pcm16: [...bytes], sampleRateHz: 16000 });
  });

  it("decodes a G.711 mu-law append (per-append format) to PCM16 at 8000 Hz", () => {
    expect(appended(decode(append(ULAW_CODES, { format: "g711_ulaw" })))).toEqual({
      pcm16: [...le16(ULAW_PCM)],
      sampleRateHz: 8000,
    });
  });

  it("decodes a G.711 A-law append (per-append GA format) to PCM16 at 8000 Hz", () => {
    expect(appended(decode(append(ALAW_CODES, { format: { type: "audio/pcma" } })))).toEqual({
      pcm16: [...le16(ALAW_PCM)],
      sampleRateHz: 8000,
    });
  });

  it("reads an append without format in the format the session declared", () => {
    expect(appended(decode(append(ULAW_CODES), session({ format: "g711_ulaw", rate: 8000 })))).toEqual({
      pcm16: [...le16(ULAW_PCM)],
      sampleRateHz: 8000,
    });
    expect(appended(decode(append(ALAW_CODES), session({ format: "g711_alaw", rate: 8000 })))).toEqual({
      pcm16: [...le16(ALAW_PCM)],
      sampleRateHz: 8000,
    });
  });

  it("decodes a pcm_f32le append to PCM16 at its rate", () => {
    const floats = f32le([0, 0.5, -0.5, -1, 1, 2, -2]);
    const expected = [...le16([0, 16384, -16384, -32768, 32767, 32767, -32768])];
    expect(appended(decode(append(floats, { format: "pcm_f32le", sample_rate_hz: 24000 })))).toEqual({
      pcm16: expected,
      sampleRateHz: 24000,
    });
    expect(appended(decode(append(floats), session({ format: "pcm_f32le", rate: 48000 })))).toEqual({
      pcm16: expected,
      sampleRateHz: 48000,
    });
    expect(appended(decode(append(floats, { format: { type: "audio/pcm_f32le", rate: 8000 } })))).toEqual({
      pcm16: expected,
      sampleRateHz: 8000,
    });
  });

  it("lets a per-append format override the session's, under either key", () => {
    const ulawSession = session({ format: "g711_ulaw", rate: 8000 });
    const pcm = le16([1000, -1000]);
    expect(appended(decode(append(pcm, { format: "pcm16", sample_rate_hz: 16000 }), ulawSession))).toEqual({
      pcm16: [...pcm],
      sampleRateHz: 16000,
    });
    expect(appended(decode(append(pcm, { format: { type: "audio/pcm", rate: 48000 } }), ulawSession))).toEqual({
      pcm16: [...pcm],
      sampleRateHz: 48000,
    });
    expect(appended(decode(append(ALAW_CODES, { input_audio_format: "pcma" }), ulawSession))).toEqual({
      pcm16: [...le16(ALAW_PCM)],
      sampleRateHz: 8000,
    });
    expect(appended(decode(append(ULAW_CODES, { format: "audio/pcmu" })))).toEqual({
      pcm16: [...le16(ULAW_PCM)],
      sampleRateHz: 8000,
    });
  });

  it("takes sample_rate_hz over the session's rate for pcm16", () => {
    expect(appended(decode(append(le16([5]), { sample_rate_hz: 48000 }))).sampleRateHz).toBe(48000);
  });

  it("keeps the messages of scenario 16: odd pcm16, sample_rate_hz 3 and audio/mpeg", () => {
    expect(decode(append([1, 2, 3]))).toEqual(
      refusal("bad_audio", "audio", "pcm16 audio must be a whole number of 2-byte samples; got 3 bytes"),
    );
    expect(decode({ type: "input_audio_buffer.append", event_id: "a1", audio: "AAAA", sample_rate_hz: 3 })).toEqual(
      refusal("bad_event", "sample_rate_hz", "sample_rate_hz must be one of 8000, 16000, 24000, 48000 Hz; got 3"),
    );
    const mpeg = decode({ type: "input_audio_buffer.append", event_id: "a1", audio: "AAAA", format: "audio/mpeg" });
    expect(mpeg).toMatchObject({ type: "invalid", code: "unsupported_audio_format", param: "format", eventId: "a1" });
    expect(mpeg).toMatchObject({ message: expect.stringContaining('"audio/mpeg" is not supported') });
    expect(mpeg).toMatchObject({ message: expect.stringContaining('"g711_ulaw"') });
  });

  it("refuses pcm_f32le bytes that are no whole number of 4-byte samples, and non-finite samples, as bad_audio", () => {
    expect(decode(append([0, 0, 0, 0, 0, 0], { format: "pcm_f32le" }))).toEqual(
      refusal("bad_audio", "audio", "pcm_f32le audio must be a whole number of 4-byte samples; got 6 bytes"),
    );
    expect(decode(append(f32le([0, Number.NaN]), { format: "pcm_f32le" }))).toEqual(
      refusal("bad_audio", "audio", "pcm_f32le audio must hold finite samples in [-1, 1]; sample 1 is NaN"),
    );
  });

  it("refuses a G.711 append at a rate other than 8000 Hz", () => {
    expect(decode(append(ULAW_CODES, { format: "g711_ulaw", sample_rate_hz: 16000 }))).toEqual(
      refusal("bad_event", "sample_rate_hz", "sample_rate_hz of g711_ulaw audio must be 8000 Hz; got 16000"),
    );
    expect(decode(append(ALAW_CODES, { sample_rate_hz: 24000 }), session({ format: "g711_alaw", rate: 8000 }))).toEqual(
      refusal("bad_event", "sample_rate_hz", "sample_rate_hz of g711_alaw audio must be 8000 Hz; got 24000"),
    );
    expect(decode(append(ULAW_CODES, { format: { type: "audio/pcmu", rate: 16000 } }))).toMatchObject({
      type: "invalid",
      code: "unsupported_audio_format",
      param: "format",
    });
  });

  it("refuses an f32 append at an unsupported rate as bad_event", () => {
    expect(decode(append(f32le([0]), { format: "pcm_f32le", sample_rate_hz: 44100 }))).toEqual(
      refusal("bad_event", "sample_rate_hz", "sample_rate_hz must be one of 8000, 16000, 24000, 48000 Hz; got 44100"),
    );
  });

  it("round-trips what the codec encodes: G.711 of real samples decodes to the G.711 values", () => {
    const samples = Int16Array.from([0, 100, -100, 1000, -1000, 8000, -8000, 30000, -30000]);
    const codes = encodeAudio({ encoding: "g711_ulaw", rate: 8000 }, samples);
    const decoded = appended(decode(append(codes, { format: "g711_ulaw" })));
    const values = new Int16Array(Uint8Array.from(decoded.pcm16).buffer);
    for (const [i, value] of values.entries()) {
      // mu-law's step at +-30000 is 1024 on the int16 scale: within half a step plus rounding.
      expect(Math.abs(value - (samples[i] as number))).toBeLessThanOrEqual(516);
    }
  });
});

describe("session.update audio formats", () => {
  const patchOf = (sessionJson: Record<string, unknown>, ctx: DecodeContext = PCM16_16K) => {
    const frame = decode({ type: "session.update", event_id: "u1", session: sessionJson }, ctx);
    if (frame.type !== "session.update") throw new Error(`expected a session.update, got ${JSON.stringify(frame)}`);
    return frame.patch;
  };

  it.each([
    [{ input_audio_format: "g711_ulaw" }, { format: "g711_ulaw", rate: 8000 }],
    [{ audio: { input: { format: { type: "audio/pcmu" } } } }, { format: "g711_ulaw", rate: 8000 }],
    [{ input_audio_format: "g711_alaw" }, { format: "g711_alaw", rate: 8000 }],
    [{ audio: { input: { format: { type: "audio/pcma" } } } }, { format: "g711_alaw", rate: 8000 }],
    [{ audio: { input: { format: { type: "audio/pcma", rate: 8000 } } } }, { format: "g711_alaw", rate: 8000 }],
    [{ input_audio_format: "pcm16" }, { format: "pcm16", rate: 24000 }],
    [
      { input_audio_format: "pcm16", input_sample_rate_hz: 48000 },
      { format: "pcm16", rate: 48000 },
    ],
    [{ audio: { input: { format: { type: "audio/pcm", rate: 8000 } } } }, { format: "pcm16", rate: 8000 }],
    [
      { input_audio_format: "pcm_f32le", input_sample_rate_hz: 24000 },
      { format: "pcm_f32le", rate: 24000 },
    ],
    [{ audio: { input: { format: { type: "audio/pcm_f32le", rate: 24000 } } } }, { format: "pcm_f32le", rate: 24000 }],
    [{ input_sample_rate_hz: 24000 }, { format: "pcm16", rate: 24000 }],
  ])("reads the input format of %j", (sessionJson, inputAudio) => {
    expect(patchOf(sessionJson)).toEqual({ inputAudio });
  });

  it("prefers the GA spelling when both are given", () => {
    expect(
      patchOf({ input_audio_format: "pcm16", audio: { input: { format: { type: "audio/pcmu" } } } }).inputAudio,
    ).toEqual({ format: "g711_ulaw", rate: 8000 });
  });

  it("keeps the session's encoding when only input_sample_rate_hz changes", () => {
    expect(patchOf({ input_sample_rate_hz: 48000 }, session({ format: "pcm_f32le", rate: 24000 }))).toEqual({
      inputAudio: { format: "pcm_f32le", rate: 48000 },
    });
  });

  it("refuses G.711 at another rate and unknown formats with unsupported_audio_format", () => {
    const refused = (sessionJson: Record<string, unknown>, ctx: DecodeContext = PCM16_16K) =>
      decode({ type: "session.update", event_id: "u1", session: sessionJson }, ctx);
    for (const sessionJson of [
      { input_audio_format: "g711_ulaw", input_sample_rate_hz: 16000 },
      { audio: { input: { format: { type: "audio/pcmu", rate: 16000 } } } },
      { input_audio_format: "audio/mpeg" },
    ]) {
      expect(refused(sessionJson)).toMatchObject({
        type: "invalid",
        code: "unsupported_audio_format",
        param: "session.input_audio_format",
        eventId: "u1",
      });
    }
    expect(refused({ input_sample_rate_hz: 16000 }, session({ format: "g711_ulaw", rate: 8000 }))).toMatchObject({
      code: "unsupported_audio_format",
      message: 'audio format "g711_ulaw" is G.711 at 8000 Hz only; got rate 16000',
    });
  });

  it("reads output formats in both spellings (the domain decides which it serves) and names the known ones for unknown ones", () => {
    expect(patchOf({ output_audio_format: "g711_ulaw" })).toEqual({ outputAudio: { format: "g711_ulaw", rate: 8000 } });
    expect(patchOf({ audio: { output: { format: { type: "audio/pcm" } } } })).toEqual({
      outputAudio: { format: "pcm16", rate: 24000 },
    });
    expect(decode({ type: "session.update", event_id: "u1", session: { output_audio_format: "mp3" } })).toEqual({
      type: "invalid",
      eventId: "u1",
      code: "unsupported_audio_format",
      param: "session.output_audio_format",
      message: expect.stringMatching(/^audio format "mp3" is not supported; use one of .*"pcm16".*"g711_ulaw"/),
      eventType: "session.update",
    });
  });

  it("reads back the formats the session object renders, from either spelling", () => {
    const config = (inputAudio: AudioFormat) => ({
      model: "m",
      instructions: "",
      voice: null,
      outputModalities: ["audio", "text"] as const,
      inputAudio,
      outputAudio: { format: "pcm16" as const, rate: 24000 },
      turnDetection: null,
      overlapPolicy: "listen_only" as const,
      playbackCommitPolicy: "ack_only" as const,
      temperature: null,
      autoResponse: false,
      nativeDuplex: true,
      idleTimeoutS: null,
      tools: [],
      toolChoice: "auto" as const,
      maxResponseOutputTokens: "inf" as const,
      refAudio: null,
      responseTimeoutMs: 30000,
      overlapShortAckMs: 700,
      overlapBargeInMs: 1200,
      overlapSilenceRms: 0.003,
      speed: 1,
      tracing: null,
    });
    const capabilities = {
      implementationLevel: "turn_based" as const,
      chunkPeriodMs: 200,
      supportsBargeIn: false,
      supportsSessionResume: false,
      supportsAudioTruncate: false,
      supportsToolCalls: false,
      supportsVideo: false,
      inputSampleRateHz: 16000,
      outputSampleRateHz: 24000,
    };
    const formats: AudioFormat[] = [
      { format: "pcm16", rate: 48000 },
      { format: "g711_ulaw", rate: 8000 },
      { format: "g711_alaw", rate: 8000 },
      { format: "pcm_f32le", rate: 24000 },
    ];
    for (const inputAudio of formats) {
      const rendered = sessionObject({ sessionId: "s", config: config(inputAudio), capabilities, epoch: 0, turnId: 0 });
      const audio = rendered.audio as { input: { format: unknown }; output: { format: unknown } };
      // A context at another rate, so that a rate read from the context instead of the spelling would show.
      const other = session({ format: "pcm16", rate: 16000 });
      // The beta string names its own rate (24 kHz for PCM), never the session's earlier one.
      expect(patchOf({ input_audio_format: rendered.input_audio_format }, other).inputAudio).toEqual(
        inputAudio.format.startsWith("g711") ? inputAudio : { ...inputAudio, rate: 24000 },
      );
      expect(patchOf({ audio: { input: { format: audio.input.format } } }, other).inputAudio).toEqual(inputAudio);
      expect(patchOf({ audio: { output: { format: audio.output.format } } }, other).outputAudio).toEqual({
        format: "pcm16",
        rate: 24000,
      });
    }
  });
});

describe("session.update fields of the reference", () => {
  const patchOf = (sessionJson: Record<string, unknown>) => {
    const decoded = decodeClientFrame(JSON.stringify({ type: "session.update", session: sessionJson }), 0, PCM16_16K);
    if (decoded.type !== "session.update") throw new Error(`expected session.update, got ${decoded.type}`);
    return decoded.patch;
  };

  it("reads the overlap thresholds, speed in both spellings, and tracing", () => {
    expect(
      patchOf({ overlap_short_ack_ms: 300, overlap_barge_in_ms: 1500, overlap_silence_rms: 0.01, speed: 1.1 }),
    ).toEqual({ overlapShortAckMs: 300, overlapBargeInMs: 1500, overlapSilenceRms: 0.01, speed: 1.1 });
    expect(patchOf({ audio: { output: { speed: 0.9 } } })).toEqual({ speed: 0.9 });
    expect(patchOf({ tracing: "auto" })).toEqual({ tracing: "auto" });
    expect(patchOf({ tracing: { workflow_name: "w", group_id: "g", metadata: { a: 1 } } })).toEqual({
      tracing: { workflowName: "w", groupId: "g", metadata: { a: 1 } },
    });
  });

  it("reads turn_detection without a type as a patch that names none", () => {
    expect(patchOf({ turn_detection: { threshold: 0.8 } })).toEqual({ turnDetection: { threshold: 0.8 } });
  });

  it.each([
    [{ overlap_barge_in_ms: -1 }, "session.overlap_barge_in_ms"],
    [{ tracing: { workflow: "w" } }, "session.tracing"],
    [{ speed: "fast" }, "session.speed"],
  ])("refuses %j with bad_event naming the field", (sessionJson, param) => {
    const decoded = decodeClientFrame(JSON.stringify({ type: "session.update", session: sessionJson }), 0, PCM16_16K);
    expect(decoded).toMatchObject({ type: "invalid", code: "bad_event", param });
  });
});

describe("conversation.item.create audio", () => {
  it("measures item audio in the session's input format", () => {
    const item = (bytes: number) => ({
      type: "conversation.item.create",
      item: { type: "message", role: "user", content: [{ type: "input_audio", audio: base64(new Uint8Array(bytes)) }] },
    });
    const ms = (frame: DecodedFrame): number | null =>
      frame.type === "conversation.item.create" && frame.item.type === "message"
        ? ((frame.item.content[0] as { audioMs?: number }).audioMs ?? null)
        : null;
    expect(ms(decode(item(32000)))).toBe(1000);
    expect(ms(decode(item(8000), session({ format: "g711_ulaw", rate: 8000 })))).toBe(1000);
    expect(ms(decode(item(96000), session({ format: "pcm_f32le", rate: 24000 })))).toBe(1000);
    expect(decode(item(6), session({ format: "pcm_f32le", rate: 24000 }))).toMatchObject({
      type: "invalid",
      code: "bad_audio",
      message: "item.content.0.audio: pcm_f32le needs a whole number of 4-byte samples, got 6 bytes",
    });
  });
});
