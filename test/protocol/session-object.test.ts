import { describe, expect, it } from "vitest";
import { type AudioFormat, defaultSessionConfig } from "../../src/domain/index.ts";
import { sessionObject } from "../../src/protocol/index.ts";
import { ECHO_CAPABILITIES } from "../domain/decider-spec.ts";

const CAPABILITIES = ECHO_CAPABILITIES;

const render = (inputAudio?: AudioFormat) => {
  const base = defaultSessionConfig("m", CAPABILITIES);
  const config = inputAudio === undefined ? base : { ...base, inputAudio };
  const session = sessionObject({ sessionId: "sess_1", config, capabilities: CAPABILITIES, epoch: 0, turnId: 0 });
  const audio = session.audio as { input: Record<string, unknown>; output: Record<string, unknown> };
  return {
    beta: {
      input: session.input_audio_format,
      output: session.output_audio_format,
      rate: session.input_sample_rate_hz,
    },
    ga: { input: audio.input.format, output: audio.output.format, rate: audio.input.sample_rate_hz },
  };
};

describe("session object audio formats", () => {
  it("renders the default pcm16 formats (24 kHz in, OpenAI's default): beta strings and GA objects with their rates", () => {
    expect(render()).toEqual({
      beta: { input: "pcm16", output: "pcm16", rate: 24000 },
      ga: { input: { type: "audio/pcm", rate: 24000 }, output: { type: "audio/pcm", rate: 24000 }, rate: 24000 },
    });
  });

  it.each([
    [{ format: "g711_ulaw", rate: 8000 }, "g711_ulaw", { type: "audio/pcmu" }],
    [{ format: "g711_alaw", rate: 8000 }, "g711_alaw", { type: "audio/pcma" }],
    [{ format: "pcm_f32le", rate: 24000 }, "pcm_f32le", { type: "audio/pcm_f32le", rate: 24000 }],
    [{ format: "pcm16", rate: 48000 }, "pcm16", { type: "audio/pcm", rate: 48000 }],
  ] as const)("renders input %j as %j and %j", (inputAudio, beta, ga) => {
    const rendered = render(inputAudio);
    expect(rendered.beta).toEqual({ input: beta, output: "pcm16", rate: inputAudio.rate });
    expect(rendered.ga).toEqual({ input: ga, output: { type: "audio/pcm", rate: 24000 }, rate: inputAudio.rate });
  });
});
