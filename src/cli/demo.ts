import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { explainConnectError, RealtimeClient, type ServerEvent } from "../client/index.ts";
import { pcm16FromBytes, writeWavFile } from "../infra/audio/index.ts";
import { prepareOut, readInput, toSend } from "./demo-files.ts";

/** Options of `duplex demo`. Times in ms. */
export interface DemoOptions {
  readonly url: string;
  /** A mono PCM16 WAV file (8, 16, 24 or 48 kHz; other rates are resampled to 16 kHz). */
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
   * Where progress goes: lines (speech, responses, cancels, errors, files), and with `live` a status that replaces
   * the previous one (how much of the input was sent), or nothing.
   */
  readonly progress?: (line: string, live?: boolean) => void;
}

/** The line `duplex demo` prints. Latency in ms; `audio_ms` per response in ms of 24 kHz audio. */
export interface DemoSummary {
  readonly session_id: string;
  readonly responses: number;
  /**
   * `realtime`: the input was paced, and the latency is from the end of speech to the first audio; `fast`: sent as
   * fast as accepted, and the latency is from the append that held the end of speech (not a conversational figure).
   */
  readonly pace: "realtime" | "fast";
  readonly first_audio_latency_ms: number | null;
  readonly audio_ms: number[];
  readonly events: Record<string, number>;
  readonly files: string[];
  /** Every server event received, in order (not printed). */
  readonly trace: ServerEvent[];
}

interface ResponseAudio {
  readonly id: string;
  readonly chunks: Int16Array[];
  rate: number;
  receivedMs: number;
  firstDeltaAt: number;
  ackedMs: number;
  done: boolean;
}

/**
 * The demo flow (issue: walking skeleton): opens a session with the project's client, streams the WAV as
 * `chunkMs` appends at real-time pace, lets the model decide when to answer, "plays" each response by sending
 * `playback.ack` at real-time pace, closes with `session.close`, and writes each response's audio.
 * @throws the client's connection error, or WaitTimeoutError when the session does not open.
 */
