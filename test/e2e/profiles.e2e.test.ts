import { readFile, rm } from "node:fs/promises";
import { afterEach, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import type { RefAudioInput, RunnerUnit } from "../../src/domain/index.ts";
import { type ModelRunner, streamOf } from "../../src/engine/index.ts";
import { loadConfig } from "../../src/infra/config.ts";
import { createEchoRunner } from "../../src/infra/runners/echo.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * The three model profiles of deploy/ on the CPU echo runner, over real sockets (issue: "Model profiles and
 * capability gates"): each session shows its profile's capabilities and is refused what the profile cannot do,
 * each refusal with its code; MiniCPM-o's ref_audio reaches the runner and is in the log once.
 */
const deployed = async (name: string): Promise<Record<string, unknown>> => {
  const config = await loadConfig(new URL(`../../deploy/${name}.yaml`, import.meta.url).pathname);
  return { runner: config.runner, session_mode: config.session_mode };
};

/** The echo runner, recording what each session hands it: configurations (with the ref_audio clip) and units. */
const recording = () => {
  const configured: { instructions: string; refAudio: RefAudioInput | null }[] = [];
  const units: RunnerUnit[] = [];
  const inner = createEchoRunner({ speedFactor: Number.POSITIVE_INFINITY });
  const runner: ModelRunner = {
    name: inner.name,
    capabilities: inner.capabilities,
    open(session, emit) {
      const opened = inner.open(session, emit);
      return {
        submit: (unit) => {
          units.push(unit);
          opened.submit(unit);
        },
        abort: (epoch) => opened.abort(epoch),
        configure: (config, refAudio) => {
          configured.push({ instructions: config.instructions, refAudio });
          opened.configure(config, refAudio);
        },
        close: () => opened.close(),
      };
    },
    close: () => inner.close(),
  };
  return { runner, configured, units };
};

const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 74, 70, 73, 70, 0, 1]).toString("base64");
const SILENCE = Buffer.alloc(3200).toString("base64");

