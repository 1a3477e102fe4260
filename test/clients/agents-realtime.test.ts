import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import {
  OpenAIRealtimeWebSocket,
  RealtimeAgent,
  type RealtimeItem,
  RealtimeSession,
  type RealtimeSessionConfig,
  type TransportEvent,
} from "@openai/agents-realtime";
import { afterEach, describe, expect, it } from "vitest";
import { readWavFile, resamplePcm16 } from "../../src/infra/audio/index.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * A real third-party client against our server: `@openai/agents-realtime` (RealtimeSession + OpenAIRealtimeWebSocket)
 * on a real server on 127.0.0.1 port 0 with the echo runner, fed with real speech from ../shared/audio. Assertions are
 * on what the SDK itself surfaces (its session events, its history, its transport events), and every server event
 * whose type the SDK knows is checked against the SDK's own zod schema (a failing event would be silently demoted to
 * a "generic" event by `parseRealtimeEvent` and its handler skipped).
 *
 * Tests marked `it.fails` fail only because of a server deviation named in their comment; remove the `.fails` when the
 * server is fixed.
 */

// --- the SDK's own zod schema of GA server events (dist/openaiRealtimeEvents.mjs, not exported by the package) ---

interface SafeParser {
  safeParse(value: unknown): { success: boolean; error?: { issues: { path: PropertyKey[]; message: string }[] } };
}
const sdkDist = dirname(createRequire(import.meta.url).resolve("@openai/agents-realtime"));
const sdkEvents = (await import(pathToFileURL(join(sdkDist, "openaiRealtimeEvents.mjs")).href)) as {
  realtimeServerEventSchema: SafeParser & { options: { shape: { type: { value: string } } }[] };
};
/** Server event types the SDK parses with a schema (the others are "generic" and only reach `transport_event`). */
const SDK_TYPED_EVENTS = new Set(sdkEvents.realtimeServerEventSchema.options.map((o) => o.shape.type.value));

/** Why the SDK's schema refuses a server event, or null when it accepts it (or does not know its type). */
const sdkSchemaIssue = (event: TransportEvent): string | null => {
  if (!SDK_TYPED_EVENTS.has(event.type)) return null;
  const parsed = sdkEvents.realtimeServerEventSchema.safeParse(event);
  if (parsed.success) return null;
  const issues = (parsed.error?.issues ?? []).map((i) => `${i.path.map(String).join(".")}: ${i.message}`);
  return `${event.type}: ${issues.join("; ")}`;
};

// --- audio ---

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A mono 16 kHz WAV of ../shared/audio, resampled to `rateHz`. */
const speech = async (name: string, rateHz: number): Promise<Int16Array> => {
  const wav = await readWavFile(sharedAudio(name));
  expect(wav.channels).toBe(1);
  return resamplePcm16(wav.samples, wav.sampleRate, rateHz);
};

/** Duration of a WAV of ../shared/audio in seconds. */
const wavSeconds = async (name: string): Promise<number> => {
  const wav = await readWavFile(sharedAudio(name));
  // readWav's samples are mono (a stereo file is mixed down): one per frame.
  return wav.samples.length / wav.sampleRate;
};

/** The seconds the echo runner says it heard ("I heard 2.8 seconds of speech, ..."). */
const heardSeconds = (transcript: string): number =>
  Number(/^I heard (\d+(?:\.\d+)?) seconds of speech/.exec(transcript)?.[1] ?? Number.NaN);

const ECHO_SENTENCE = /^I heard \d+\.\d seconds of speech, and this is how it sounded\.$/;

// --- one SDK session, with everything it surfaces recorded in order ---

/** A server event as the SDK surfaces it on `transport_event` (a clone of the wire JSON), typed like the SDK does. */
// biome-ignore lint/suspicious/noExplicitAny: the SDK's own TransportEvent is `{type: string; [key: string]: any}`
type WireEvent = { type: string; [key: string]: any };

