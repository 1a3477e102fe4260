import { randomBytes } from "node:crypto";
import type { FastifyReply } from "fastify";
import type { Logger } from "pino";
import { DEFAULT_INPUT_RATE_HZ, type ErrorCode } from "../domain/index.ts";
import type { SessionHost, SessionSink } from "../engine/index.ts";
import { encodeWav, pcm16FromBytes } from "../infra/audio/index.ts";
import { decodeClientFrame } from "../protocol/index.ts";
import { ANSWER_AUDIO_TTL_S, audioIdOf } from "./chat-audio-id.ts";
import { ChatError, statusOf } from "./chat-error.ts";
import { type ChatRequest, OUTPUT_RATE_HZ } from "./chat-request.ts";

/** What one response of the session produced, as its events arrive. */
interface Collected {
  responseId: string | null;
  text: string;
  transcript: string;
  audio: Buffer[];
  calls: { id: string; name: string; arguments: string }[];
  done: Record<string, unknown> | null;
}

type Event = Record<string, unknown> & { type: string };

/** The tool ledger's refusals of a call the model made (tool-ledger.ts): told, never delivered, no request's fault. */
const MODEL_CALL_REFUSALS: ReadonlySet<ErrorCode> = new Set(["duplicate_function_call", "invalid_function_call"]);

const usageOf = (done: Record<string, unknown> | null) => {
  const usage = (done?.usage ?? null) as { input_tokens?: number; output_tokens?: number } | null;
  const prompt = usage?.input_tokens ?? 0;
  const completion = usage?.output_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
};

/**
 * The text of a response: its text, or when it has none the transcript of what it spoke. A model asked for text
 * alone (`modalities: ["text"]`) that can only speak is answered with its words, never with `content: ""`.
 */
const wordsOf = (c: Collected): string => (c.text !== "" ? c.text : c.transcript);

const finishReasonOf = (c: Collected): string => {
  const details = (c.done?.status_details ?? null) as { reason?: string } | null;
  if (c.done?.status === "incomplete") return details?.reason === "content_filter" ? "content_filter" : "length";
  return c.calls.length > 0 ? "tool_calls" : "stop";
};

/**
 * One `POST /v1/chat/completions` request on its session (chat-completions.ts): plays the request's frames into
 * the session, collects the one response's events (streamed as `chat.completion.chunk`s with `stream: true`), closes
 * the session on every path, and answers a `chat.completion`, the stream's end, or the error's envelope (the
 * statuses of chat-completions.ts).
 */
export class ChatAnswer {
  private readonly collected: Collected = {
    responseId: null,
    text: "",
    transcript: "",
    audio: [],
    calls: [],
    done: null,
  };
  private readonly completionId = `chatcmpl-${randomBytes(12).toString("base64url")}`;
  /** s since the Unix epoch. */
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly stream: boolean;
  private readonly audioOut: boolean;
  /** The event stream's head was written (the reply is hijacked). */
  private started = false;
  private settled = false;
  private settle: (outcome: ChatError | null) => void = () => undefined;
  private readonly outcome: Promise<ChatError | null>;

  constructor(
    private readonly host: SessionHost,
    private readonly body: ChatRequest,
    private readonly reply: FastifyReply,
    private readonly model: string,
    private readonly log: Logger,
  ) {
    this.stream = body.stream === true;
    this.audioOut = body.modalities?.includes("audio") === true;
    this.outcome = new Promise<ChatError | null>((resolve) => {
      this.settle = (value) => {
        this.settled = true;
        resolve(value);
      };
    });
  }

  /**
   * Plays `frames` into the session and waits for its response (or an error, the client going away, or `timeoutMs`:
   * 504), closes the session, and answers.
   */
  async run(frames: readonly Record<string, unknown>[], timeoutMs: number): Promise<FastifyReply> {
    this.host.attach(this.sink());
    const played = this.play(frames);
    // A frame the session could not take (its log failed) ends the request; the session is still closed below.
    played.catch((error: unknown) =>
      this.settle(new ChatError(500, "internal_error", `the request could not be played: ${(error as Error).message}`)),
    );
    const timer = setTimeout(
      () => this.settle(new ChatError(504, "response_timeout", `no response within ${timeoutMs} ms`)),
      timeoutMs,
    );
    // A client that goes away mid-stream: the response is cancelled and the session closed (below).
    const raw = this.reply.raw;
    raw.once("close", () => {
      if (!raw.writableFinished) this.settle(new ChatError(499, "session_closed", "the client closed the request"));
    });
    const failure = await this.outcome;
    clearTimeout(timer);
    // The session is closed (and its close logged) before the answer ends: a request holds no slot after it.
    await played.catch(() => undefined);
    await this.closeSession();
    this.log.debug(
      { sessionId: this.host.sessionId, stream: this.stream, failed: failure?.code ?? null },
      "chat completion",
    );
    if (failure === null) return this.answer();
    if (!this.started) return this.reply.code(failure.status).send(failure.body());
    this.write(failure.body());
    raw.end();
    return this.reply;
  }