describe("model profiles on the echo runner", () => {
  let server: Awaited<ReturnType<typeof startTestServer>> | null = null;
  afterEach(async () => {
    await server?.stop();
    server = null;
  });

  const errorOf = async (client: RealtimeClient, event: Record<string, unknown> & { type: string }) => {
    const since = client.received.length;
    const eventId = client.send(event);
    const error = await client.waitFor("error", { since });
    expect((error.error as { event_id: string }).event_id).toBe(eventId);
    return (error.error as { code: string }).code;
  };

  it("personaplex: shows its capabilities and refuses barge-in, truncation, resume and tools, each with its code", async () => {
    const { runner, units } = recording();
    server = await startTestServer(await deployed("personaplex"), { runner });
    const models = (await (await fetch(`http://127.0.0.1:${server.port}/v1/models`)).json()) as {
      data: { id: string; capabilities: Record<string, unknown> }[];
    };
    expect(models.data[0]?.id).toBe("nvidia/personaplex-7b-v1");
    expect(models.data[0]?.capabilities).toMatchObject({
      implementation_level: "model_native_duplex",
      profile: "personaplex",
      chunk_period_ms: 80,
      supports_barge_in: false,
      supports_session_resume: false,
      supports_audio_truncate: false,
      supports_video_input: false,
      supports_tool_calls: false,
    });
    const client = await RealtimeClient.connect(server.url);
    client.send({ type: "session.update", session: { input_sample_rate_hz: 16000 } });
    const created = await client.waitFor("session.created", { since: 0 });
    expect(created.resume_token).toBeNull();
    expect(created.session).toMatchObject({
      model: "nvidia/personaplex-7b-v1",
      capabilities: { profile: "personaplex", supports_barge_in: false, chunk_period_ms: 80 },
    });
    await client.waitFor("session.updated", { since: 0 });
    expect(await errorOf(client, { type: "barge_in" })).toBe("barge_in_unsupported");
    expect(await errorOf(client, { type: "turn.signal", event: "barge_in" })).toBe("barge_in_unsupported");
    expect(await errorOf(client, { type: "session.update", session: { overlap_policy: "barge_in_on_speech" } })).toBe(
      "barge_in_unsupported",
    );
    expect(
      await errorOf(client, {
        type: "session.update",
        session: { turn_detection: { type: "server_vad", interrupt_response: false } },
      }),
    ).toBe("unsupported_turn_detection");
    expect(
      await errorOf(client, {
        type: "session.update",
        session: { tools: [{ type: "function", name: "get_weather", parameters: { type: "object" } }] },
      }),
    ).toBe("tool_calls_unsupported");
    // A text response, then its item cannot be truncated.
    client.send({ type: "session.update", session: { output_modalities: ["text"] } });
    client.send({
      type: "conversation.item.create",
      item: { type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] },
    });
    const mark = client.received.length;
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    const done = await client.waitFor("response.done", { since: mark });
    const itemId = String(((done.response as { output: { id: string }[] }).output[0] ?? { id: "" }).id);
    expect(
      await errorOf(client, { type: "conversation.item.truncate", item_id: itemId, content_index: 0, audio_end_ms: 0 }),
    ).toBe("audio_truncate_unsupported");
    // Camera frames are ignored: the append is taken, the frames reach neither the runner nor the log.
    const beat = client.received.length;
    client.send({ type: "input_audio_buffer.append", audio: SILENCE, video_frames: [JPEG] });
    client.send({ type: "input_audio_buffer.append", audio: SILENCE, video_frames: ["not an image!"] });
    client.send({ type: "session.heartbeat" });
    await client.waitFor("session.heartbeat_ack", { since: beat });
    expect(client.received.slice(beat).map((r) => r.event.type)).not.toContain("error");
    expect(units.filter((u) => u.kind === "append").map((u) => "videoFrames" in u)).toEqual([false, false]);
    // Resume is unsupported: a second socket is refused while the first holds the session.
    const id = String((created.session as { id: string }).id);
    const other = await RealtimeClient.connect(server.url);
    other.send({ type: "session.resume", session_id: id, resume_token: "x".repeat(43) });
    const refused = await other.waitFor("error", { since: 0 });
    expect(refused.code).toBe("unsupported_session_resume");
    await other.close();
    // None of the refusals closed the session.
    const alive = client.received.length;
    client.send({ type: "session.heartbeat" });
    await client.waitFor("session.heartbeat_ack", { since: alive });
    const log = await server.store.read(streamOf(id));
    expect(JSON.stringify(log.filter((e) => e.type === "CommandReceived").map((e) => e.data))).not.toContain(
      "videoFrames",
    );
    await client.close();
  });

  it("nemotron_voicechat: takes tools and resumes, refuses barge-in and truncation", async () => {
    server = await startTestServer(await deployed("nemotron_voicechat"));
    const client = await RealtimeClient.connect(server.url);
    client.send({
      type: "session.update",
      session: {
        tools: [{ type: "function", name: "get_weather", parameters: { type: "object" } }],
        tool_choice: "required",
      },
    });
    const created = await client.waitFor("session.created", { since: 0 });
    expect(typeof created.resume_token).toBe("string");
    const updated = await client.waitFor("session.updated", { since: 0 });
    expect(updated.session).toMatchObject({
      tools: [{ type: "function", name: "get_weather", description: "", parameters: { type: "object" } }],
      tool_choice: "required",
      capabilities: { profile: "nemotron_voicechat", supports_tool_calls: true, supports_barge_in: false },
    });
    expect(await errorOf(client, { type: "barge_in" })).toBe("barge_in_unsupported");
    await client.close();
  });

  it("minicpmo_4_5: needs ref_audio first, hands the clip to the runner, logs it once, consumes camera frames", async () => {
    const { runner, configured, units } = recording();
    server = await startTestServer(await deployed("minicpmo_4_5"), { runner });
    const wav = await readFile(sharedAudio("question_16k.wav"));
    const client = await RealtimeClient.connect(server.url);
    // Without a clip no session opens, and the socket stays open for the update that brings one.
    const first = client.send({ type: "session.update", session: { instructions: "Be brief." } });
    const refused = await client.waitFor("error", { since: 0 });
    expect(refused).toMatchObject({
      code: "ref_audio_required",
      error: { code: "ref_audio_required", event_id: first },
    });
    client.send({ type: "input_audio_buffer.append", audio: SILENCE });
    await client.waitFor("error", { since: 1 });
    // A first update with a clip that the session would refuse opens nothing either: it is refused with its code.
    client.send({
      type: "session.update",
      session: { ref_audio: `data:audio/wav;base64,${wav.toString("base64")}`, temperature: 3 },
    });
    const hot = await client.waitFor("error", { since: 2 });
    expect(hot.code).toBe("bad_event");
    expect(client.types()).toEqual(["error", "error", "error"]);
    client.send({
      type: "session.update",
      session: { instructions: "Be brief.", ref_audio: `data:audio/wav;base64,${wav.toString("base64")}` },
    });
    const created = await client.waitFor("session.created", { since: 0 });
    expect(created.session).toMatchObject({
      model: "openbmb/MiniCPM-o-4_5",
      capabilities: { implementation_level: "turn_based", native_duplex: "opt_in", ref_audio: "required" },
    });
    const updated = await client.waitFor("session.updated", { since: 0 });
    expect(updated.session).toMatchObject({
      instructions: "Be brief.",
      ref_audio: { mime_type: "audio/wav", bytes: wav.byteLength },
    });
    // Opting in to the model-native lane.
    const opting = client.received.length;
    client.send({ type: "session.update", session: { extra_body: { native_duplex: true } } });
    const native = await client.waitFor("session.updated", { since: opting });
    expect(native.session).toMatchObject({
      extra_body: { auto_response: true, native_duplex: true },
      capabilities: { implementation_level: "model_native_duplex" },
    });
    // Camera frames reach the runner with their append.
    const beat = client.received.length;
    client.send({ type: "input_audio_buffer.append", audio: SILENCE, video_frames: [JPEG] });
    client.send({ type: "session.heartbeat" });
    await client.waitFor("session.heartbeat_ack", { since: beat });
    expect(
      await errorOf(client, { type: "input_audio_buffer.append", audio: SILENCE, video_frames: ["not an image!"] }),
    ).toBe("invalid_video_frames");
    const append = units.find((u) => u.kind === "append");
    expect(append?.kind === "append" && append.videoFrames?.map((f) => Buffer.from(f).toString("base64"))).toEqual([
      JPEG,
    ]);
    // The clip reached the runner (every configure after it carries it) ...
    expect(configured.length).toBeGreaterThanOrEqual(2);
    for (const c of configured) expect(Buffer.from(c.refAudio?.audio ?? []).equals(wav)).toBe(true);
    // ... and its bytes are in the log once, in the update that set it.
    const id = String((created.session as { id: string }).id);
    const log = await server.store.read(streamOf(id));
    const holding = log.filter((e) => containsBytes(e.data, wav));
    expect(holding.map((e) => e.type)).toEqual(["CommandReceived"]);
    // Another voice is refused once the session has audio.
    const other = `data:audio/wav;base64,${Buffer.from(wav.subarray(0, 4000)).toString("base64")}`;
    expect(await errorOf(client, { type: "session.update", session: { ref_audio: other } })).toBe(
      "ref_audio_update_unsupported",
    );
    await client.close();
  });

  it("minicpmo_4_5: after a server restart the resumed session's runner gets the clip back from the log", async () => {
    const before = recording();
    const config = await deployed("minicpmo_4_5");
    server = await startTestServer(config, { runner: before.runner });
    const wav = await readFile(sharedAudio("jfk_16k.wav"));
    const client = await RealtimeClient.connect(server.url);
    client.send({ type: "session.update", session: { ref_audio: `data:audio/wav;base64,${wav.toString("base64")}` } });
    const created = await client.waitFor("session.created", { since: 0 });
    await client.waitFor("session.updated", { since: 0 });
    const id = String((created.session as { id: string }).id);
    // The restart: this server goes (a disconnect for its client), another starts on the same store.
    const path = `${server.dataDir}/duplex.sqlite`;
    await server.close();
    await client.closed;
    const after = recording();
    const restarted = await startTestServer(
      { ...config, event_store: { kind: "sqlite", path } },
      { runner: after.runner },
    );
    const dataDir = server.dataDir;
    server = {
      ...restarted,
      stop: async () => {
        await restarted.stop();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
    const again = await RealtimeClient.connect(server.url);
    again.send({
      type: "session.resume",
      session_id: id,
      resume_token: String(created.resume_token),
      last_received_server_event_seq: 1,
    });
    await again.waitFor("session.resumed", { since: 0 });
    const beat = again.received.length;
    again.send({ type: "input_audio_buffer.append", audio: SILENCE });
    again.send({ type: "session.heartbeat" });
    await again.waitFor("session.heartbeat_ack", { since: beat });
    expect(after.configured.length).toBeGreaterThanOrEqual(1);
    expect(Buffer.from(after.configured[0]?.refAudio?.audio ?? []).equals(wav)).toBe(true);
    await again.close();
  });
});

/** Whether `value` holds a `Uint8Array` equal to `bytes`, at any depth. */
const containsBytes = (value: unknown, bytes: Uint8Array): boolean =>
  value instanceof Uint8Array
    ? Buffer.from(value).equals(bytes)
    : typeof value === "object" && value !== null && Object.values(value).some((v) => containsBytes(v, bytes));
