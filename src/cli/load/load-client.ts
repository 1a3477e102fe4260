/**
 * The load generator of `duplex bench load`, run as a process of its own (spawned by the bench, see
 * `spawnScript`), so that the server's CPU figure is the server's alone. Its argument is a {@link LoadClientConfig}
 * as JSON. It opens `sessions` WebSocket sessions, their starts spread evenly over `rampMs`; each streams its WAV
 * (alternating between the inputs, e.g. 16 and 24 kHz) in real time as 100 ms `input_audio_buffer.append`s, with
 * 1.5 s of silence between repeats, for `seconds`; then it goes on sending silence until every utterance's response
 * has ended (at least 1 s, at most `drainMs`) and closes. The stream ends with a whole repeat (its gap included), so
 * no utterance is cut by the drain. An utterance starts its first-audio clock, in the turn lane, when its
 * `input_audio_buffer.speech_stopped` arrives, as a user's client measures (docs/benchmarks.md, "Load: the
 * method"); in the model-native lane, which sends no speech events, when the append that completes its stop is sent.
 * On stdout, one JSON object per line:
 * `{"type":"started"}` as the first session starts, `{"type":"ended"}` when the last closed, then
 * `{"type":"result", ...}` ({@link LoadClientResult}).
 */
import { WebSocket } from "ws";
import { pcm16ToBytes } from "../../infra/audio/pcm.ts";
import { readWavFile } from "../../infra/audio/wav.ts";
import { speechOf } from "../input-speech.ts";
import { percentile } from "./stats.ts";
import { addTallies, createTally, type Tally, type TallyCounts } from "./tally.ts";

/** What the load client is asked to do. Times in ms except `seconds`. */
export interface LoadClientConfig {
  readonly url: string;
  readonly sessions: number;
  /** Seconds of audio each session streams before draining. */
  readonly seconds: number;
  /** Session i starts at i * rampMs / sessions. */
  readonly rampMs: number;
  /** The longest a session waits for its last responses after streaming, ms. */
  readonly drainMs: number;
  /**
   * `native`: the model-native lane (the model answers when it hears the user stop; server VAD's stop does not
   * commit); `turn`: the turn lane (server VAD's stop commits and creates the response).
   */
  readonly lane: "native" | "turn";
  /** `server`: a duplex server (session.update first, waits for session.updated); `relay`: the bare relay. */
  readonly target: "server" | "relay";
  /** Mono PCM16 WAV files and their rates (Hz); session i streams input i % length. */
  readonly inputs: readonly { readonly path: string; readonly rateHz: number }[];
}

/** The load client's result line. */
export interface LoadClientResult extends TallyCounts {
  /** The timer lateness of this process's appends (its event loop's health), ms: p99 and max. */
  readonly sendLateMsP99: number;
  readonly sendLateMsMax: number;
  readonly type: "result";
  /** Sessions whose socket opened (and, against a server, got `session.updated`). */
  readonly sessionsOpened: number;
  /** Sessions that streamed to the end and were closed by the client, not by the server or a socket error. */
  readonly sessionsCompleted: number;
  /** Sessions whose drain ended by timeout, some response still unfinished. */
  readonly sessionsDrainTimedOut: number;
  readonly appendsSent: number;
  /** Wall time from the first session's start to the last one's close, ms. */
  readonly wallMs: number;
  /** CPU this process used over that time (user + system), in cores. */
  readonly cpuCores: number;
}

const CHUNK_MS = 100;
const GAP_MS = 1500;
/** Silence streamed after `seconds` before a session may close, so that server VAD hears the last stop. */
const MIN_DRAIN_MS = 1000;

/**
 * Pre-rendered append frames of one input: its speech then the gap, and one frame of silence. `stops`: the indexes
 * in `cycle` of the appends that complete an utterance's stop as server VAD hears it (its speech and the silence
 * window after it), found on the client (input-speech.ts), for the model-native lane, where no speech event comes.
 */
interface Frames {
  readonly rateHz: number;
  readonly cycle: readonly string[];
  readonly silence: string;
  readonly stops: ReadonlySet<number>;
}

const appendFrame = (samples: Int16Array): string =>
  JSON.stringify({ type: "input_audio_buffer.append", audio: Buffer.from(pcm16ToBytes(samples)).toString("base64") });

