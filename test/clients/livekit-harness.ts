import type { ReadableStream } from "node:stream/web";
import { initializeLogger, type llm, log, type metrics } from "@livekit/agents";
import { realtime } from "@livekit/agents-plugin-openai";
import { AudioFrame } from "@livekit/rtc-node";
import { vi } from "vitest";

/**
 * Harness for `@livekit/agents-plugin-openai` (realtime.RealtimeModel / RealtimeSession) against our server, used
 * without a LiveKit room: `model.session()` opens the WebSocket, `pushAudio(AudioFrame)` feeds the microphone, and
 * everything the plugin surfaces is recorded here: its events (`generation_created` with the message / audio / text
 * streams, `input_speech_started|stopped`, `metrics_collected`, `error`, and the raw `openai_server_event_received` /
 * `openai_client_event_queued`), and what it writes to the LiveKit logger.
 */

/** The plugin's input and output rate: it sends 24 kHz pcm16 and does not resample what it is given. */
export const RATE = 24000;

/** One line the plugin wrote to the LiveKit logger (at warn or error). */
export interface LogLine {
  readonly level: "warn" | "error";
  readonly msg: string;
  readonly obj: unknown;
}

/** The LiveKit logger's warn/error lines of this worker (the logger is a process-wide singleton). */
export const pluginLog: LogLine[] = [];

let loggerReady = false;

/**
 * `log()` throws until `initializeLogger` ran (it is what `lk` / `cli.runApp` would do). The plugin and the session
 * base class keep the root logger (`log()`), so its warn/error methods are replaced to record instead of printing.
 */
export const setUpLiveKitLogger = (): void => {
  if (loggerReady) return;
  loggerReady = true;
  initializeLogger({ pretty: false, level: "warn" });
  const logger = log();
  for (const level of ["warn", "error"] as const) {
    const record = (obj: unknown, msg?: string): void => {
      pluginLog.push({ level, obj, msg: typeof obj === "string" ? obj : (msg ?? "") });
    };
    (logger as unknown as Record<string, unknown>)[level] = record;
  }
};

export type Wire = { readonly type: string; readonly [key: string]: unknown };

/** One message of a generation, as its streams delivered it. */
export interface MessageRecord {
  readonly messageId: string;
  readonly frames: AudioFrame[];
  text: string;
  audioClosed: boolean;
  textClosed: boolean;
  modalities: string[] | null;
}

/** One `generation_created` event and what its streams yielded. */
export interface GenerationRecord {
  readonly responseId: string;
  readonly userInitiated: boolean;
  readonly event: llm.GenerationCreatedEvent;
  readonly messages: MessageRecord[];
  /** Set when the message stream and every message's audio and text streams have ended. */
  ended: boolean;
}

const drain = async <T>(stream: ReadableStream<T>, onChunk: (chunk: T) => void): Promise<void> => {
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    onChunk(value);
  }
};

/** Reads a generation's streams as they flow, like LiveKit's agent activity does. */
const consume = async (gen: GenerationRecord): Promise<void> => {
  const pending: Promise<void>[] = [];
  await drain(gen.event.messageStream, (msg) => {
    const record: MessageRecord = {
      messageId: msg.messageId,
      frames: [],
      text: "",
      audioClosed: false,
      textClosed: false,
      modalities: null,
    };
    gen.messages.push(record);
    pending.push(
      drain(msg.audioStream, (frame) => record.frames.push(frame)).then(() => {
        record.audioClosed = true;
      }),
      drain(msg.textStream, (t) => {
        record.text += typeof t === "string" ? t : t.text;
      }).then(() => {
        record.textClosed = true;
      }),
      (msg.modalities ?? Promise.resolve(null)).then((m) => {
        record.modalities = m;
      }),
    );
  });
  await Promise.all(pending);
  gen.ended = true;
};