type Entry =
  | { readonly kind: "wire"; readonly event: WireEvent }
  | { readonly kind: "audio"; readonly responseId: string; readonly bytes: number }
  | { readonly kind: "agent_start" | "audio_start" | "audio_stopped" | "audio_interrupted" }
  | { readonly kind: "agent_end"; readonly output: string }
  | { readonly kind: "history_updated"; readonly history: RealtimeItem[] }
  | { readonly kind: "error"; readonly error: unknown }
  | { readonly kind: "connection_change"; readonly status: string };

interface Harness {
  readonly session: RealtimeSession;
  readonly transport: OpenAIRealtimeWebSocket;
  /** Everything the SDK surfaced, in order. */
  readonly timeline: Entry[];
  /** Server events whose type the SDK knows but whose shape its zod schema refuses. */
  readonly schemaIssues: string[];
  wire(type?: string): WireEvent[];
  of<K extends Entry["kind"]>(kind: K): Extract<Entry, { kind: K }>[];
  /** The input rate (Hz) of the session as the server last reported it (session.created / session.updated). */
  inputRate(): number;
  /** Sends PCM16 at `rateHz` through `session.sendAudio` in 100 ms chunks, one every `paceMs`. */
  stream(pcm: Int16Array, rateHz: number, paceMs: number): Promise<void>;
}

const connectSdk = async (url: string, config?: Partial<RealtimeSessionConfig>): Promise<Harness> => {
  const transport = new OpenAIRealtimeWebSocket({ url, apiKey: "sk-not-checked" });
  const agent = new RealtimeAgent({ name: "echo-listener", instructions: "Repeat what you hear." });
  const session = new RealtimeSession(agent, { transport, ...(config === undefined ? {} : { config }) });
  const timeline: Entry[] = [];
  const schemaIssues: string[] = [];
  session.on("transport_event", (event) => {
    timeline.push({ kind: "wire", event: event as WireEvent });
    const issue = sdkSchemaIssue(event);
    if (issue !== null) schemaIssues.push(issue);
  });
  session.on("audio", (event) =>
    timeline.push({ kind: "audio", responseId: event.responseId, bytes: event.data.byteLength }),
  );
  session.on("agent_start", () => timeline.push({ kind: "agent_start" }));
  session.on("agent_end", (_context, _agent, output) => timeline.push({ kind: "agent_end", output }));
  session.on("audio_start", () => timeline.push({ kind: "audio_start" }));
  session.on("audio_stopped", () => timeline.push({ kind: "audio_stopped" }));
  session.on("audio_interrupted", () => timeline.push({ kind: "audio_interrupted" }));
  session.on("history_updated", (history) => timeline.push({ kind: "history_updated", history }));
  session.on("error", (error) => timeline.push({ kind: "error", error }));
  transport.on("connection_change", (status) => timeline.push({ kind: "connection_change", status }));

  await session.connect({ apiKey: "sk-not-checked" });
  const harness: Harness = {
    session,
    transport,
    timeline,
    schemaIssues,
    wire: (type) =>
      timeline.flatMap((e) => (e.kind === "wire" && (type === undefined || e.event.type === type) ? [e.event] : [])),
    of: <K extends Entry["kind"]>(kind: K) => timeline.filter((e): e is Extract<Entry, { kind: K }> => e.kind === kind),
    inputRate() {
      const last = harness.wire().findLast((e) => e.type === "session.created" || e.type === "session.updated");
      const rate = last?.session?.audio?.input?.format?.rate;
      expect(Number.isInteger(rate)).toBe(true);
      return rate;
    },
    async stream(pcm, rateHz, paceMs) {
      const chunk = rateHz / 10;
      for (let i = 0; i < pcm.length; i += chunk) {
        session.sendAudio(pcm.slice(i, i + chunk).buffer);
        await sleep(paceMs);
      }
    },
  };
  return harness;
};