const framesOf = async (path: string, rateHz: number): Promise<Frames> => {
  const wav = await readWavFile(path);
  if (wav.sampleRate !== rateHz) throw new Error(`${path}: expected ${rateHz} Hz, the file says ${wav.sampleRate}`);
  const chunk = (rateHz * CHUNK_MS) / 1000;
  const speechChunks = Math.ceil(wav.samples.length / chunk);
  const all = new Int16Array((speechChunks + GAP_MS / CHUNK_MS) * chunk);
  all.set(wav.samples);
  const cycle: string[] = [];
  for (let offset = 0; offset < all.length; offset += chunk)
    cycle.push(appendFrame(all.subarray(offset, offset + chunk)));
  const stops = new Set((await speechOf(all, rateHz)).map((s) => Math.ceil(s.stoppedAtMs / CHUNK_MS) - 1));
  return { rateHz, cycle, silence: appendFrame(new Int16Array(chunk)), stops };
};

const sleepUntil = (at: number): Promise<void> => {
  const due = at - performance.now();
  return due > 0 ? new Promise((resolve) => setTimeout(resolve, due)) : Promise.resolve();
};

/** How late each append went out after its time on the audio's clock, ms (every session's, in one list). */
const late: number[] = [];

interface SessionOutcome {
  readonly opened: boolean;
  readonly completed: boolean;
  readonly drainTimedOut: boolean;
  readonly appendsSent: number;
  readonly counts: TallyCounts;
}

const DELTA = '"response.output_audio.delta"';
const TRANSCRIPT_DELTA = '"response.output_audio_transcript.delta"';

/**
 * The socket's message handler: an audio delta read from its head (type and response id; most of the traffic), a
 * transcript delta skipped, every other event parsed and counted; `session.updated` calls `onUpdated`.
 */
const messageHandler =
  (tally: Tally, onUpdated: () => void) =>
  (data: Buffer): void => {
    const at = performance.now();
    const head = data.toString("latin1", 0, Math.min(data.length, 400));
    if (head.includes(DELTA)) {
      tally.audioDelta(/"response_id":"([^"]+)"/.exec(head)?.[1], at);
      return;
    }
    if (head.includes(TRANSCRIPT_DELTA)) return;
    const event = JSON.parse(data.toString()) as {
      type: string;
      response?: { id?: string; status?: string; status_details?: { reason?: string } | null };
      error?: { code?: string | null };
    };
    switch (event.type) {
      case "session.updated":
        onUpdated();
        break;
      case "input_audio_buffer.speech_stopped":
        tally.speechStopped(at);
        break;
      case "response.created":
        tally.responseCreated(event.response?.id ?? "", at);
        break;
      case "response.done":
        tally.responseDone(
          event.response?.id ?? "",
          event.response?.status ?? "unknown",
          event.response?.status_details?.reason ?? undefined,
        );
        break;
      case "error":
        tally.error(event.error?.code ?? "unknown");
        break;
      default:
        break;
    }
  };

/**
 * Streams the frames in real time (each append at its time on the audio's clock: no drift from late timers), whole
 * repeats of the cycle, then silence until the answers settle (at least MIN_DRAIN_MS, at most `drainMs`). Returns the
 * appends sent and whether the drain ran out; `send` is false once the socket is not open.
 */
const streamFrames = async (
  config: LoadClientConfig,
  frames: Frames,
  tally: Tally,
  send: (frame: string) => boolean,
): Promise<{ appendsSent: number; drainTimedOut: boolean }> => {
  const streamStart = performance.now();
  // Whole repeats: a stream cut inside an utterance would end it with the drain's silence, a stop the model-native
  // lane's client cannot place (its response would count as unprompted, and the next pairs shift).
  const streamed =
    Math.ceil(Math.round((config.seconds * 1000) / CHUNK_MS) / frames.cycle.length) * frames.cycle.length;
  const drainLimit = Math.max(MIN_DRAIN_MS, config.drainMs) / CHUNK_MS;
  let appendsSent = 0;
  for (let n = 0; ; n += 1) {
    const draining = n >= streamed;
    if (draining && n - streamed >= MIN_DRAIN_MS / CHUNK_MS && (config.target === "relay" || tally.settled())) break;
    if (draining && n - streamed >= drainLimit) return { appendsSent, drainTimedOut: true };
    late.push(performance.now() - (streamStart + n * CHUNK_MS));
    if (!send(draining ? frames.silence : (frames.cycle[n % frames.cycle.length] ?? frames.silence))) break;
    appendsSent += 1;
    // The model-native lane announces no speech: an utterance's stop is the append that completes it.
    if (config.lane === "native" && !draining && frames.stops.has(n % frames.cycle.length)) {
      tally.speechStopped(performance.now());
    }
    await sleepUntil(streamStart + (n + 1) * CHUNK_MS);
  }
  return { appendsSent, drainTimedOut: false };
};