/** Everything one session surfaces, recorded as it arrives. */
export const recordSession = (session: realtime.RealtimeSession) => {
  const server: Wire[] = [];
  const sent: Wire[] = [];
  const errors: llm.RealtimeModelError[] = [];
  const metricsCollected: metrics.RealtimeModelMetrics[] = [];
  const speech: ("started" | "stopped")[] = [];
  const generations: GenerationRecord[] = [];
  const failures: unknown[] = [];

  session.on("openai_server_event_received", (e: Wire) => server.push(structuredClone(e)));
  session.on("openai_client_event_queued", (e: Wire) => {
    if (e.type !== "input_audio_buffer.append") sent.push(structuredClone(e));
  });
  // Without an `error` listener EventEmitter would throw from inside the plugin's socket handler.
  session.on("error", (e: llm.RealtimeModelError) => errors.push(e));
  session.on("metrics_collected", (m: metrics.RealtimeModelMetrics) => metricsCollected.push(m));
  session.on("input_speech_started", () => speech.push("started"));
  session.on("input_speech_stopped", () => speech.push("stopped"));
  session.on("generation_created", (event: llm.GenerationCreatedEvent) => {
    const gen: GenerationRecord = {
      responseId: String(event.responseId),
      userInitiated: event.userInitiated,
      event,
      messages: [],
      ended: false,
    };
    generations.push(gen);
    consume(gen).catch((error: unknown) => failures.push(error));
  });

  const of = (type: string, pred: (e: Wire) => boolean = () => true): Wire[] =>
    server.filter((e) => e.type === type && pred(e));

  const waitFor = async <T>(what: () => T | undefined, label: string, timeout = 20_000): Promise<T> =>
    vi.waitFor(
      () => {
        const found = what();
        if (found === undefined || found === false) {
          throw new Error(`no ${label} yet; server sent ${server.map((e) => e.type).join(", ")}`);
        }
        return found;
      },
      { timeout, interval: 10 },
    );

  const waitForServer = (type: string, pred: (e: Wire) => boolean = () => true, timeout = 20_000): Promise<Wire> =>
    waitFor(() => of(type, pred)[0], type, timeout);

  const generation = (responseId: string): GenerationRecord | undefined =>
    generations.find((g) => g.responseId === responseId);

  /** Waits until the generation's streams all ended (the plugin closes them on `response.done`). */
  const ended = (gen: GenerationRecord, timeout = 20_000): Promise<GenerationRecord> =>
    waitFor(() => (gen.ended ? gen : undefined), `end of ${gen.responseId}`, timeout);

  return {
    server,
    sent,
    errors,
    metricsCollected,
    speech,
    generations,
    failures,
    of,
    waitFor,
    waitForServer,
    generation,
    ended,
  };
};

export type SessionRecorder = ReturnType<typeof recordSession>;

/** Feeds pcm16 mono at `RATE` to `pushAudio` in 10 ms frames (what a LiveKit audio track delivers). */
export const pushPcm = (session: realtime.RealtimeSession, pcm: Int16Array): void => {
  const step = RATE / 100;
  for (let i = 0; i < pcm.length; i += step) {
    const chunk = pcm.slice(i, i + step);
    session.pushAudio(new AudioFrame(chunk, RATE, 1, chunk.length));
  }
};

/** Total samples per channel of `frames`. */
export const samplesOf = (frames: readonly AudioFrame[]): number => frames.reduce((n, f) => n + f.samplesPerChannel, 0);

/** Milliseconds of `frames` in 100 ms windows whose RMS is above -40 dBFS (0.01 of full scale). */
export const nonSilentMs = (frames: readonly AudioFrame[]): number => {
  const all = new Int16Array(samplesOf(frames));
  let at = 0;
  for (const f of frames) {
    all.set(f.data.subarray(0, f.samplesPerChannel * f.channels), at);
    at += f.samplesPerChannel;
  }
  const window = RATE / 10;
  let loud = 0;
  for (let i = 0; i + window <= all.length; i += window) {
    let sum = 0;
    for (let j = i; j < i + window; j++) sum += ((all[j] ?? 0) / 32768) ** 2;
    if (Math.sqrt(sum / window) > 0.01) loud += 100;
  }
  return loud;
};

/** The server VAD configuration LiveKit users pass (`turnDetection`), in the plugin's GA shape. */
export const SERVER_VAD = {
  type: "server_vad",
  threshold: 0.5,
  prefix_padding_ms: 300,
  silence_duration_ms: 500,
  create_response: true,
  interrupt_response: true,
} as const;

/** A `RealtimeModel` pointed at our server through `baseURL` (http: the plugin maps it to ws:). */
export const modelFor = (
  port: number,
  apiKey: string,
  options: ConstructorParameters<typeof realtime.RealtimeModel>[0] = {},
): realtime.RealtimeModel => new realtime.RealtimeModel({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, ...options });