export const runDemo = async (options: DemoOptions): Promise<DemoSummary> => {
  const chunkMs = options.chunkMs ?? 100;
  const fast = options.fast ?? false;
  const say = options.progress ?? (() => undefined);
  // Everything that can be checked is checked before connecting, so a bad argument costs no session.
  const input = toSend(await readInput(options.input));
  await prepareOut(options.out);
  const rate = input.rate;

  const refAudio =
    options.refAudio === undefined
      ? {}
      : { ref_audio: `data:audio/wav;base64,${(await readFile(options.refAudio)).toString("base64")}` };
  const headers = {
    ...(options.apiKey === undefined ? {} : { Authorization: `Bearer ${options.apiKey}` }),
    ...(options.headers ?? {}),
  };
  const client = await RealtimeClient.connect(options.url, { headers }).catch((error: unknown) => {
    throw new Error(explainConnectError(options.url, error, headers.Authorization !== undefined));
  });
  // The session can end under the demo (its model failed, the server went away): say so at once, with why.
  let closing = false;
  let lastError = "";
  let ended: Error | null = null;
  let onEnded: (error: Error) => void = () => undefined;
  let stopAcker = (): void => undefined;
  const endedEarly = new Promise<never>((_resolve, reject) => {
    onEnded = reject;
  });
  endedEarly.catch(() => undefined);
  const end = (error: Error): void => {
    if (closing || ended !== null) return;
    ended = error;
    stopAcker();
    onEnded(error);
  };
  client.onEvent((event) => {
    if (event.type === "error") {
      const e = event.error as { code?: string; message?: string } | undefined;
      lastError = `${e?.code ?? "error"}: ${e?.message ?? ""}`;
    }
    if (event.type === "session.closed" || event.type === "session.expired") {
      end(
        new Error(`the server ended the session (${String(event.reason)})${lastError === "" ? "" : `; ${lastError}`}`),
      );
    }
  });
  void client.closed.then(({ code, reason }) =>
    end(new Error(`connection closed by the server (${code}${reason === "" ? "" : ` ${reason}`})`)),
  );
  client.onEvent((event) => {
    const seconds = (ms: unknown) => `${(Number(ms) / 1000).toFixed(1)} s`;
    switch (event.type) {
      case "input_audio_buffer.speech_started":
        say(`speech started at ${seconds(event.audio_start_ms)}`);
        return;
      case "input_audio_buffer.speech_stopped":
        say(`speech stopped at ${seconds(event.audio_end_ms)}`);
        return;
      case "response.created":
        say(`response ${String((event.response as { id?: string }).id)} started`);
        return;
      case "response.done": {
        const r = event.response as { id?: string; status?: string; status_details?: { reason?: string } | null };
        const transcript = client.received
          .map((x) => x.event)
          .findLast((e) => e.type === "response.output_audio_transcript.done" && e.response_id === r.id)?.transcript;
        const why = r.status === "completed" ? "" : ` (${r.status_details?.reason ?? ""})`;
        say(`response ${r.id} ${r.status}${why}${transcript === undefined ? "" : `: "${String(transcript)}"`}`);
        return;
      }
      case "error": {
        const e = event.error as { code?: string; message?: string } | string;
        say(typeof e === "string" ? `error ${String(event.code)}: ${e}` : `error ${e?.code}: ${e?.message}`);
        return;
      }
      default:
    }
  });
  const responses = new Map<string, ResponseAudio>();
  client.onEvent((event: ServerEvent, at: number) => {
    if (event.type !== "response.output_audio.delta") return;
    const id = String(event.response_id);
    const pcm = pcm16FromBytes(Uint8Array.from(Buffer.from(String(event.delta), "base64")));
    const eventRate = Number(event.sample_rate_hz ?? 24000);
    const r = responses.get(id) ?? {
      id,
      chunks: [],
      rate: eventRate,
      receivedMs: 0,
      firstDeltaAt: at,
      ackedMs: 0,
      done: false,
    };
    r.chunks.push(pcm);
    r.receivedMs += (pcm.length / eventRate) * 1000;
    responses.set(id, r);
  });
  client.onEvent((event) => {
    if (event.type === "response.done") {
      const r = responses.get(String(event.response_id));
      if (r !== undefined) r.done = true;
    }
  });

  const ack = (): void => {
    const now = performance.now();
    for (const r of responses.values()) {
      const played = Math.floor(fast ? r.receivedMs : Math.min(r.receivedMs, now - r.firstDeltaAt));
      if (played > r.ackedMs) {
        r.ackedMs = played;
        client.send({ type: "playback.ack", response_id: r.id, played_ms: played });
      }
    }
  };
  const acker = setInterval(ack, 200);
  stopAcker = () => clearInterval(acker);

  client.send({
    type: "session.update",
    session: {
      instructions: "Echo what you hear.",
      playback_commit_policy: "ack_only",
      input_audio_format: input.encoding,
      ...(input.encoding.startsWith("g711") ? {} : { input_sample_rate_hz: rate }),
      ...refAudio,
    },
  });
  const created = await client
    .waitFor((e) => e.type === "session.created" || e.type === "error", { since: 0 })
    .catch((error: Error) => {
      throw new Error(`the server did not open a session: ${error.message}`);
    });
  if (created.type === "error") {
    await client.close();
    throw new Error(`the server refused the session: ${JSON.stringify(created.error)} (${String(created.code ?? "")})`);
  }
  await client.waitFor("session.updated", { since: 0 });
  const sessionId = String((created.session as { id: string }).id);

  // The file's bytes as they are, then silence in the same encoding, in chunkMs appends.
  const chunkBytes = Math.round((rate * chunkMs) / 1000) * input.bytesPerSample;
  const tailBytes = Math.round((rate * (options.tailMs ?? 1500)) / 1000) * input.bytesPerSample;
  const all = new Uint8Array(input.bytes.length + tailBytes).fill(input.silence);
  all.set(input.bytes);
  const totalS = all.length / input.bytesPerSample / rate;
  const sentAt: number[] = [];
  const start = performance.now();
  for (let i = 0, offset = 0; offset < all.length; i += 1, offset += chunkBytes) {
    if (ended !== null) throw ended;
    if (i % 10 === 0) say(`sent ${((i * chunkMs) / 1000).toFixed(1)} of ${totalS.toFixed(1)} s`, true);
    sentAt.push(performance.now());
    client.appendAudio(all.subarray(offset, offset + chunkBytes));
    if (!fast) {
      const due = start + (i + 1) * chunkMs - performance.now();
      if (due > 0) await sleep(due);
    } else if (i % 20 === 19) {
      await sleep(1);
    }
  }

  if (options.commit === true) {
    client.send({ type: "input_audio_buffer.commit", response_create: true });
    say("sent input_audio_buffer.commit (response_create) after the input");
  }
  // The mailbox is ordered: once the heartbeat is answered, every append before it has been heard.
  const heard = client.received.length;
  client.send({ type: "session.heartbeat" });
  await Promise.race([
    client.waitFor("session.heartbeat_ack", { since: heard, timeoutMs: options.timeoutMs ?? 30_000 }),
    endedEarly,
  ]);
  // Then wait until the model is quiet: no response in progress, everything played, and a pause in the events.
  const deadline = performance.now() + (options.timeoutMs ?? 30_000);
  const quietMs = fast ? 600 : 1500;
  while (performance.now() < deadline) {
    if (ended !== null) throw ended;
    ack();
    const last = client.received.at(-1)?.at ?? 0;
    const open = [...responses.values()].some((r) => !r.done || r.ackedMs < Math.floor(r.receivedMs));
    const speaking =
      client.types().lastIndexOf("input_audio_buffer.speech_started") >
      client.types().lastIndexOf("input_audio_buffer.speech_stopped");
    if (!open && !speaking && performance.now() - last > quietMs) break;
    await sleep(100);
  }
  clearInterval(acker);
  ack();
  closing = true;
  client.send({ type: "session.close" });
  await client.waitFor("session.closed", { since: 0, timeoutMs: 5000 }).catch(() => undefined);
  await client.close();

  const files: string[] = [];
  const ordered = [...responses.values()];
  for (const [i, r] of ordered.entries()) {
    const total = r.chunks.reduce((n, c) => n + c.length, 0);
    const pcm = new Int16Array(total);
    let offset = 0;
    for (const c of r.chunks) {
      pcm.set(c, offset);
      offset += c.length;
    }
    const file = join(options.out, `response-${i + 1}.wav`);
    await writeWavFile(file, pcm, r.rate);
    files.push(file);
    say(`wrote ${file} (${(((total / r.rate) * 1000) / 1000).toFixed(1)} s)`);
  }
  if (ordered.length === 0)
    say(
      `no response: ${whyNoResponse(
        client.received.map((r) => r.event),
        options.commit === true,
      )}`,
    );

  const stopped = client.received.find((r) => r.event.type === "input_audio_buffer.speech_stopped");
  const firstDelta = client.received.find(
    (r) => r.event.type === "response.output_audio.delta" && (stopped === undefined || r.at >= stopped.at),
  );
  let latency: number | null = null;
  if (stopped !== undefined && firstDelta !== undefined) {
    const silenceMs = 500;
    const speechEndMs = Math.max(0, Number(stopped.event.audio_end_ms) - silenceMs);
    const sent = sentAt[Math.min(sentAt.length - 1, Math.floor(speechEndMs / chunkMs))] ?? start;
    latency = Math.round(firstDelta.at - sent);
  }
  const events: Record<string, number> = {};
  for (const type of client.types()) events[type] = (events[type] ?? 0) + 1;
  return {
    session_id: sessionId,
    responses: ordered.length,
    pace: fast ? "fast" : "realtime",
    first_audio_latency_ms: latency,
    audio_ms: ordered.map((r) => Math.round(r.receivedMs)),
    events,
    files,
    trace: client.received.map((r) => r.event),
  };
};

/** Why a demo run got no response, from what the server said. */
const whyNoResponse = (events: readonly ServerEvent[], committed: boolean): string => {
  const session = events.findLast((e) => e.type === "session.updated" || e.type === "session.created")?.session as
    | {
        turn_detection?: unknown;
        audio?: { input?: { turn_detection?: unknown } };
        extra_body?: { auto_response?: boolean };
      }
    | undefined;
  const turnDetection = session?.audio?.input?.turn_detection ?? session?.turn_detection ?? null;
  const turnLane = session?.extra_body?.auto_response === false && turnDetection === null;
  if (turnLane && !committed)
    return "the server is in the turn lane (auto_response false, no turn detection): pass --commit to commit the input and ask for a response";
  if (!events.some((e) => e.type === "input_audio_buffer.speech_started" || e.type === "input_audio_buffer.committed"))
    return "no speech was heard in the input (server VAD found none); try a file with speech, e.g. ../shared/audio/jfk_16k.wav";
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