/** Polls until `probe` returns a value (not undefined/false), or fails after `timeoutMs`. */
const until = async <T>(what: string, probe: () => T | undefined | false, timeoutMs = 20_000): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
};

/** The SDK's `error` payloads reduced to the server's error code (the SDK wraps the parsed `error` event). */
const errorCodes = (h: Harness): string[] =>
  h.of("error").map((e) => {
    const wrapped = e.error as { error?: { type?: string; error?: { code?: string } } };
    return wrapped.error?.type === "error" ? String(wrapped.error.error?.code) : `non-server error: ${String(e.error)}`;
  });

/** The user and assistant messages of the SDK's history. */
type Message = Extract<RealtimeItem, { type: "message"; role: "user" | "assistant" }>;
const messages = (history: RealtimeItem[]): Message[] =>
  history.filter((item): item is Message => item.type === "message" && item.role !== "system");
const transcriptOf = (item: Message | undefined): string | null | undefined => {
  const part = item?.content[0] as { transcript?: string | null } | undefined;
  return part?.transcript;
};

/** One second of silence at `rateHz`, so server VAD hears the end of the utterance. */
const silence = (rateHz: number, seconds = 1) => new Int16Array(Math.round(rateHz * seconds));

describe("@openai/agents-realtime (RealtimeSession over OpenAIRealtimeWebSocket) against our server", () => {
  let server: Awaited<ReturnType<typeof startTestServer>> | undefined;
  let sdk: Harness | undefined;

  afterEach(async () => {
    try {
      sdk?.session.close();
    } finally {
      sdk = undefined;
      await server?.stop();
      server = undefined;
    }
  });

  const SERVER_VAD: Partial<RealtimeSessionConfig> = { audio: { input: { turnDetection: { type: "server_vad" } } } };

  it("server_vad: real speech in; the echo's audio, transcript and history come out through the SDK; close detaches", async () => {
    server = await startTestServer();
    sdk = await connectSdk(server.url, SERVER_VAD);
    const h = sdk;
    await until("session.updated with server_vad", () =>
      h.wire("session.updated").some((e) => e.session?.audio?.input?.turn_detection?.type === "server_vad"),
    );
    const rate = h.inputRate();
    expect(rate).toBe(24000); // what the SDK asked for (DEFAULT_OPENAI_REALTIME_SESSION_CONFIG), and we accepted

    await h.stream(await speech("question_16k.wav", rate), rate, 25);
    await h.stream(silence(rate), rate, 25);
    const [end] = await until("agent_end", () => (h.of("agent_end").length > 0 ? h.of("agent_end") : undefined));

    // The SDK's turn surface: one agent_start, one agent_end with the echo's sentence.
    expect(h.of("agent_start")).toHaveLength(1);
    expect(end?.output).toMatch(ECHO_SENTENCE);
    const heard = heardSeconds(end?.output ?? "");
    const spoken = await wavSeconds("question_16k.wav");
    expect(heard).toBeGreaterThan(spoken - 0.3);
    expect(heard).toBeLessThan(spoken + 0.8);

    // Audio: every delta of the response reached the SDK's `audio` event, and it is the utterance at 24 kHz.
    const [created] = h.wire("response.created");
    const responseId = String(created?.response?.id);
    const audio = h.of("audio");
    expect(audio.length).toBeGreaterThan(0);
    expect(audio.every((a) => a.responseId === responseId)).toBe(true);
    const wireBytes = h
      .wire("response.output_audio.delta")
      .reduce((n, e) => n + Buffer.from(String(e.delta), "base64").byteLength, 0);
    const sdkBytes = audio.reduce((n, a) => n + a.bytes, 0);
    expect(sdkBytes).toBe(wireBytes);
    expect(Math.abs(sdkBytes / 2 / 24000 - heard)).toBeLessThan(0.1);
    expect(h.of("audio_start")).toHaveLength(1);
    expect(h.of("audio_stopped")).toHaveLength(1);
    const kinds = h.timeline.map((e) => e.kind);
    expect(kinds.indexOf("agent_start")).toBeLessThan(kinds.indexOf("audio_start"));
    expect(kinds.lastIndexOf("audio")).toBeLessThan(kinds.indexOf("audio_stopped"));
    expect(kinds.indexOf("audio_stopped")).toBeLessThan(kinds.indexOf("agent_end"));
    // Transcript deltas (the SDK's audio_transcript_delta source) add up to the final transcript.
    const deltas = h.wire("response.output_audio_transcript.delta").map((e) => String(e.delta));
    expect(deltas.join("")).toBe(end?.output);

    // History as the SDK built it: the user's audio turn, then the assistant's message with its transcript.
    const history = messages(h.session.history);
    expect(history.map((m) => [m.role, m.status, m.content.map((c) => c.type)])).toEqual([
      ["user", "completed", ["input_audio"]],
      ["assistant", "completed", ["output_audio"]],
    ]);
    expect(transcriptOf(history[1])).toBe(end?.output);
    expect(history[1]?.itemId).toBe(`item_${responseId}`);
    expect(h.of("history_updated").length).toBeGreaterThan(0);

    // Nothing went wrong on the SDK's side.
    expect(errorCodes(h)).toEqual([]);
    expect(h.schemaIssues).toEqual([]);

    // Close: the transport disconnects cleanly; our server keeps the session (detached, resumable).
    const sessionId = String(h.wire("session.created")[0]?.session?.id);
    h.session.close();
    await until("transport disconnected", () => h.transport.status === "disconnected");
    expect(h.of("connection_change").map((c) => c.status)).toEqual(["connecting", "connected", "disconnected"]);
    expect(errorCodes(h)).toEqual([]);
    await sleep(200); // let the server see the socket close
    const host = server.engine.get(sessionId);
    expect(host?.isClosed).toBe(false);
  });

  // DEVIATION D1: `conversation.item.done` of an assistant item always carries `previous_item_id: null`
  // (src/protocol/server-events.ts, ResponseEnded), while its `conversation.item.added` named the user item. The SDK
  // copies previous_item_id into its history item (openaiRealtimeBase.mjs 221-262 -> utils.mjs updateRealtimeHistory 188-257),
  // so the assistant item ends up claiming it has no predecessor; an item first seen in `.done` goes to the front.
  it("server_vad: the SDK's history keeps the assistant item's predecessor through conversation.item.done", async () => {
    server = await startTestServer();
    sdk = await connectSdk(server.url, SERVER_VAD);
    const h = sdk;
    await until("session.updated", () => h.wire("session.updated").length > 0);
    const rate = h.inputRate();
    await h.stream(await speech("question_16k.wav", rate), rate, 25);
    await h.stream(silence(rate), rate, 25);
    await until("agent_end", () => h.of("agent_end").length > 0);

    const [user, assistant] = messages(h.session.history);
    expect(assistant?.role).toBe("assistant");
    const added = h.wire("conversation.item.added").find((e) => e.item?.id === assistant?.itemId);
    const done = h.wire("conversation.item.done").find((e) => e.item?.id === assistant?.itemId);
    expect(added?.previous_item_id).toBe(user?.itemId);
    expect(done?.previous_item_id).toBe(added?.previous_item_id);
    expect(assistant?.previousItemId).toBe(user?.itemId);
  });

  it("turn_detection null (model-native lane): the echo answers when VAD hears the end of the utterance, with no error", async () => {
    server = await startTestServer();
    sdk = await connectSdk(server.url, { audio: { input: { turnDetection: null } } });
    const h = sdk;
    await until("session.updated", () => h.wire("session.updated").length > 0);
    const rate = h.inputRate();
    expect(rate).toBe(24000);
    await h.stream(await speech("question_16k.wav", rate), rate, 25);
    await h.stream(silence(rate), rate, 25);
    const [end] = await until("agent_end", () => (h.of("agent_end").length > 0 ? h.of("agent_end") : undefined));

    expect(end?.output).toMatch(ECHO_SENTENCE);
    expect(h.of("audio").reduce((n, a) => n + a.bytes, 0)).toBeGreaterThan(0);
    // The model-native lane makes no user item (no commit); the assistant message is in the SDK's history.
    const history = messages(h.session.history);
    expect(history.map((m) => m.role)).toEqual(["assistant"]);
    expect(transcriptOf(history[0])).toBe(end?.output);
    expect(errorCodes(h)).toEqual([]);
    expect(h.schemaIssues).toEqual([]);
  });

  it("default session config (semantic_vad): the SDK surfaces unsupported_turn_detection once, and the conversation still works", async () => {
    server = await startTestServer();
    sdk = await connectSdk(server.url); // the SDK's defaults: semantic_vad, 24 kHz audio/pcm in and out
    const h = sdk;
    await until("the SDK's error event", () => h.of("error").length > 0);
    expect(errorCodes(h)).toEqual(["unsupported_turn_detection"]);
    const [errorEvent] = h.wire("error");
    expect(errorEvent?.error).toMatchObject({ type: "invalid_request_error", code: "unsupported_turn_detection" });
    // The session is open and keeps its previous configuration, which the session.updated answering the SDK's
    // follow-up `session.update {tracing: "auto"}` reports; the client streams at the rate the session declares.
    await until("session.updated after the error", () => h.wire("session.updated").length > 0);
    const rate = h.inputRate();

    await h.stream(await speech("question_16k.wav", rate), rate, 25);
    await h.stream(silence(rate), rate, 25);
    const [end] = await until("agent_end", () => (h.of("agent_end").length > 0 ? h.of("agent_end") : undefined));

    expect(end?.output).toMatch(ECHO_SENTENCE);
    const spoken = await wavSeconds("question_16k.wav");
    expect(heardSeconds(end?.output ?? "")).toBeGreaterThan(spoken - 0.3);
    expect(heardSeconds(end?.output ?? "")).toBeLessThan(spoken + 0.8);
    expect(h.of("audio").reduce((n, a) => n + a.bytes, 0)).toBeGreaterThan(0);
    const assistant = messages(h.session.history).find((m) => m.role === "assistant");
    expect(assistant?.status).toBe("completed");
    expect(transcriptOf(assistant)).toBe(end?.output);
    expect(errorCodes(h)).toEqual(["unsupported_turn_detection"]); // still only the one
    expect(h.schemaIssues).toEqual([]);
  });

  // DEVIATION D4 (interop; the contract says a rejected command changes nothing): the SDK's first session.update
  // carries semantic_vad *and* `audio.input.format {audio/pcm, rate: 24000}`; we refuse the whole update, so the
  // session stays at 16 kHz while the SDK (which never reads the input rate back) streams 24 kHz. The echo then hears
  // 1.5x too long, slowed-down speech ("I heard 4.0 seconds" for 2.6 s of speech).
  it("default session config: audio streamed at the 24 kHz the SDK declared is heard at 24 kHz", async () => {
    server = await startTestServer();
    sdk = await connectSdk(server.url);
    const h = sdk;
    await until("session.updated after the error", () => h.wire("session.updated").length > 0);
    const declared = 24000; // DEFAULT_OPENAI_REALTIME_SESSION_CONFIG.audio.input.format.rate
    await h.stream(await speech("question_16k.wav", declared), declared, 25);
    await h.stream(silence(declared), declared, 25);
    const [end] = await until("agent_end", () => (h.of("agent_end").length > 0 ? h.of("agent_end") : undefined));
    const spoken = await wavSeconds("question_16k.wav");
    expect(heardSeconds(end?.output ?? "")).toBeLessThan(spoken + 0.8);
    expect(h.inputRate()).toBe(declared);
  });

  it("session.interrupt() mid-response: audio_interrupted, a cancelled response, the heard prefix in history, and the next turn answered", async () => {
    // speed_factor 1: the echo speaks in real time, so the response is still playing when we interrupt it.
    server = await startTestServer({ runner: { kind: "echo", speed_factor: 1 } });
    sdk = await connectSdk(server.url, SERVER_VAD);
    const h = sdk;
    await until("session.updated", () => h.wire("session.updated").length > 0);
    const rate = h.inputRate();
    const question = await speech("question_16k.wav", rate);
    await h.stream(question, rate, 25);
    await h.stream(silence(rate), rate, 25);

    await until("three audio chunks", () => h.of("audio").length >= 3);
    const responseId = h.of("audio")[0]?.responseId ?? "";
    h.session.interrupt();
    const interruptedAt = h.timeline.length;

    // The SDK's interruption surface fires at once; the server cancels the response it was asked to cancel.
    expect(h.of("audio_interrupted")).toHaveLength(1);
    const done = await until("response.done", () => h.wire("response.done")[0]);
    expect(done.response).toMatchObject({
      id: responseId,
      status: "cancelled",
      status_details: { type: "cancelled", reason: "client_cancelled" },
    });
    const [cancelledEnd] = await until("agent_end", () =>
      h.of("agent_end").length > 0 ? h.of("agent_end") : undefined,
    );
    expect(cancelledEnd?.output).toMatch(/^I heard/);
    expect(cancelledEnd?.output).not.toMatch(ECHO_SENTENCE);
    // No audio of the cancelled response after its response.done.
    const doneAt = h.timeline.findIndex((e) => e.kind === "wire" && e.event.type === "response.done");
    expect(doneAt).toBeGreaterThan(interruptedAt - 1);
    expect(h.timeline.slice(doneAt).filter((e) => e.kind === "audio" && e.responseId === responseId)).toEqual([]);

    // The SDK's truncate (audio_end_ms = elapsed playback) is confirmed, the SDK retrieves the item, and its history
    // holds only the heard prefix of the transcript.
    const truncated = await until("conversation.item.truncated", () => h.wire("conversation.item.truncated")[0]);
    expect(truncated.item_id).toBe(`item_${responseId}`);
    const retrieved = await until("conversation.item.retrieved", () => h.wire("conversation.item.retrieved")[0]);
    const heardPrefix = String(retrieved.item?.content?.[0]?.transcript ?? "");
    const assistant = await until("the truncated item in history", () => {
      const item = messages(h.session.history).find((m) => m.itemId === `item_${responseId}`);
      return transcriptOf(item) === heardPrefix ? item : undefined;
    });
    expect(assistant.status).toBe("incomplete");
    expect(cancelledEnd?.output.startsWith(heardPrefix)).toBe(true);
    expect(heardPrefix.length).toBeLessThan(cancelledEnd?.output.length ?? 0);

    // The session goes on: the same question again gets a complete answer.
    await h.stream(question, rate, 25);
    await h.stream(silence(rate), rate, 25);
    const [, secondEnd] = await until("a second agent_end", () =>
      h.of("agent_end").length > 1 ? h.of("agent_end") : undefined,
    );
    expect(secondEnd?.output).toMatch(ECHO_SENTENCE);
    expect(messages(h.session.history).map((m) => [m.role, m.status])).toEqual([
      ["user", "completed"],
      ["assistant", "incomplete"],
      ["user", "completed"],
      ["assistant", "completed"],
    ]);
    expect(h.of("audio_interrupted")).toHaveLength(1);
    expect(errorCodes(h)).toEqual([]);
    expect(h.schemaIssues).toEqual([]);
  });

  /** Question, then -- once the echo has spoken two chunks -- the interruption clip streamed in real time. */
  const bargeIn = async (h: Harness): Promise<{ responseId: string; rate: number }> => {
    await until("session.updated", () => h.wire("session.updated").length > 0);
    const rate = h.inputRate();
    await h.stream(await speech("question_16k.wav", rate), rate, 25);
    await h.stream(silence(rate), rate, 25);
    await until("two audio chunks", () => h.of("audio").length >= 2);
    const responseId = h.of("audio")[0]?.responseId ?? "";
    await h.stream(await speech("interrupt_16k.wav", rate), rate, 100);
    await h.stream(silence(rate), rate, 25);
    return { responseId, rate };
  };

  it("speech over the assistant: the SDK interrupts on speech_started, the server cancels the response and answers the new utterance", async () => {
    server = await startTestServer({ runner: { kind: "echo", speed_factor: 1 } });
    sdk = await connectSdk(server.url, SERVER_VAD);
    const h = sdk;
    const { responseId } = await bargeIn(h);

    // speech_started during the response -> the SDK's automatic interruption (interrupt_response: true).
    const kinds = h.timeline.map((e) => (e.kind === "wire" ? e.event.type : e.kind));
    const started = kinds.indexOf("input_audio_buffer.speech_started", kinds.indexOf("audio"));
    expect(started).toBeGreaterThan(-1);
    expect(kinds.indexOf("audio_interrupted")).toBe(started + 1);
    const truncate = h.wire("conversation.item.truncated")[0];
    expect(truncate?.item_id).toBe(`item_${responseId}`);

    // The server ends the response as cancelled by the user's turn, then answers the new utterance.
    const firstDone = await until("response.done", () => h.wire("response.done")[0]);
    expect(firstDone.response).toMatchObject({ id: responseId, status: "cancelled" });
    expect(["barge_in", "turn_detected"]).toContain(firstDone.response?.status_details?.reason);
    const ends = await until("a second agent_end", () =>
      h.of("agent_end").length > 1 ? h.of("agent_end") : undefined,
    );
    expect(ends[1]?.output).toMatch(ECHO_SENTENCE);
    const spoken = await wavSeconds("interrupt_16k.wav");
    expect(heardSeconds(ends[1]?.output ?? "")).toBeGreaterThan(spoken - 0.3);
    expect(messages(h.session.history).map((m) => [m.role, m.status])).toEqual([
      ["user", "completed"],
      ["assistant", "incomplete"],
      ["user", "completed"],
      ["assistant", "completed"],
    ]);
    expect(errorCodes(h)).toEqual([]);
    expect(h.schemaIssues).toEqual([]);
  });

  // DEVIATION D2: we advertise `turn_detection.interrupt_response: true` and send `input_audio_buffer.speech_started`
  // as soon as the user talks over the assistant, but cancel only after 800 ms of overlap (short_ack window, 700 ms)
  // -- and not at all if the response ends first. The SDK (openaiRealtimeWebsocket.mjs 345-349) treats speech_started
  // with interrupt_response=true as "the server has interrupted": it emits audio_interrupted (the app stops playback),
  // truncates the item, and sends no response.cancel. The server keeps streaming that response, so the SDK emits
  // `audio` (and a second `audio_start`) for a response it has already interrupted.
  it("speech over the assistant: no audio of the interrupted response reaches the SDK after its interruption", async () => {
    server = await startTestServer({ runner: { kind: "echo", speed_factor: 1 } });
    sdk = await connectSdk(server.url, SERVER_VAD);
    const h = sdk;
    const { responseId } = await bargeIn(h);
    await until("response.done", () => h.wire("response.done")[0]);
    const interruptedAt = h.timeline.findIndex((e) => e.kind === "audio_interrupted");
    expect(interruptedAt).toBeGreaterThan(-1);
    const late = h.timeline.slice(interruptedAt).filter((e) => e.kind === "audio" && e.responseId === responseId);
    expect(late).toEqual([]);
  });
});
