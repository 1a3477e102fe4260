import { createHash } from "node:crypto";
import { WebSocket } from "ws";
import {
  type Capabilities,
  type HistoryItem,
  inModelNativeLane,
  type RefAudioInput,
  type RunnerUnit,
  type SessionConfig,
  type StageLossCode,
  type StageOutput,
} from "../../domain/index.ts";
import type { ModelRunner, RunnerSession } from "../../engine/ports/index.ts";
import { createResampler, pcm16FromBytes, pcm16ToBytes, type StreamResampler } from "../audio/index.ts";

/**
 * Options of the `upstream` runner. `url` is the upstream's realtime endpoint (`ws:` or `wss:`); `apiKey` is sent
 * as `Authorization: Bearer` and never logged; `connectTimeoutMs` bounds the connection and the upstream's
 * `session.created`.
 */
export interface UpstreamRunnerOptions {
  readonly url: string;
  /**
   * `duplex`: a server of the duplex contract (reference/realtime-duplex-api.md; vLLM-Omni's `/v1/realtime?duplex=1`,
   * or this server): the model decides when to speak in the model-native lane. `openai`: any OpenAI
   * Realtime-compatible server (GA names, beta accepted): our turn lane maps onto its commit and `response.create`,
   * and it is sent 24 kHz pcm16.
   */
  readonly dialect: "duplex" | "openai";
  /** The model the upstream is asked for (`?model=` and `session.model`); default: the upstream's own. */
  readonly model?: string;
  readonly apiKey?: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** ms; default 5000. */
  readonly connectTimeoutMs?: number;
  /** How often a duplex upstream session is sent `session.heartbeat` (ms); default 10 000. */
  readonly heartbeatMs?: number;
  /** PEM certificates to trust for a `wss:` upstream besides the system's (a self-signed or private CA). */
  readonly ca?: string | Buffer;
  /**
   * openai dialect: who ends the user's turns. `ours` (default): our turn lane, our server VAD and commits drive
   * the upstream. `upstream`: the upstream's server VAD ends turns and answers by itself, which to our sessions is
   * the model-native lane (the model decides when to speak).
   */
  readonly vad?: "ours" | "upstream";
}

/** The rate the engine gives the runner (Hz): what Silero VAD runs at. */
const INPUT_RATE = 16000;
/** The rate the runner gives the engine (Hz). */
const OUTPUT_RATE = 24000;
/** What an OpenAI Realtime server takes as `pcm16` (Hz). */
const OPENAI_RATE = 24000;

type Json = Record<string, unknown>;

const str = (value: unknown): string | null => (typeof value === "string" ? value : null);
const obj = (value: unknown): Json | null =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : null;
const base64 = (bytes: Uint8Array): string =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");

/** A history item as an OpenAI item (for `response.input`). */
const itemJson = (item: HistoryItem): Json =>
  item.type === "function_call_output"
    ? { type: "function_call_output", call_id: item.callId, output: item.output }
    : item.type === "function_call"
      ? { type: "function_call", call_id: item.callId, name: item.name, arguments: item.arguments }
      : {
          type: "message",
          role: item.role,
          content: [{ type: item.role === "assistant" ? "output_text" : "input_text", text: item.text }],
        };

/**
 * The capabilities an upstream runner announces before any session exists: a model-native duplex server
 * (`duplex`) or a turn-based OpenAI server (`openai`). A deployment's `profile` replaces them with the real model's.
 */
export const upstreamCapabilities = (
  dialect: "duplex" | "openai",
  vad: "ours" | "upstream" = "ours",
): Capabilities => ({
  implementationLevel: dialect === "duplex" || vad === "upstream" ? "model_native_duplex" : "turn_based",
  chunkPeriodMs: 200,
  supportsBargeIn: true,
  supportsSessionResume: true,
  supportsAudioTruncate: true,
  supportsToolCalls: true,
  supportsVideo: dialect === "duplex",
  // An OpenAI server speaks at the session's `speed`; a duplex-contract model's rate is its own (a profile may say
  // otherwise).
  supportsSpeed: dialect === "openai",
  inputSampleRateHz: INPUT_RATE,
  outputSampleRateHz: OUTPUT_RATE,
});

