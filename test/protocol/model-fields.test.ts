import { describe, expect, it } from "vitest";
import {
  type Capabilities,
  type DomainEvent,
  defaultSessionConfig,
  MODEL_PROFILES,
  type SessionId,
  withProfile,
} from "../../src/domain/index.ts";
import {
  type DecodedFrame,
  decodeClientFrame,
  MAX_REF_AUDIO_BYTES,
  type RenderContext,
  renderServerEvents,
  sessionObject,
} from "../../src/protocol/index.ts";

const decode = (event: Record<string, unknown>): DecodedFrame => {
  const text = JSON.stringify(event);
  return decodeClientFrame(text, Buffer.byteLength(text), { inputRateHz: 16000 });
};

const CAPS: Capabilities = {
  implementationLevel: "model_native_duplex",
  chunkPeriodMs: 200,
  supportsBargeIn: true,
  supportsSessionResume: true,
  supportsAudioTruncate: true,
  supportsToolCalls: true,
  supportsVideo: false,
  inputSampleRateHz: 16000,
  outputSampleRateHz: 24000,
};
const SESSION = "sess_0123456789abcdef0123456789abcdef" as SessionId;
const ctx: RenderContext = { sessionId: SESSION, capabilities: CAPS, epoch: 0, turnId: 0 };

/** A JPEG's first bytes, and a PNG's. */
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 74, 70]).toString("base64");
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).toString("base64");
const AUDIO = Buffer.alloc(640).toString("base64");
const WAV_URL = `data:audio/wav;base64,${Buffer.from("RIFF....WAVEfmt ").toString("base64")}`;

