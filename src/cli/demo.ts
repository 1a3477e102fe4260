import { readFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { DuplexClient, DuplexProtocolError, type ServerEvent } from "../client/index.ts";
import { prepareOut, readInput, toSend } from "./demo-files.ts";
import { DemoPlayback, narrate, seconds } from "./demo-playback.ts";
import { type SpeechSegment, speechInInput } from "./input-speech.ts";

/** Options of `duplex demo`. Times in ms. */
export interface DemoOptions {
  readonly url: string;
  /** A mono WAV file: PCM16 (8, 16, 24 or 48 kHz as they are; other rates resampled to 16 kHz), float32, or G.711. */
  readonly input: string;
  /** Folder for response-N.wav files. */
  readonly out: string;
  /** Skip real-time pacing of the input and of the simulated playback. */
  readonly fast?: boolean;
  /** Silence appended after the file, as a microphone would go on sending. Default 1500 ms. */
  readonly tailMs?: number;
  /** Length of each append. Default 100 ms. */
  readonly chunkMs?: number;
  /** Give up waiting for responses after this long past the end of the input. Default 30 000 ms. */
  readonly timeoutMs?: number;
  readonly headers?: Record<string, string>;
  /** A WAV file sent as the session's `ref_audio` voice clip (a data URL), which MiniCPM-o 4.5 requires. */
  readonly refAudio?: string;
  /** Sent as `Authorization: Bearer` (a server with `auth.api_keys` needs one). */
  readonly apiKey?: string;
  /** Commit the input (with `response_create`) after streaming it: the turn lane answers only what is committed. */
  readonly commit?: boolean;
  /**
   * Server VAD turn detection (`turn_detection: {type: server_vad}`, with `interrupt_response` as OpenAI's API has
   * it): the server ends each utterance, answers it, and cuts an answer the user talks over.
   */
  readonly serverVad?: boolean;
  /**
   * Stay connected this long after the answers, silent, before closing, ms (an app left open; default 0). The
   * session's lease is kept by heartbeats meanwhile.
   */
  readonly lingerMs?: number;
  /** Interval of the client's `session.heartbeat`, ms. Default 30 000 (the reference's 30 s). */
  readonly heartbeatMs?: number;
  /**
   * Where progress goes: lines (speech, responses, cancels, errors, files), and with `live` a status that replaces
   * the previous one (how much of the input was sent), or nothing.
   */
  readonly progress?: (line: string, live?: boolean) => void;
  /**
   * Ctrl-C: when aborted, the demo stops streaming and waiting, closes the session (`session.close`), writes the
   * responses received so far and returns its summary with `interrupted: true`.
   */
  readonly signal?: AbortSignal;
}

/** The line `duplex demo` prints. Latency in ms; `audio_ms` per response in ms of 24 kHz audio. */
export interface DemoSummary {
  readonly session_id: string;
  readonly responses: number;
  /**
   * `realtime`: the input was paced, and `first_audio_after_speech_end_ms` is conversational; `fast`: sent as fast
   * as accepted, so the figure is from the append that held the end of speech (not a conversational figure).
   */
  readonly pace: "realtime" | "fast";
  /** The run was stopped by its `signal` (Ctrl-C) before the model was quiet: the figures cover what was received. */
  readonly interrupted: boolean;
  /**
   * ms from sending the append that held the end of the user's speech (the last speech in the input before the
   * first audio, found by Silero VAD on the client: see input-speech.ts) to receiving the first audio delta; null
   * without speech or audio.
   */
  readonly first_audio_after_speech_end_ms: number | null;
  /** The speech the client found in its input, ms of the input. */
  readonly speech: SpeechSegment[];
  readonly audio_ms: number[];
  readonly events: Record<string, number>;
  readonly files: string[];
  /** Every server event received, in order (not printed). */
  readonly trace: ServerEvent[];
}

/** Thrown inside runDemo when its signal is aborted; caught there, never escapes. */
class Interrupted extends Error {}

/** What the demo sends (demo-files.ts `toSend`): the bytes in their encoding, at a rate, and the tail's silence. */
type InputToSend = ReturnType<typeof toSend>;

/** Where a run's waits end early: `orEnded(work)` rejects when the session ended under it or on Ctrl-C. */
interface Endings {
  orEnded<T>(work: Promise<T>): Promise<T>;
  /** The demo closes the session itself from now on: its end is no longer a failure. */
  closing(): void;
}

/**
 * The demo flow (issue: walking skeleton): opens a session with the project's DuplexClient, streams the WAV as
 * `chunkMs` appends at real-time pace, lets the model decide when to answer, "plays" each response by sending
 * `playback.ack` at real-time pace (demo-playback.ts), closes with `session.close`, and writes each response's audio.
 * A dropped connection is resumed by the client (reference/realtime-duplex-api.md, "Reconnect and resume"); the demo
 * says so.
 * @throws Error with one line that says why: the connection failed (what to do), the server refused or ended the
 *   session, or the session could not be resumed.
 */
export const runDemo = async (options: DemoOptions): Promise<DemoSummary> => {
  const say = options.progress ?? (() => undefined);
  // Everything that can be checked is checked before connecting, so a bad argument costs no session.
  const wav = await readInput(options.input);
  const input = toSend(wav);
  await prepareOut(options.out);
  const speech = await speechInInput(wav);
  const client = await connectDemo(options, input);
  const playback = new DemoPlayback(client, options.fast ?? false);
  narrate(client, playback, say);
  const ends = endingsOf(client, options.signal);
  const acker = setInterval(() => playback.ack(), 200);
  void client.closed.then(() => clearInterval(acker));
  const sentAt: number[] = [];
  const start = performance.now();
  let wasInterrupted = false;
  try {
    await ends.orEnded(streamInput(client, input, speech, sentAt, options));
    if (options.commit === true) {
      client.commit({ createResponse: true });
      say("sent input_audio_buffer.commit (response_create) after the input");
    }
    await untilQuiet(client, playback, ends, options);
  } catch (error) {
    if (!(error instanceof Interrupted)) throw error;
    wasInterrupted = true;
    say("interrupted: closing the session and writing the responses received so far");
  }
  clearInterval(acker);
  playback.ack();
  const lingerMs = options.lingerMs ?? 0;
  if (lingerMs > 0 && !wasInterrupted) {
    say(`staying connected, silent, for ${(lingerMs / 1000).toFixed(1)} s`);
    await ends.orEnded(sleep(lingerMs)).catch((error: unknown) => {
      if (!(error instanceof Interrupted)) throw error;
      wasInterrupted = true;
    });
  }
  ends.closing();
  await client.close(5000);
  const files = await playback.write(options.out, say);
  const trace = client.events.events();
  if (playback.responses.length === 0 && !wasInterrupted)
    say(`no response: ${whyNoResponse(trace, options.commit === true, speech)}`);
  return summaryOf(client, playback, { speech, sentAt, start, interrupted: wasInterrupted, files, options });
};

/**
 * Connects with the session the demo needs (echo instructions, `ack_only` playback, the input's format, server VAD
 * and a voice clip when asked).
 * @throws Error with one line: the server's refusal (with what to pass for a required voice clip), or why the
 *   connection failed.
 */
const connectDemo = async (options: DemoOptions, input: InputToSend): Promise<DuplexClient> => {
  const refAudio =
    options.refAudio === undefined
      ? {}
      : { ref_audio: `data:audio/wav;base64,${(await readFile(options.refAudio)).toString("base64")}` };
  const headers = {
    ...(options.apiKey === undefined ? {} : { Authorization: `Bearer ${options.apiKey}` }),
    ...(options.headers ?? {}),
  };
  return DuplexClient.connect(options.url, {
    headers,
    // The demo's own heartbeat waits for every append to be heard, which may take a while on a busy server.
    heartbeatTimeoutMs: options.timeoutMs ?? 30_000,
    ...(options.heartbeatMs === undefined ? {} : { heartbeatIntervalMs: options.heartbeatMs }),
    session: {
      instructions: "Echo what you hear.",
      playback_commit_policy: "ack_only",
      ...(options.serverVad === true ? { turn_detection: { type: "server_vad" } } : {}),
      input_audio_format: input.encoding,
      ...(input.encoding.startsWith("g711") ? {} : { input_sample_rate_hz: input.rate }),
      ...refAudio,
    },
  }).catch((error: unknown) => {
    if (error instanceof DuplexProtocolError) {
      const hint =
        error.code === "ref_audio_required"
          ? "; this model needs a voice clip: pass --ref-audio FILE (a WAV, e.g. ../shared/audio/jfk_16k.wav)"
          : "";
      throw new Error(`the server refused the session: ${error.message}${hint}`);
    }
    throw new Error((error as Error).message);
  });
};

/** The session ending under the demo (its model failed, the server went away for good) and Ctrl-C, as `Endings`. */
const endingsOf = (client: DuplexClient, signal: AbortSignal | undefined): Endings => {
  let closing = false;
  const endedEarly = client.closed.then((end) => {
    if (closing) return new Promise<never>(() => undefined);
    throw new Error(end?.message ?? "the session ended");
  });
  endedEarly.catch(() => undefined);
  // Ctrl-C: every wait ends at once with Interrupted.
  const interrupted = new Promise<never>((_resolve, reject) => {
    if (signal === undefined) return;
    if (signal.aborted) reject(new Interrupted());
    else signal.addEventListener("abort", () => reject(new Interrupted()), { once: true });
  });
  interrupted.catch(() => undefined);
  return {
    orEnded: (work) => {
      work.catch(() => undefined);
      return Promise.race([work, endedEarly, interrupted]);
    },
    closing: () => {
      closing = true;
    },
  };
};

/**
 * Streams the file's bytes as they are, then silence in the same encoding (`tailMs`), in `chunkMs` appends; says how
 * much was sent and, as each passes, the speech the client found in its input. `sentAt` gets each append's send time.
 */
const streamInput = (
  client: DuplexClient,
  input: InputToSend,
  speech: readonly SpeechSegment[],
  sentAt: number[],
  options: DemoOptions,
): Promise<unknown> => {
  const say = options.progress ?? (() => undefined);
  const chunkMs = options.chunkMs ?? 100;
  const tailBytes = Math.round((input.rate * (options.tailMs ?? 1500)) / 1000) * input.bytesPerSample;
  const all = new Uint8Array(input.bytes.length + tailBytes).fill(input.silence);
  all.set(input.bytes);
  const totalS = all.length / input.bytesPerSample / input.rate;
  const told = new Set<SpeechSegment>();
  return client.streamAudio(all, {
    bytesPerSecond: input.rate * input.bytesPerSample,
    bytesPerSample: input.bytesPerSample,
    chunkMs,
    realtime: !(options.fast ?? false),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    onAppend: (i, at) => {
      if (i % 10 === 0) say(`sent ${((i * chunkMs) / 1000).toFixed(1)} of ${totalS.toFixed(1)} s`, true);
      sentAt.push(at);
      for (const segment of speech) {
        if (told.has(segment) || segment.endMs > (i + 1) * chunkMs) continue;
        told.add(segment);
        say(`you spoke from ${seconds(segment.startMs)} to ${seconds(segment.endMs)} of the input`);
      }
    },
  });
};

/**
 * Waits until every append was heard (a heartbeat answered: the mailbox is ordered; a drop on the way is resumed by
 * the client and the demo asks again), then until the model is quiet: no response in progress, everything played,
 * and a pause in the events (600 ms fast, else 1500), or `timeoutMs`.
 */
const untilQuiet = async (
  client: DuplexClient,
  playback: DemoPlayback,
  ends: Endings,
  options: DemoOptions,
): Promise<void> => {
  for (;;) {
    const heard = await ends.orEnded(
      client.heartbeat().then(
        () => true,
        () => false,
      ),
    );
    if (heard) break;
    if (client.phase !== "open") await ends.orEnded(client.events.waitFor("connection.resumed", { timeoutMs: 60_000 }));
  }
  const deadline = performance.now() + (options.timeoutMs ?? 30_000);
  const quietMs = options.fast === true ? 600 : 1500;
  while (performance.now() < deadline) {
    playback.ack();
    const last = client.events.received.at(-1)?.at ?? 0;
    if (!playback.playing && performance.now() - last > quietMs) break;
    await ends.orEnded(sleep(100));
  }
};

/** The run's summary line: the first audio's latency after the speech it answers, the audio, the events, the files. */
const summaryOf = (
  client: DuplexClient,
  playback: DemoPlayback,
  run: {
    readonly speech: readonly SpeechSegment[];
    readonly sentAt: readonly number[];
    readonly start: number;
    readonly interrupted: boolean;
    readonly files: string[];
    readonly options: DemoOptions;
  },
): DemoSummary => {
  const chunkMs = run.options.chunkMs ?? 100;
  // The end of the last speech sent before the first audio delta: the utterance that audio answers.
  const sentEnd = (segment: SpeechSegment): number =>
    run.sentAt[Math.min(run.sentAt.length - 1, Math.floor(segment.endMs / chunkMs))] ?? run.start;
  const firstDelta = client.events.received.find((r) => r.event.type === "response.output_audio.delta");
  const answered = firstDelta === undefined ? undefined : run.speech.findLast((s) => sentEnd(s) <= firstDelta.at);
  const events: Record<string, number> = {};
  for (const type of client.events.types()) events[type] = (events[type] ?? 0) + 1;
  return {
    session_id: client.sessionId,
    responses: playback.responses.length,
    pace: run.options.fast === true ? "fast" : "realtime",
    interrupted: run.interrupted,
    first_audio_after_speech_end_ms:
      firstDelta === undefined || answered === undefined ? null : Math.round(firstDelta.at - sentEnd(answered)),
    speech: [...run.speech],
    audio_ms: playback.responses.map((r) => Math.round(r.handle.audioMs)),
    events,
    files: run.files,
    trace: client.events.events(),
  };
};

/** Why a demo run got no response, from what the server said and the speech found in the input. */
const whyNoResponse = (
  events: readonly ServerEvent[],
  committed: boolean,
  speech: readonly SpeechSegment[],
): string => {
  const session = events.findLast((e) => e.type === "session.updated" || e.type === "session.created")?.session as
    | {
        turn_detection?: unknown;
        audio?: { input?: { turn_detection?: unknown } };
        extra_body?: { auto_response?: boolean };
        capabilities?: { implementation_level?: string; native_duplex?: string };
      }
    | undefined;
  const turnDetection = session?.audio?.input?.turn_detection ?? session?.turn_detection ?? null;
  const turnBased = session?.capabilities?.implementation_level === "turn_based";
  const turnLane = (session?.extra_body?.auto_response === false || turnBased) && turnDetection === null;
  if (turnLane && !committed) {
    // The turn lane answers only what is committed; an opt-in model (MiniCPM-o 4.5) can be asked for its own lane.
    const optIn =
      session?.capabilities?.native_duplex === "opt_in"
        ? ", or connect with ?native_duplex=1 for the model's own duplex lane (--url 'ws://HOST:PORT/v1/realtime?native_duplex=1')"
        : "";
    return `the session is in the turn lane (the model answers only what is committed): pass --commit to commit the input and ask for a response${optIn}`;
  }
  if (speech.length === 0)
    return "there is no speech in the input (Silero VAD found none); try a file with speech, e.g. ../shared/audio/jfk_16k.wav";
  return "the model did not answer; see the events in the JSON line";
};

/**
 * Progress of `duplex demo` on stderr: on a terminal, a live status line that event lines scroll above; in a pipe,
 * plain lines (no live status).
 */
export const progressLine = (input: string): ((line: string, live?: boolean) => void) => {
  const started = performance.now();
  const tty = process.stderr.isTTY === true;
  let status = "";
  return (line, live = false) => {
    const stamp = `${((performance.now() - started) / 1000).toFixed(1).padStart(5)} s`;
    if (live) {
      if (!tty) return;
      status = `${stamp}  ${input}: ${line}`;
      process.stderr.write(`\r\x1b[K${status}`);
      return;
    }
    process.stderr.write(tty ? `\r\x1b[K${stamp}  ${line}\n${status}` : `${stamp}  ${line}\n`);
  };
};
