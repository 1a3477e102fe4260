import { describe, expect, it } from "vitest";
import {
  type AudioFormat,
  applySessionPatch,
  defaultSessionConfig,
  SUPPORTED_INPUT_RATES,
} from "../../src/domain/index.ts";
import { command, ECHO_CAPABILITIES, given, opened, update } from "./decider-spec.ts";

const config = defaultSessionConfig("test-model", ECHO_CAPABILITIES);

/** The configuration a patch of `inputAudio` gives, failing the test with the rejection otherwise. */
const withInput = (inputAudio: AudioFormat) => {
  const result = applySessionPatch(config, { inputAudio }, ECHO_CAPABILITIES);
  if ("code" in result) throw new Error(`expected a configuration, got ${result.code}: ${result.message}`);
  return result;
};

describe("session input audio formats", () => {
  it.each(
    SUPPORTED_INPUT_RATES.flatMap((rate) => [
      { format: "pcm16" as const, rate },
      { format: "pcm_f32le" as const, rate },
    ]),
  )("accepts $format at $rate Hz", (format) => {
    expect(withInput(format).inputAudio).toEqual(format);
  });

  it.each(["g711_ulaw", "g711_alaw"] as const)("accepts %s at 8000 Hz", (format) => {
    const result = withInput({ format, rate: 8000 });
    expect(result).toEqual({ ...config, inputAudio: { format, rate: 8000 } });
  });

  it.each([
    [{ format: "g711_ulaw", rate: 16000 }, "input audio format g711_ulaw is 8000 Hz only; got 16000 Hz"],
    [{ format: "g711_alaw", rate: 24000 }, "input audio format g711_alaw is 8000 Hz only; got 24000 Hz"],
    [
      { format: "pcm16", rate: 44100 },
      "input sample rate 44100 Hz is not supported for pcm16; use one of 8000, 16000, 24000, 48000",
    ],
    [
      { format: "pcm_f32le", rate: 3 },
      "input sample rate 3 Hz is not supported for pcm_f32le; use one of 8000, 16000, 24000, 48000",
    ],
  ] as const)("refuses %j with unsupported_audio_format", (inputAudio, message) => {
    expect(applySessionPatch(config, { inputAudio }, ECHO_CAPABILITIES)).toEqual({
      code: "unsupported_audio_format",
      message,
      param: "session.input_audio_format",
    });
  });
});

describe("session output audio formats", () => {
  it("accepts pcm16 at the runner's output rate", () => {
    const result = applySessionPatch(config, { outputAudio: { format: "pcm16", rate: 24000 } }, ECHO_CAPABILITIES);
    expect(result).toEqual(config);
  });

  it.each([
    { format: "g711_ulaw", rate: 8000 },
    { format: "g711_alaw", rate: 8000 },
    { format: "pcm_f32le", rate: 24000 },
    { format: "pcm16", rate: 16000 },
    { format: "pcm16", rate: 48000 },
  ] as const)("serves %j: the engine converts the model's audio per session", (outputAudio) => {
    expect(applySessionPatch(config, { outputAudio }, ECHO_CAPABILITIES)).toEqual({ ...config, outputAudio });
  });

  it.each([
    [{ format: "g711_ulaw", rate: 16000 }, "output audio format g711_ulaw is 8000 Hz only; got 16000 Hz"],
    [
      { format: "pcm16", rate: 44100 },
      "output sample rate 44100 Hz is not supported for pcm16; use one of 8000, 16000, 24000, 48000",
    ],
  ] as const)(
    "refuses %j with unsupported_audio_format, and the session keeps its configuration",
    (outputAudio, message) => {
      expect(applySessionPatch(config, { outputAudio }, ECHO_CAPABILITIES)).toEqual({
        code: "unsupported_audio_format",
        message,
        param: "session.output_audio_format",
      });
      const g = given(opened());
      const w = g.when(command(update({ inputAudio: { format: "g711_ulaw", rate: 8000 }, outputAudio }, "evt_out")));
      w.thenRejects("unsupported_audio_format", "evt_out");
      expect(w.after.config).toEqual(g.state.config);
    },
  );

  it("records a G.711 input in SessionConfigured", () => {
    const g = given(opened());
    const w = g.when(command(update({ inputAudio: { format: "g711_alaw", rate: 8000 } })));
    w.then([
      {
        type: "SessionConfigured",
        data: { config: { ...g.state.config, inputAudio: { format: "g711_alaw", rate: 8000 } } },
      },
    ]);
  });
});

describe("session fields of the reference in force (overlap thresholds, speed, tracing)", () => {
  const patched = (patch: Parameters<typeof applySessionPatch>[1], capabilities = ECHO_CAPABILITIES) =>
    applySessionPatch(config, patch, capabilities);

  it("starts with the reference's thresholds: a short remark up to 700 ms, barge-in beyond 1200 ms", () => {
    expect(config).toMatchObject({ overlapShortAckMs: 700, overlapBargeInMs: 1200, overlapSilenceRms: 0.003 });
  });

  it("takes the overlap thresholds a session sets, and refuses a barge-in threshold below the short remark", () => {
    expect(patched({ overlapShortAckMs: 300, overlapBargeInMs: 2000, overlapSilenceRms: 0.01 })).toMatchObject({
      overlapShortAckMs: 300,
      overlapBargeInMs: 2000,
      overlapSilenceRms: 0.01,
    });
    expect(patched({ overlapBargeInMs: 500 })).toEqual({
      code: "bad_event",
      message: "overlap_barge_in_ms (500) must be at least overlap_short_ack_ms (700)",
      param: "session.overlap_barge_in_ms",
    });
  });

  it("refuses a speed other than 1 where the model speaks at one rate, and takes it where it can change", () => {
    expect(patched({ speed: 1 })).toMatchObject({ speed: 1 });
    expect(patched({ speed: 1.2 })).toMatchObject({ code: "speed_unsupported", param: "session.audio.output.speed" });
    expect(patched({ speed: 1.2 }, { ...ECHO_CAPABILITIES, supportsSpeed: true })).toMatchObject({ speed: 1.2 });
    expect(patched({ speed: 3 }, { ...ECHO_CAPABILITIES, supportsSpeed: true })).toMatchObject({
      code: "bad_event",
      message: "speed must be within 0.25..1.5; got 3",
    });
  });

  it("keeps tracing as the client's labels, and null removes them", () => {
    const labelled = patched({ tracing: { workflowName: "support", groupId: "g1", metadata: { team: "voice" } } });
    expect(labelled).toMatchObject({
      tracing: { workflowName: "support", groupId: "g1", metadata: { team: "voice" } },
    });
    if ("code" in labelled) throw new Error(labelled.message);
    expect(applySessionPatch(labelled, { tracing: null }, ECHO_CAPABILITIES)).toMatchObject({ tracing: null });
  });

  it("takes turn_detection without a type as an update of the detector in force (server VAD when none is)", () => {
    const fresh = patched({ turnDetection: { threshold: 0.8 } });
    expect(fresh).toMatchObject({ turnDetection: { type: "server_vad", threshold: 0.8, silenceDurationMs: 500 } });
    if ("code" in fresh) throw new Error(fresh.message);
    const tuned = applySessionPatch(fresh, { turnDetection: { silenceDurationMs: 300 } }, ECHO_CAPABILITIES);
    expect(tuned).toMatchObject({ turnDetection: { type: "server_vad", threshold: 0.8, silenceDurationMs: 300 } });
  });
});