  /**
   * One frame after the other: a long audio message never has more than one append waiting (the input limits). A
   * refused frame ends the request: nothing after it is sent (no response runs for a refused session.update).
   */
  private async play(frames: readonly Record<string, unknown>[]): Promise<void> {
    for (const frame of frames) {
      if (this.settled) return;
      const text = JSON.stringify(frame);
      const bytes = Buffer.byteLength(text);
      await this.host.submit(
        (config) =>
          decodeClientFrame(text, bytes, { inputRateHz: config.inputAudio.rate, inputAudio: config.inputAudio }),
        { bytes, turn: frame.type === "input_audio_buffer.commit" },
      );
    }
  }

  /** Cancels a response still running, and closes the session. */
  private async closeSession(): Promise<void> {
    const c = this.collected;
    const frames =
      c.done === null && c.responseId !== null
        ? [{ type: "response.cancel" }, { type: "session.close" }]
        : [{ type: "session.close" }];
    for (const frame of frames) {
      const text = JSON.stringify(frame);
      await this.host.submit(decodeClientFrame(text, text.length, { inputRateHz: DEFAULT_INPUT_RATE_HZ }));
    }
  }

  /** The session's socket side: its server events, and how it ends. */
  private sink(): SessionSink {
    return {
      send: (json) => this.onEvent(JSON.parse(json) as Event),
      replaced: () => undefined,
      failed: (code, message) => this.settle(new ChatError(500, code, message)),
      ended: (_lastType, reason) => {
        if (this.collected.done === null)
          this.settle(
            new ChatError(
              500,
              "runtime_data_plane_stream_failed",
              `the session ended (${reason ?? "closed"}) before the response was done`,
            ),
          );
      },
    };
  }

  private chunk(delta: Record<string, unknown>, finish: string | null = null) {
    return {
      id: this.completionId,
      object: "chat.completion.chunk",
      created: this.created,
      model: this.model,
      system_fingerprint: null,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    };
  }

  private write(data: unknown): void {
    if (!this.reply.raw.writableEnded) this.reply.raw.write(`data: ${JSON.stringify(data)}\n\n`);
  }