/** One session: connect, configure, stream in real time, drain, close. */
const runSession = async (config: LoadClientConfig, frames: Frames, startAt: number): Promise<SessionOutcome> => {
  await sleepUntil(startAt);
  const tally = createTally();
  let updated: () => void = () => undefined;
  const sessionUpdated = new Promise<void>((resolve) => {
    updated = resolve;
  });
  const socket = new WebSocket(config.url, { perMessageDeflate: false });
  const closed = new Promise<number>((resolve) => socket.once("close", (code) => resolve(code)));
  socket.on("error", () => tally.error("socket_error"));
  socket.on(
    "message",
    messageHandler(tally, () => updated()),
  );
  const opened = await new Promise<boolean>((resolve) => {
    socket.once("open", () => resolve(true));
    socket.once("close", () => resolve(false));
  });
  const notOpened = (): SessionOutcome => ({
    opened: false,
    completed: false,
    drainTimedOut: false,
    appendsSent: 0,
    counts: tally.counts(),
  });
  if (!opened) {
    tally.error("connect_failed");
    return notOpened();
  }
  const send = (frame: string): boolean => {
    if (socket.readyState !== WebSocket.OPEN) return false;
    socket.send(frame);
    return true;
  };
  if (config.target === "server") {
    send(
      JSON.stringify({
        type: "session.update",
        session: {
          input_sample_rate_hz: frames.rateHz,
          ...(config.lane === "turn" ? { turn_detection: { type: "server_vad" } } : {}),
        },
      }),
    );
    const ok = await Promise.race([sessionUpdated.then(() => true), closed.then(() => false)]);
    if (!ok) return notOpened();
  }
  const { appendsSent, drainTimedOut } = await streamFrames(config, frames, tally, send);
  const closedByUs = socket.readyState === WebSocket.OPEN;
  if (closedByUs) socket.close(1000);
  const code = await closed;
  if (!closedByUs) tally.error(`closed_by_server_${code}`);
  return { opened: true, completed: closedByUs, drainTimedOut, appendsSent, counts: tally.counts() };
};

const main = async (): Promise<void> => {
  const config = JSON.parse(process.argv[2] ?? "{}") as LoadClientConfig;
  const inputs = await Promise.all(config.inputs.map((i) => framesOf(i.path, i.rateHz)));
  const line = (value: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(value)}\n`);
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  line({ type: "started" });
  const outcomes = await Promise.all(
    Array.from({ length: config.sessions }, (_, i) =>
      runSession(
        config,
        inputs[i % inputs.length] as Frames,
        started + (config.sessions > 1 ? (i * config.rampMs) / config.sessions : 0),
      ),
    ),
  );
  const wallMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  line({ type: "ended" });
  const result: LoadClientResult = {
    type: "result",
    ...addTallies(outcomes.map((o) => o.counts)),
    sessionsOpened: outcomes.filter((o) => o.opened).length,
    sessionsCompleted: outcomes.filter((o) => o.completed).length,
    sessionsDrainTimedOut: outcomes.filter((o) => o.drainTimedOut).length,
    appendsSent: outcomes.reduce((n, o) => n + o.appendsSent, 0),
    sendLateMsP99: percentile(late, 99),
    sendLateMsMax: late.reduce((m, v) => Math.max(m, v), 0),
    wallMs,
    cpuCores: (cpu.user + cpu.system) / 1000 / wallMs,
  };
  line({ ...result });
};

await main();