/**
 * The `upstream` runner (DESIGN.md, "Ports": ModelRunner): drives a realtime model server over WebSocket, one
 * upstream socket per session, so the engine (log, replay, resume, conformance) sits in front of a model served
 * elsewhere. Units become client events of the upstream; the upstream's response events become stage outputs,
 * which the engine records before they take effect, so a session replays offline without the upstream.
 *
 * - Fencing: an upstream response is stamped with the epoch in force when it was created; `abort` cancels it
 *   upstream, and its late events keep their old epoch, so the decider drops them (the drop is in the log).
 * - Faults: a refused or timed-out connection, or an upstream session that ends, emit
 *   `stage_lost{upstream_unavailable}`; a frame that is not a JSON event, `stage_lost{upstream_protocol_error}`.
 *   The session ends with that code; other sessions have sockets of their own. A dropped socket of the duplex
 *   dialect is resumed first (the upstream session's token in memory only; `upstream_session` outputs put its
 *   SHA-256 in the log); only a failed resume loses the stage.
 * - Playback reports are forwarded (duplex: `playback.ack`; openai: a truncation as `conversation.item.truncate`),
 *   so the upstream's own history holds what the listener heard.
 * - Audio deltas are paired with the transcript delta that follows them (the contract pairs them one to one), and
 *   resampled to 24 kHz when the upstream speaks at another rate.
 */