describe("decoding what the client tells the model", () => {
  it("reads tools, tool_choice, token limit, temperature, instructions and voice from session.update", () => {
    const frame = decode({
      type: "session.update",
      session: {
        instructions: "Be brief.",
        voice: "alloy",
        temperature: 0.7,
        max_response_output_tokens: 300,
        tools: [{ type: "function", name: "get_weather", parameters: { type: "object" } }],
        tool_choice: "required",
      },
    });
    expect(frame).toEqual({
      type: "session.update",
      eventId: null,
      patch: {
        instructions: "Be brief.",
        voice: "alloy",
        temperature: 0.7,
        maxResponseOutputTokens: 300,
        tools: [{ type: "function", name: "get_weather", description: "", parameters: { type: "object" } }],
        toolChoice: "required",
      },
    });
  });

  it.each([
    [{ tools: [{ type: "function", name: "bad name!" }] }, "session.tools.0.name"],
    [{ tools: [{ type: "retrieval", name: "x" }] }, "session.tools.0.type"],
    [{ tool_choice: "sometimes" }, "session.tool_choice"],
    [{ max_response_output_tokens: 0 }, "session.max_response_output_tokens"],
    [{ max_response_output_tokens: 5000 }, "session.max_response_output_tokens"],
    [{ output_modalities: [] }, "session.output_modalities"],
    [{ output_modalities: ["audio", "audio"] }, "session.output_modalities"],
    [{ voice: "" }, "session.voice"],
  ])("refuses %j with bad_event naming %s", (session, param) => {
    expect(decode({ type: "session.update", event_id: "evt_1", session })).toMatchObject({
      type: "invalid",
      code: "bad_event",
      eventId: "evt_1",
      param,
    });
  });

  it("reads ref_audio from a data URL, in session or in extra_body", () => {
    for (const session of [{ ref_audio: WAV_URL }, { extra_body: { ref_audio: WAV_URL } }]) {
      const frame = decode({ type: "session.update", session });
      expect(frame).toMatchObject({ type: "session.update", patch: { refAudio: { mimeType: "audio/wav" } } });
      const clip = (frame as Extract<DecodedFrame, { type: "session.update" }>).patch.refAudio;
      expect(Buffer.from(clip?.audio ?? []).toString()).toBe("RIFF....WAVEfmt ");
    }
  });

  it.each([
    ["https://example.com/voice.wav", "unsupported_ref_audio_path"],
    ["/home/me/voice.wav", "unsupported_ref_audio_path"],
    ["file:///home/me/voice.wav", "unsupported_ref_audio_path"],
    ["data:image/png;base64,iVBORw0KGgo=", "bad_event"],
    ["data:audio/wav,RIFF", "bad_event"],
    ["data:audio/wav;base64,***", "bad_event"],
    ["data:audio/;base64,QUJD", "bad_event"],
    [`data:audio/wav;base64,${Buffer.from("not a wav file at all").toString("base64")}`, "bad_event"],
  ])("refuses ref_audio %s with %s", (url, code) => {
    expect(decode({ type: "session.update", session: { ref_audio: url } })).toMatchObject({
      type: "invalid",
      code,
      param: "session.ref_audio",
    });
  });

  it("takes voice null as clearing the voice, in either spelling", () => {
    expect(decode({ type: "session.update", session: { voice: null } })).toMatchObject({ patch: { voice: null } });
    expect(decode({ type: "session.update", session: { audio: { output: { voice: null } } } })).toMatchObject({
      patch: { voice: null },
    });
  });

  it("refuses a ref_audio clip over the size limit", () => {
    const big = `data:audio/wav;base64,${Buffer.alloc(MAX_REF_AUDIO_BYTES + 3).toString("base64")}`;
    expect(decode({ type: "session.update", session: { ref_audio: big } })).toMatchObject({
      type: "invalid",
      code: "bad_event",
      message: expect.stringContaining(`limit is ${MAX_REF_AUDIO_BYTES} bytes`),
    });
  });

  it("reads extra_body.native_duplex (and its deprecated alias) apart from auto_response", () => {
    expect(decode({ type: "session.update", session: { extra_body: { native_duplex: true } } })).toEqual({
      type: "session.update",
      eventId: null,
      patch: { nativeDuplex: true },
    });
    expect(
      decode({
        type: "session.update",
        session: { extra_body: { minicpmo45_native_duplex: true, auto_response: false } },
      }),
    ).toEqual({ type: "session.update", eventId: null, patch: { nativeDuplex: true, autoResponse: false } });
  });

  it("decodes JPEG and PNG video frames (bare or as data URLs), and refuses anything else", () => {
    const frame = decode({
      type: "input_audio_buffer.append",
      audio: AUDIO,
      video_frames: [JPEG, `data:image/png;base64,${PNG}`],
    });
    expect(frame).toMatchObject({ type: "input_audio_buffer.append" });
    const frames = (frame as Extract<DecodedFrame, { type: "input_audio_buffer.append" }>).videoFrames;
    expect(frames.map((f) => [...f.slice(0, 3)])).toEqual([
      [0xff, 0xd8, 0xff],
      [0x89, 0x50, 0x4e],
    ]);
    for (const bad of ["not base64!", Buffer.from("GIF89a").toString("base64")]) {
      // The audio still decodes: whether bad frames refuse the append is the session's call (its model's video).
      expect(
        decode({ type: "input_audio_buffer.append", event_id: "evt_v", audio: AUDIO, video_frames: [JPEG, bad] }),
      ).toMatchObject({
        type: "input_audio_buffer.append",
        videoFrames: [],
        videoFramesError: { param: "video_frames.1", message: expect.stringContaining("video_frames[1]") },
      });
    }
  });

  it("reads an out-of-band response.create: conversation none, input items and references, metadata, options", () => {
    const frame = decode({
      type: "response.create",
      response: {
        conversation: "none",
        metadata: { purpose: "classify" },
        input: [
          { type: "item_reference", id: "item_1" },
          { type: "message", role: "user", content: [{ type: "input_text", text: "Is this spam?" }] },
        ],
        output_modalities: ["text"],
        tool_choice: "none",
        temperature: 0.6,
        max_output_tokens: 64,
      },
    });
    expect(frame).toEqual({
      type: "response.create",
      eventId: null,
      metadata: { purpose: "classify" },
      instructions: null,
      modalities: ["text"],
      conversation: "none",
      input: [
        { type: "item_reference", id: "item_1" },
        { type: "message", role: "user", content: [{ type: "input_text", text: "Is this spam?" }] },
      ],
      tools: null,
      toolChoice: "none",
      temperature: 0.6,
      maxOutputTokens: 64,
    });
  });

  it("answers a function_call_output without call_id with invalid_function_call_output", () => {
    expect(
      decode({
        type: "conversation.item.create",
        event_id: "evt_f",
        item: { type: "function_call_output", output: "{}" },
      }),
    ).toMatchObject({ type: "invalid", code: "invalid_function_call_output", eventId: "evt_f" });
  });
});

