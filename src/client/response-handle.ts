import type { ServerEvent } from "./event-collector.ts";

/**
 * How one response ended: `response.done`'s status (`completed`, `cancelled`, `failed`, `incomplete`) and
 * `status_details` (e.g. `{reason: "barge_in" | "client_cancelled" | "server_restart" | ...}`), with everything
 * the response carried (reference/realtime-duplex-api.md, "Consume responses").
 */
export interface ResponseResult {
  readonly responseId: string;
  readonly status: string;
  readonly statusDetails: unknown;
  /** The response's audio: PCM16 little-endian bytes (2 per sample), mono, at `sampleRateHz`. */
  readonly audio: Uint8Array;
  /** Hz; 24 000 on this server (reference, "response.output_audio.delta": `sample_rate_hz`). */
  readonly sampleRateHz: number;
  /** Length of `audio`, ms. */
  readonly audioMs: number;
  /** The audio's transcript (`response.output_audio_transcript.done`, else the deltas joined). */
  readonly transcript: string;
  /** Text output (`response.output_text.*`), for text-only responses; "" otherwise. */
  readonly text: string;
  /** The `response.done` event as received. */
  readonly doneEvent: ServerEvent;
}

/**
 * One assistant response as it streams, in phases: `pending` until `response.created`, `streaming`, then `done`
 * (`response.done` arrived) or `failed`: the promises reject with the client's error when the response is refused
 * (`response.create` answered by an `error` that names its event_id) or the session ends before `response.done`.
 */
export interface ResponseHandle {
  readonly phase: "pending" | "streaming" | "done" | "failed";
  /** The response's id (`resp_...`), once `response.created` arrived; null before. */
  readonly responseId: string | null;
  /** Audio received so far, ms. */
  readonly audioMs: number;
  /** The rate of its audio, Hz (`sample_rate_hz` of its deltas; 24 000 before the first). */
  readonly sampleRateHz: number;
  /** When its first audio delta arrived (ms, `performance.now()` clock); null before. */
  readonly firstAudioAt: number | null;
  /** Resolves with `response.created`. */
  readonly created: Promise<ServerEvent>;
  /** Resolves with the whole response once `response.done` arrived. */
  readonly done: Promise<ResponseResult>;
  /** The response's PCM16 bytes at 24 kHz, once done. */
  audio(): Promise<Uint8Array>;
  /** The audio transcript, once done. */
  transcript(): Promise<string>;
  /** The text output, once done. */
  text(): Promise<string>;
  /** Calls `listener` with each audio chunk (PCM16 bytes) from now on; returns a function that removes it. */
  onAudio(listener: (pcm16: Uint8Array, at: number) => void): () => void;
}

/** A handle and what feeds it: `feed` takes the client's events (any; it keeps its response's), `fail` ends it. */
export interface ResponseFeed {
  readonly handle: ResponseHandle;
  /** Binds the handle to the response `created` announces, if it is not bound yet. */
  bind(created: ServerEvent): void;
  /** Takes one delivered event; returns true when it was this response's `response.done`. */
  feed(event: ServerEvent, at: number): boolean;
  /** Rejects what is still pending with `error` (a done response stays done). */
  fail(error: Error): void;
}

const settled = <T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: Error) => void } => {
  let resolve: (v: T) => void = () => undefined;
  let reject: (e: Error) => void = () => undefined;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A handle nobody awaits must not crash the process with an unhandled rejection.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
};

/** What a response carried so far: its audio chunks (PCM16 bytes) at `rate` Hz, its transcripts and its text. */
interface ResponseContent {
  readonly chunks: Uint8Array[];
  /** Bytes of audio so far (2 per sample). */
  bytes: number;
  /** Hz: `sample_rate_hz` of the last audio delta; 24 000 before the first. */
  rate: number;
  /** ms, `performance.now()` clock. */
  firstAudioAt: number | null;
  /** The audio transcript's deltas joined. */
  transcript: string;
  /** `response.output_audio_transcript.done`'s transcript, once it came. */
  finalTranscript: string | null;
  text: string;
}

/** Audio received so far, ms. */
const audioMsOf = (content: ResponseContent): number => (content.bytes / 2 / content.rate) * 1000;

/**
 * Adds one streamed event of the response (an audio, audio transcript or text delta, or the transcript's done) to
 * `content`; returns the PCM16 chunk an audio delta carried, null for any other event.
 */
const accumulate = (content: ResponseContent, event: ServerEvent, at: number): Uint8Array | null => {
  switch (event.type) {
    case "response.output_audio.delta": {
      const pcm = Uint8Array.from(Buffer.from(String(event.delta), "base64"));
      content.rate = Number(event.sample_rate_hz ?? content.rate);
      content.firstAudioAt ??= at;
      content.chunks.push(pcm);
      content.bytes += pcm.length;
      return pcm;
    }
    case "response.output_audio_transcript.delta":
      content.transcript += String(event.delta ?? "");
      return null;
    case "response.output_audio_transcript.done":
      content.finalTranscript = typeof event.transcript === "string" ? event.transcript : null;
      return null;
    case "response.output_text.delta":
      content.text += String(event.delta ?? "");
      return null;
    default:
      return null;
  }
};

/** The whole response, once `done` (its `response.done`) arrived. */
const resultOf = (content: ResponseContent, responseId: string, done: ServerEvent): ResponseResult => {
  const r = (done.response ?? {}) as { status?: string; status_details?: unknown };
  return {
    responseId,
    status: String(r.status ?? ""),
    statusDetails: r.status_details ?? null,
    audio: Buffer.concat(content.chunks),
    sampleRateHz: content.rate,
    audioMs: audioMsOf(content),
    transcript: content.finalTranscript ?? content.transcript,
    text: content.text,
    doneEvent: done,
  };
};

/** A pending response handle (see ResponseHandle) and its feed. */
export const createResponseFeed = (): ResponseFeed => {
  const created = settled<ServerEvent>();
  const done = settled<ResponseResult>();
  const listeners = new Set<(pcm16: Uint8Array, at: number) => void>();
  let phase: ResponseHandle["phase"] = "pending";
  let responseId: string | null = null;
  const content: ResponseContent = {
    chunks: [],
    bytes: 0,
    rate: 24_000,
    firstAudioAt: null,
    transcript: "",
    finalTranscript: null,
    text: "",
  };

  const handle: ResponseHandle = {
    get phase() {
      return phase;
    },
    get responseId() {
      return responseId;
    },
    get audioMs() {
      return audioMsOf(content);
    },
    get sampleRateHz() {
      return content.rate;
    },
    get firstAudioAt() {
      return content.firstAudioAt;
    },
    created: created.promise,
    done: done.promise,
    audio: () => done.promise.then((r) => r.audio),
    transcript: () => done.promise.then((r) => r.transcript),
    text: () => done.promise.then((r) => r.text),
    onAudio: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };

  return {
    handle,
    bind: (event) => {
      if (phase !== "pending") return;
      phase = "streaming";
      responseId = String(event.response_id ?? (event.response as { id?: string } | undefined)?.id);
      created.resolve(event);
    },
    feed: (event, at) => {
      if (phase !== "streaming" || event.response_id !== responseId) return false;
      if (event.type === "response.done") {
        phase = "done";
        done.resolve(resultOf(content, responseId ?? "", event));
        return true;
      }
      const pcm = accumulate(content, event, at);
      if (pcm !== null) for (const listener of listeners) listener(pcm, at);
      return false;
    },
    fail: (error) => {
      if (phase === "done" || phase === "failed") return;
      created.reject(error);
      done.reject(error);
      phase = "failed";
    },
  };
};