export const createUpstreamRunner = (options: UpstreamRunnerOptions, capabilities?: Capabilities): ModelRunner => {
  const caps = capabilities ?? upstreamCapabilities(options.dialect, options.vad);
  const open = new Set<RunnerSession>();
  const connectTimeoutMs = options.connectTimeoutMs ?? 5000;

  const openSession = (_session: { config: SessionConfig }, emit: (output: StageOutput) => void): RunnerSession => {
    let epoch = 0;
    let closed = false;
    let lost = false;
    let ready = false;
    const outbox: string[] = [];
    /** The upstream response being answered: its id and the epoch its events are stamped with. */
    let active: { id: string; epoch: number } | null = null;
    let pendingAudio: { audio: Uint8Array; epoch: number } | null = null;
    let sentRefAudio: string | null = null;
    /**
     * Our responses and the upstream's: a response we asked for is the next one the upstream creates; one the model
     * started by itself is matched, in order, by the first playback report of a response of ours not yet matched.
     */
    const upstreamOf = new Map<string, { id: string; itemId: string | null }>();
    let askedFor: string | null = null;
    const unmatched: { id: string; itemId: string | null }[] = [];
    let lastCreated: { id: string; itemId: string | null } | null = null;
    /** The last response.create sent and not yet answered by response.created: a refusal of it fails our response. */
    let pendingRespond: { eventId: string; epoch: number } | null = null;
    let respondCount = 0;
    let lastCreateText: string | null = null;
    let awaitingResumeAck = false;
    /** Our user items by the upstream's (from its input_audio_buffer.committed), for transcripts. */
    const commits: string[] = [];
    const itemOf = new Map<string, string>();
    const toOpenAi: StreamResampler | null =
      options.dialect === "openai" ? createResampler(INPUT_RATE, OPENAI_RATE) : null;

    const url = new URL(options.url);
    if (options.model !== undefined && !url.searchParams.has("model")) url.searchParams.set("model", options.model);
    const headers: Record<string, string> = { ...options.headers };
    if (options.apiKey !== undefined) headers.Authorization = `Bearer ${options.apiKey}`;
    if (options.dialect === "openai") headers["OpenAI-Beta"] = headers["OpenAI-Beta"] ?? "realtime=v1";
    /** The upstream session (duplex dialect): its id and current resume token, in memory only. */
    let upstream: { id: string; token: string | null } | null = null;
    /** The highest `server_event_seq` received from the upstream: where a resume picks up. */
    let lastSeq = 0;
    let resuming = false;
    let socket: WebSocket;

    const loseStage = (code: StageLossCode, message: string): void => {
      if (lost || closed) return;
      lost = true;
      clearTimeout(readyTimer);
      if (keepalive !== null) clearInterval(keepalive);
      emit({ kind: "stage_lost", epoch, code, message });
      socket.terminate();
    };
    let readyTimer = setTimeout(
      () => loseStage("upstream_unavailable", `no session.created from ${url.origin} within ${connectTimeoutMs} ms`),
      connectTimeoutMs,
    );

    // A live session keeps its upstream session alive too (the upstream's idle TTL counts our silence otherwise).
    const keepalive =
      options.dialect === "duplex"
        ? setInterval(() => {
            if (ready && socket.readyState === WebSocket.OPEN) {
              socket.send(JSON.stringify({ type: "session.heartbeat" }));
            }
          }, options.heartbeatMs ?? 10_000)
        : null;
    keepalive?.unref();

    const send = (event: Json): void => {
      if (lost || closed) return;
      const text = JSON.stringify(event);
      if (ready && socket.readyState === WebSocket.OPEN) socket.send(text);
      else outbox.push(text);
    };

    /** The upstream session as the log keeps it: its id and the SHA-256 of its resume token. */
    const announce = (): void => {
      if (upstream === null) return;
      const sha = upstream.token === null ? null : createHash("sha256").update(upstream.token).digest("hex");
      emit({ kind: "upstream_session", epoch, sessionId: upstream.id, resumeTokenSha256: sha });
    };

    /**
     * After a drop, the duplex dialect resumes the upstream session on a new socket (reference, "Reconnect and
     * resume"): `session.resume` with the token and the last seq received; the upstream replays what was missed and
     * goes on, and this session never notices but for a pause. A failed resume loses the stage.
     */
    const resume = (why: string): void => {
      if (resuming || upstream?.token == null || options.dialect !== "duplex") {
        loseStage("upstream_unavailable", why);
        return;
      }
      resuming = true;
      ready = false;
      const { id, token } = upstream;
      clearTimeout(readyTimer);
      readyTimer = setTimeout(
        () => loseStage("upstream_unavailable", `${why}; no session.resumed within ${connectTimeoutMs} ms`),
        connectTimeoutMs,
      );
      const again = new URL(url);
      again.searchParams.set("autostart", "0");
      connect(again, () =>
        JSON.stringify({
          type: "session.resume",
          session_id: id,
          resume_token: token,
          last_received_server_event_seq: lastSeq,
        }),
      );
    };

    const connect = (target: URL, first: () => string | null): void => {
      const current = new WebSocket(target, {
        headers,
        handshakeTimeout: connectTimeoutMs,
        ...(options.ca === undefined ? {} : { ca: options.ca }),
      });
      socket = current;
      current.on("message", (data, isBinary) => {
        if (closed || lost || current !== socket) return;
        let event: unknown;
        try {
          event = isBinary ? null : JSON.parse(data.toString());
        } catch {
          event = null;
        }
        const parsed = obj(event);
        if (parsed === null || typeof parsed.type !== "string") {
          loseStage("upstream_protocol_error", "the upstream sent a frame that is not a JSON event with a type");
          return;
        }
        if (parsed.type === "error" && !ready) {
          const message = str(parsed.error) ?? str(obj(parsed.error)?.message) ?? "refused";
          loseStage("upstream_unavailable", `the upstream refused the session: ${message}`);
          return;
        }
        const seq = typeof parsed.server_event_seq === "number" ? parsed.server_event_seq : null;
        if (seq !== null) {
          // A replayed event this session already had (the contract replays only later ones; checked anyway).
          if (seq <= lastSeq) return;
          lastSeq = seq;
        }
        try {
          onEvent(parsed);
        } catch (error) {
          // Whatever an upstream event breaks here breaks only this session.
          loseStage(
            "upstream_protocol_error",
            `the upstream sent ${String(parsed.type)} that cannot be used: ${(error as Error).message}`,
          );
        }
      });
      current.on("unexpected-response", (_request, response) => {
        if (current === socket)
          loseStage("upstream_unavailable", `the upstream answered the upgrade with HTTP ${response.statusCode}`);
      });
      current.on("error", (error) => {
        if (current === socket && !ready)
          loseStage("upstream_unavailable", `cannot reach the upstream: ${error.message}`);
      });
      current.on("close", (code, reason) => {
        if (current !== socket || closed || lost) return;
        resume(`the upstream closed the connection (${code} ${reason.toString()})`.trim());
      });
      current.on("open", () => {
        const text = first();
        if (text !== null) current.send(text);
      });
    };

    /**
     * Transcript text that came before its audio (an OpenAI server streams the two independently, often the text
     * first): it rides the next audio chunk, and what is left when the audio ends goes out on an empty chunk.
     */
    let transcriptAhead = "";
    /** The upstream's audio rate and a streaming resampler to 24 kHz (continuous across chunks), and an odd byte. */
    let fromUpstream: { rate: number; resampler: StreamResampler } | null = null;
    let oddByte: number | null = null;
    const flushAudio = (transcript: string): void => {
      if (pendingAudio === null) return;
      emit({
        kind: "audio",
        epoch: pendingAudio.epoch,
        audio: pendingAudio.audio,
        transcript: transcriptAhead + transcript,
      });
      transcriptAhead = "";
      pendingAudio = null;
    };
    /** The end of a response's audio: the last chunk goes out with whatever text is left. */
    const endAudio = (stamp: number): void => {
      if (pendingAudio !== null) flushAudio("");
      else if (transcriptAhead !== "") {
        emit({ kind: "audio", epoch: stamp, audio: new Uint8Array(0), transcript: transcriptAhead });
        transcriptAhead = "";
      }
      oddByte = null;
    };
    const stampOf = (): number => active?.epoch ?? epoch;

    const onEvent = (event: Json): void => {
      const type = str(event.type) ?? "";
      switch (type) {
        case "session.created":
        case "session.resumed": {
          const session = obj(event.session);
          const id = str(session?.id) ?? str(event.session_id);
          if (id !== null) upstream = { id, token: str(event.resume_token) };
          announce();
          if (!ready) {
            ready = true;
            resuming = false;
            clearTimeout(readyTimer);
            for (const text of outbox.splice(0)) socket.send(text);
            // The upstream replays what it sent after our last seq before it answers a heartbeat: a response.create
            // still unanswered then was lost with the old socket, and is sent again.
            if (type === "session.resumed") {
              awaitingResumeAck = true;
              socket.send(JSON.stringify({ type: "session.heartbeat" }));
            }
          }
          return;
        }
        case "session.heartbeat_ack":
          if (awaitingResumeAck && pendingRespond !== null && lastCreateText !== null) socket.send(lastCreateText);
          awaitingResumeAck = false;
          return;
        case "error": {
          // An upstream refusal of the response we asked for fails that response; other refusals change nothing
          // here (the upstream keeps its session, and this server decides what its own client is told).
          const error = obj(event.error);
          if (pendingRespond !== null && str(error?.event_id) === pendingRespond.eventId) {
            const message = `the upstream refused response.create: ${str(error?.code) ?? "error"}: ${str(error?.message) ?? ""}`;
            emit({ kind: "failure", epoch: pendingRespond.epoch, message });
            pendingRespond = null;
            askedFor = null;
          }
          return;
        }
        case "response.created": {
          const response = obj(event.response);
          // A response we asked for belongs to the epoch we asked in: cancelled since, it is cancelled upstream now
          // and its events are dropped (BEHAVIOUR.md: a cancel before response.created still cancels it).
          active = { id: str(response?.id) ?? str(event.response_id) ?? "", epoch: pendingRespond?.epoch ?? epoch };
          pendingRespond = null;
          if (active.epoch < epoch) send({ type: "response.cancel", response_id: active.id });
          lastCreated = { id: active.id, itemId: null };
          if (askedFor !== null) upstreamOf.set(askedFor, lastCreated);
          else unmatched.push(lastCreated);
          askedFor = null;
          return;
        }
        case "response.output_item.added": {
          const item = obj(event.item);
          if (lastCreated !== null && lastCreated.itemId === null && item?.type === "message") {
            lastCreated.itemId = str(item.id);
          }
          return;
        }
        case "response.speak":
          emit({ kind: "speak", epoch: stampOf() });
          return;
        case "response.output_audio.delta":
        case "response.audio.delta": {
          flushAudio("");
          const rate = event.sample_rate_hz === undefined ? OUTPUT_RATE : event.sample_rate_hz;
          if (typeof rate !== "number" || !Number.isInteger(rate) || rate < 8000 || rate > 192000) {
            loseStage(
              "upstream_protocol_error",
              `${type} has sample_rate_hz ${JSON.stringify(rate)}: not an audio rate`,
            );
            return;
          }
          let bytes = Uint8Array.from(Buffer.from(str(event.delta) ?? "", "base64"));
          // A sample split across two deltas is joined, not refused.
          if (oddByte !== null) bytes = Uint8Array.from([oddByte, ...bytes]);
          oddByte = bytes.byteLength % 2 === 1 ? (bytes[bytes.byteLength - 1] ?? 0) : null;
          if (oddByte !== null) bytes = bytes.subarray(0, bytes.byteLength - 1);
          if (rate !== OUTPUT_RATE && fromUpstream?.rate !== rate) {
            fromUpstream = { rate, resampler: createResampler(rate, OUTPUT_RATE) };
          }
          const audio =
            rate === OUTPUT_RATE
              ? bytes
              : pcm16ToBytes(fromUpstream?.resampler.push(pcm16FromBytes(bytes)) ?? new Int16Array(0));
          pendingAudio = { audio, epoch: stampOf() };
          return;
        }
        case "response.output_audio_transcript.delta":
        case "response.audio_transcript.delta":
          if (pendingAudio !== null) flushAudio(str(event.delta) ?? "");
          else transcriptAhead += str(event.delta) ?? "";
          return;
        case "response.output_audio.done":
        case "response.audio.done":
          endAudio(stampOf());
          return;
        case "response.output_text.delta":
        case "response.text.delta":
          emit({ kind: "text", epoch: stampOf(), text: str(event.delta) ?? "" });
          return;
        case "response.function_call_arguments.done":
          emit({
            kind: "tool_call",
            epoch: stampOf(),
            callId: str(event.call_id),
            name: str(event.name),
            arguments: str(event.arguments) ?? "",
          });
          return;
        case "duplex.function_call.done": {
          const raw = obj(event.event) ?? {};
          emit({ kind: "tool_call", epoch: stampOf(), callId: null, name: null, arguments: str(raw.arguments) ?? "" });
          return;
        }
        case "input_audio_buffer.committed": {
          // The upstream's item for our next commit: its transcript will name it.
          const ours = commits.shift();
          const theirs = str(event.item_id);
          if (ours !== undefined && theirs !== null) itemOf.set(theirs, ours);
          return;
        }
        case "conversation.item.input_audio_transcription.completed": {
          const itemId = itemOf.get(str(event.item_id) ?? "");
          emit({
            kind: "input_transcript",
            epoch,
            transcript: str(event.transcript) ?? "",
            ...(itemId === undefined ? {} : { itemId }),
          });
          return;
        }
        case "response.listen": {
          const metadata = obj(obj(event.response)?.metadata);
          emit({ kind: "listen", epoch: stampOf(), reason: str(metadata?.reason) ?? "model_listen" });
          return;
        }
        case "response.done": {
          const stamp = stampOf();
          endAudio(stamp);
          const response = obj(event.response);
          const details = obj(response?.status_details);
          active = null;
          if (response?.status === "failed") {
            const message = str(obj(details?.error)?.message) ?? "the upstream response failed";
            emit({ kind: "failure", epoch: stamp, message });
          } else if (response?.status === "cancelled" || response?.status === "incomplete") {
            // Cancelled upstream (its own VAD heard the user, say): ours is cancelled too, not completed.
            emit({ kind: "cancelled", epoch: stamp, reason: str(details?.reason) ?? "upstream_cancelled" });
          } else {
            emit({ kind: "end_of_turn", epoch: stamp });
          }
          return;
        }
        case "session.expired":
        case "session.closed":
          loseStage("upstream_unavailable", `the upstream session ended (${str(event.reason) ?? type})`);
          return;
        default:
          // Everything else (items, VAD, rate limits, acks, heartbeats) is this server's own to decide.
          return;
      }
    };

    // The session's first session.update (queued by `configure`) opens a duplex upstream session, which answers
    // with session.created (an OpenAI server sends session.created at once); everything else waits for it.
    connect(url, () => (outbox[0]?.startsWith('{"type":"session.update"') ? (outbox.shift() ?? null) : null));

    const sessionFields = (config: SessionConfig, refAudio: RefAudioInput | null): Json => {
      const fields: Json = {
        instructions: config.instructions,
        output_modalities: config.outputModalities,
        modalities: config.outputModalities,
        tools: config.tools.map((t) => ({ ...t })),
        tool_choice: config.toolChoice,
        max_response_output_tokens: config.maxResponseOutputTokens,
        input_audio_format: "pcm16",
        output_audio_format: "pcm16",
        // The upstream's own VAD ends turns only where it was chosen to, and only in our model-native lane.
        turn_detection:
          options.dialect === "openai" && options.vad === "upstream" && inModelNativeLane(config)
            ? { type: "server_vad", create_response: true, interrupt_response: true }
            : null,
      };
      if (options.model !== undefined) fields.model = options.model;
      if (config.voice !== null) fields.voice = config.voice;
      if (config.temperature !== null) fields.temperature = config.temperature;
      if (config.speed !== 1) fields.speed = config.speed;
      if (options.dialect === "duplex") {
        fields.input_sample_rate_hz = INPUT_RATE;
        // The upstream answers by itself only in our model-native lane; in our turn lane commits and
        // response.create drive it, as they drive us.
        fields.extra_body = { auto_response: inModelNativeLane(config) };
        if (refAudio !== null && refAudio.sha256 !== sentRefAudio) {
          fields.ref_audio = `data:${refAudio.mimeType};base64,${base64(refAudio.audio)}`;
          sentRefAudio = refAudio.sha256;
        }
      }
      return fields;
    };

    const respond = (unit: Extract<RunnerUnit, { kind: "respond" }>): Json => ({
      type: "response.create",
      response: {
        modalities: unit.modalities,
        output_modalities: unit.modalities,
        conversation: unit.conversation,
        tools: unit.tools.map((t) => ({ ...t })),
        tool_choice: unit.toolChoice,
        max_output_tokens: unit.maxOutputTokens,
        ...(unit.instructions === null ? {} : { instructions: unit.instructions }),
        ...(unit.temperature === null ? {} : { temperature: unit.temperature }),
        ...(unit.metadata === null ? {} : { metadata: unit.metadata }),
        ...(unit.input === null ? {} : { input: unit.input.map(itemJson) }),
      },
    });

    const runnerSession: RunnerSession = {
      submit(unit) {
        if (closed || lost || unit.epoch < epoch) return;
        if (unit.epoch > epoch) runnerSession.abort(unit.epoch);
        switch (unit.kind) {
          case "append": {
            const samples = pcm16FromBytes(unit.audio);
            const audio = toOpenAi === null ? unit.audio : pcm16ToBytes(toOpenAi.push(samples));
            send({
              type: "input_audio_buffer.append",
              audio: base64(audio),
              ...(options.dialect === "duplex" ? { sample_rate_hz: INPUT_RATE } : {}),
              ...(unit.videoFrames === undefined ? {} : { video_frames: unit.videoFrames.map(base64) }),
            });
            return;
          }
          case "commit":
            if (unit.itemId !== undefined) commits.push(unit.itemId);
            send({ type: "input_audio_buffer.commit" });
            return;
          case "respond":
            askedFor = unit.responseId;
            respondCount += 1;
            pendingRespond = { eventId: `evt_respond_${respondCount}`, epoch: unit.epoch };
            lastCreateText = JSON.stringify({ ...respond(unit), event_id: pendingRespond.eventId });
            send({ ...respond(unit), event_id: pendingRespond.eventId });
            return;
          case "playback": {
            // Forwarded so the upstream's history holds what was heard (reference, "Playback").
            const upstreamResponse =
              upstreamOf.get(unit.responseId) ??
              (() => {
                const next = unmatched.shift();
                if (next !== undefined) upstreamOf.set(unit.responseId, next);
                return next;
              })();
            if (upstreamResponse === undefined) return;
            if (options.dialect === "duplex") {
              send({
                type: "playback.ack",
                response_id: upstreamResponse.id,
                played_ms: Math.floor(unit.playedMs),
                committed_ms: Math.floor(unit.committedMs),
                truncate: unit.truncate,
              });
            } else if (unit.truncate && upstreamResponse.itemId !== null) {
              send({
                type: "conversation.item.truncate",
                item_id: upstreamResponse.itemId,
                content_index: 0,
                audio_end_ms: Math.floor(unit.committedMs),
              });
            }
            return;
          }
          case "text":
            send(
              options.dialect === "duplex"
                ? { type: "input.text.append", text: unit.text }
                : {
                    type: "conversation.item.create",
                    item: { type: "message", role: "user", content: [{ type: "input_text", text: unit.text }] },
                  },
            );
            return;
          case "clear":
            send({ type: "input_audio_buffer.clear" });
            return;
          case "function_call_output":
            send({
              type: "conversation.item.create",
              item: { type: "function_call_output", call_id: unit.callId, output: unit.output },
            });
            return;
          default: {
            const unhandled: never = unit;
            throw new Error(`upstream runner: unhandled unit ${JSON.stringify(unhandled)}`);
          }
        }
      },
      abort(newEpoch) {
        if (newEpoch <= epoch) return;
        epoch = newEpoch;
        pendingAudio = null;
        if (active !== null && active.epoch < newEpoch) {
          send({ type: "response.cancel", response_id: active.id });
        }
      },
      configure(config, refAudio) {
        send({ type: "session.update", session: sessionFields(config, refAudio) });
      },
      async close() {
        if (closed) return;
        closed = true;
        clearTimeout(readyTimer);
        if (keepalive !== null) clearInterval(keepalive);
        open.delete(runnerSession);
        if (socket.readyState === WebSocket.OPEN) {
          socket.send(JSON.stringify({ type: "session.close" }));
          socket.close(1000, "session closed");
        } else socket.terminate();
      },
    };
    open.add(runnerSession);
    return runnerSession;
  };

  return {
    name: options.model ?? `upstream:${new URL(options.url).host}`,
    capabilities: caps,
    open: openSession,
    async close() {
      await Promise.all([...open].map((s) => s.close()));
    },
  };
};