describe("rendering what is in force", () => {
  it("echoes tools, tool_choice, token limit and the ref_audio clip in the session object", () => {
    const config = {
      ...defaultSessionConfig("m", CAPS),
      tools: [{ type: "function" as const, name: "get_weather", description: "", parameters: { type: "object" } }],
      toolChoice: "required" as const,
      maxResponseOutputTokens: 300,
      refAudio: { mimeType: "audio/wav", bytes: 44, sha256: "ab".repeat(32) },
    };
    expect(sessionObject({ ...ctx, config })).toMatchObject({
      tools: [{ type: "function", name: "get_weather", description: "", parameters: { type: "object" } }],
      tool_choice: "required",
      max_response_output_tokens: 300,
      max_output_tokens: 300,
      ref_audio: { mime_type: "audio/wav", bytes: 44, sha256: "ab".repeat(32) },
    });
  });

  it("shows a profile's capabilities spelled as on the wire, with the level the session runs at", () => {
    const minicpmo = withProfile(CAPS, MODEL_PROFILES.minicpmo_4_5);
    const fallback = sessionObject({ ...ctx, capabilities: minicpmo, config: defaultSessionConfig("m", minicpmo) });
    expect(fallback.capabilities).toMatchObject({
      implementation_level: "turn_based",
      native_duplex: "opt_in",
      profile: "minicpmo_4_5",
      chunk_period_ms: 1000,
      supports_barge_in: true,
      supports_video_input: true,
      ref_audio: "required",
      input_modes: ["append_audio_chunk", "video_frames"],
    });
    const native = sessionObject({
      ...ctx,
      capabilities: minicpmo,
      config: { ...defaultSessionConfig("m", minicpmo), nativeDuplex: true },
    });
    expect(native.capabilities).toMatchObject({ implementation_level: "model_native_duplex" });
    expect(native.extra_body).toEqual({ auto_response: true, native_duplex: true, response_timeout_ms: 30000 });
  });

  it("renders an out-of-band response without any conversation.item event", () => {
    const started: DomainEvent = {
      type: "ResponseStarted",
      data: {
        responseId: "resp_01234567_1" as never,
        itemId: "item_resp_01234567_1" as never,
        previousItemId: null,
        turnId: 1,
        metadata: { purpose: "classify" },
        source: "client",
        modalities: ["text"],
        instructions: null,
        conversation: "none",
      },
    };
    const bodies = renderServerEvents(ctx, started);
    expect(bodies.map((b) => b.type)).toEqual(["response.created", "response.output_item.added"]);
    expect(bodies[0]).toMatchObject({ response: { conversation_id: null, metadata: { purpose: "classify" } } });
    const ended = renderServerEvents(ctx, {
      type: "ResponseEnded",
      data: {
        responseId: "resp_01234567_1" as never,
        itemId: "item_resp_01234567_1" as never,
        previousItemId: null,
        status: "completed",
        reason: null,
        transcript: "",
        spoke: false,
        audioSent: false,
        metadata: { purpose: "classify" },
        playback: { generatedMs: 0, sentMs: 0, playedMs: 0, committedMs: 0 },
        error: null,
        text: "no",
        functionCalls: [],
        outOfBand: true,
      },
    });
    expect(ended.map((b) => b.type)).toEqual([
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.done",
      "rate_limits.updated",
    ]);
    expect(ended[3]).toMatchObject({ response: { conversation_id: null, metadata: { purpose: "classify" } } });
  });

  it("renders a text-only response that ended without text as text, in its done events", () => {
    const ended = renderServerEvents(ctx, {
      type: "ResponseEnded",
      data: {
        responseId: "resp_01234567_1" as never,
        itemId: "item_resp_01234567_1" as never,
        previousItemId: null,
        status: "cancelled",
        reason: "client_cancelled",
        transcript: "",
        spoke: false,
        audioSent: false,
        metadata: null,
        playback: { generatedMs: 0, sentMs: 0, playedMs: 0, committedMs: 0 },
        error: null,
        text: null,
        functionCalls: [],
        modalities: ["text"],
      },
    });
    const done = ended.find((b) => b.type === "response.done");
    expect(done).toMatchObject({ response: { modalities: ["text"], output_modalities: ["text"] } });
    expect(ended.find((b) => b.type === "conversation.item.done")).toMatchObject({
      item: { content: [{ type: "output_text", text: "" }] },
    });
  });

  it("renders a runner failure as a server_error with its code", () => {
    expect(
      renderServerEvents(ctx, {
        type: "RunnerFailed",
        data: { operation: "submit", code: "runtime_data_plane_stream_failed", message: "the runner threw" },
      }),
    ).toEqual([
      {
        type: "error",
        error: {
          type: "server_error",
          code: "runtime_data_plane_stream_failed",
          message: "the runner threw",
          event_id: null,
          param: null,
        },
      },
    ]);
  });
});