  private startStream(): void {
    if (this.started) return;
    this.started = true;
    this.reply.hijack();
    this.reply.raw.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-duplex-session-id": this.host.sessionId,
    });
    this.write(this.chunk({ role: "assistant", content: "", refusal: null }));
  }

  private audioId(): string {
    return audioIdOf(this.host.sessionId, this.collected.responseId ?? "");
  }

  private onEvent(event: Event): void {
    const c = this.collected;
    switch (event.type) {
      case "error": {
        const error = event.error as { code?: ErrorCode; message?: string; param?: string | null };
        const code = error.code ?? "internal_error";
        // A call of the model's that the tool ledger refused was never delivered: the answer goes on without it.
        if (MODEL_CALL_REFUSALS.has(code) && (event.error as { event_id?: unknown }).event_id == null) return;
        this.settle(new ChatError(statusOf(code), code, error.message ?? code, error.param ?? null));
        return;
      }
      case "response.created":
        c.responseId = String((event.response as { id?: string }).id ?? "");
        if (this.stream) this.startStream();
        return;
      case "response.output_text.delta":
        c.text += String(event.delta);
        if (this.stream) this.write(this.chunk({ content: String(event.delta) }));
        return;
      case "response.output_audio_transcript.delta":
        c.transcript += String(event.delta);
        if (!this.stream) return;
        if (this.audioOut) this.write(this.chunk({ audio: { id: this.audioId(), transcript: String(event.delta) } }));
        // A model that spoke when text alone was asked: its words are the text (see `wordsOf`).
        else if (c.text === "") this.write(this.chunk({ content: String(event.delta) }));
        return;
      case "response.output_audio.delta":
        c.audio.push(Buffer.from(String(event.delta), "base64"));
        if (this.stream && this.audioOut)
          this.write(this.chunk({ audio: { id: this.audioId(), data: String(event.delta) } }));
        return;
      case "response.output_item.added":
        this.onItemAdded(event.item as { type?: string; call_id?: string; name?: string });
        return;
      case "response.function_call_arguments.delta": {
        const index = c.calls.findIndex((call) => call.id === event.call_id);
        const call = c.calls[index];
        if (call === undefined) return;
        call.arguments += String(event.delta);
        if (this.stream)
          this.write(this.chunk({ tool_calls: [{ index, function: { arguments: String(event.delta) } }] }));
        return;
      }
      case "response.done":
        this.onDone(event.response as Record<string, unknown>);
        return;
      default:
    }
  }

  /** A function call the response started: collected, and streamed as a tool call. */
  private onItemAdded(item: { type?: string; call_id?: string; name?: string }): void {
    if (item.type !== "function_call") return;
    const index = this.collected.calls.length;
    this.collected.calls.push({ id: item.call_id ?? "", name: item.name ?? "", arguments: "" });
    if (this.stream)
      this.write(
        this.chunk({
          tool_calls: [{ index, id: item.call_id, type: "function", function: { name: item.name, arguments: "" } }],
        }),
      );
  }

  /** The response is done: its output is the record (a call announced only there is still answered). */
  private onDone(response: Record<string, unknown>): void {
    const c = this.collected;
    c.done = response;
    for (const item of (response.output ?? []) as {
      type?: string;
      call_id?: string;
      name?: string;
      arguments?: string;
    }[]) {
      if (item.type !== "function_call") continue;
      const known = c.calls.find((call) => call.id === item.call_id);
      if (known === undefined)
        c.calls.push({ id: item.call_id ?? "", name: item.name ?? "", arguments: item.arguments ?? "" });
      else if (item.arguments !== undefined) known.arguments = item.arguments;
    }
    if (response.status === "failed") {
      const error = (response.status_details as { error?: { code?: ErrorCode; message?: string } } | null)?.error;
      const code = error?.code ?? "internal_error";
      this.settle(new ChatError(500, code, error?.message ?? "the response failed"));
      return;
    }
    this.settle(null);
  }

  /** The answer of a response that was done: the stream's last chunks, or the `chat.completion`. */
  private answer(): FastifyReply {
    const c = this.collected;
    // The model spoke though text alone was asked: answered with its words, and told to the operator.
    if (!this.audioOut && c.audio.length > 0)
      this.log.warn({ sessionId: this.host.sessionId, audioDeltas: c.audio.length }, "text chat completion spoken");
    const finish = finishReasonOf(c);
    const usage = usageOf(c.done);
    if (this.stream) {
      this.write(this.chunk({}, finish));
      if (this.body.stream_options?.include_usage === true)
        this.write({
          id: this.completionId,
          object: "chat.completion.chunk",
          created: this.created,
          model: this.model,
          choices: [],
          usage,
        });
      this.reply.raw.write("data: [DONE]\n\n");
      this.reply.raw.end();
      return this.reply;
    }
    const words = wordsOf(c);
    return this.reply.send({
      id: this.completionId,
      object: "chat.completion",
      created: this.created,
      model: this.model,
      system_fingerprint: null,
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            // Only tool calls, or audio (whose words are its transcript): no text content, as OpenAI answers.
            content: this.audioOut || (words === "" && c.calls.length > 0) ? null : words,
            refusal: null,
            ...(this.audioOut ? { audio: this.audio() } : {}),
            ...(c.calls.length === 0
              ? {}
              : {
                  tool_calls: c.calls.map((call) => ({
                    id: call.id,
                    type: "function",
                    function: { name: call.name, arguments: call.arguments },
                  })),
                }),
          },
          logprobs: null,
          finish_reason: finish,
        },
      ],
      usage,
    });
  }

  /** The spoken answer: its id, its audio (`wav`, or raw 24 kHz PCM16), its expiry (s since the epoch), its words. */
  private audio() {
    const pcm = Buffer.concat(this.collected.audio);
    const data = this.body.audio?.format === "wav" ? Buffer.from(encodeWav(pcm16FromBytes(pcm), OUTPUT_RATE_HZ)) : pcm;
    return {
      id: this.audioId(),
      data: data.toString("base64"),
      // At most the id's own expiry, counted from the response's end (chat-audio-id.ts).
      expires_at: this.created + ANSWER_AUDIO_TTL_S,
      transcript: this.collected.transcript,
    };
  }
}
