import { INCOMPLETE_REASONS, type IncompleteReason, type StageOutput } from "../../../domain/index.ts";
import { createResampler, pcm16FromBytes, pcm16ToBytes, type StreamResampler } from "../../audio/index.ts";
import type { PendingRespond, UpstreamTurns } from "./turns.ts";
import { type Json, obj, str } from "./wire-json.ts";

/** The rate the runner gives the engine (Hz). */
export const OUTPUT_RATE = 24000;

/** A function call as the upstream tells it, put together from every event that carries a part of it. */
interface CallParts {
  itemId: string | null;
  callId: string | null;
  name: string | null;
  arguments: string;
  /** The `.done` of its arguments came (or the item's `output_item.done`). */
  done: boolean;
  /** It went out as a `tool_call` output: later parts of it change nothing. */
  emitted: boolean;
}

/**
 * Translates the upstream's events into stage outputs (DESIGN.md, "Ports": ModelRunner), stamped with the epoch of
 * the response they belong to (`turns`), so that the decider drops what a barge-in cut:
 * - audio deltas are paired with the transcript delta that follows them (the contract pairs them one to one;
 *   transcript text that comes ahead of its audio, as OpenAI streams it, rides the next chunk), and resampled to
 *   24 kHz, continuously across chunks, when the upstream speaks at another rate;
 * - a function call is put together from every event that carries a part of it (`response.output_item.added` with
 *   its name and call id, the argument deltas, `response.function_call_arguments.done`, `output_item.done`, and
 *   `response.done.output`): both dialects name the function in the item only, in the wild;
 * - `response.done` ends the response: `completed`, `incomplete` with OpenAI's reason, `cancelled` (the upstream's own
 *   VAD heard the user) or `failed`;
 * - transcripts name our user item (`turns` maps the upstream's), and a commit the upstream refused is reported for
 *   its item (`input_transcript_failed`), so later transcripts keep to their own items.
 * Everything else (items, VAD, rate limits, acks) is this server's own to decide.
 * @throws Error from an event that cannot be used (audio at a rate that is no audio rate): the runner loses the stage.
 */
export const createInbound = (
  turns: UpstreamTurns,
  emit: (output: StageOutput) => void,
  send: (event: Json) => void,
): Inbound => {
  let pendingAudio: { audio: Uint8Array; epoch: number } | null = null;
  /**
   * Transcript text that came before its audio (an OpenAI server streams the two independently, often the text
   * first): it rides the next audio chunk, and what is left when the audio ends goes out on an empty chunk.
   */
  let transcriptAhead = "";
  /** The upstream's audio rate and a streaming resampler to 24 kHz (continuous across chunks), and an odd byte. */
  let fromUpstream: { rate: number; resampler: StreamResampler } | null = null;
  let oddByte: number | null = null;
  /** `response.create`s the upstream refused while it ended a response cancelled here: sent again after it. */
  const waiting: PendingRespond[] = [];
  /** The function calls of the response being answered, in the order the upstream announced them. */
  let calls: CallParts[] = [];

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

  const callFor = (parts: { itemId: string | null; callId: string | null }): CallParts => {
    const known = calls.find(
      (c) =>
        (parts.itemId !== null && c.itemId === parts.itemId) || (parts.callId !== null && c.callId === parts.callId),
    );
    if (known !== undefined) {
      known.itemId ??= parts.itemId;
      known.callId ??= parts.callId;
      return known;
    }
    const call: CallParts = { ...parts, name: null, arguments: "", done: false, emitted: false };
    calls.push(call);
    return call;
  };

  /**
   * Emits each call once, in the order the upstream announced them: the calls whose arguments are done and whose
   * name and call id are known, up to the first that is not (a later call that finished first waits for it); at the
   * end of the response (`all`), every call not emitted yet, whatever it has (a call that never got its name is the
   * malformed-call fallback).
   */
  const emitCalls = (stamp: number, all: boolean): void => {
    for (const call of calls) {
      if (call.emitted) continue;
      const ready = call.done && call.name !== null && call.callId !== null;
      if (!ready && !all) break;
      call.emitted = true;
      emit({ kind: "tool_call", epoch: stamp, callId: call.callId, name: call.name, arguments: call.arguments });
    }
  };

  /** Takes the parts of a function_call item (`output_item.added` / `.done`, `response.done.output`). */
  const functionCallItem = (item: Json, done: boolean): void => {
    const call = callFor({ itemId: str(item.id), callId: str(item.call_id) });
    if (call.emitted) return;
    call.name ??= str(item.name);
    const args = str(item.arguments);
    if (args !== null && args !== "") call.arguments = args;
    if (done) call.done = true;
  };

  const audioDelta = (type: string, event: Json): void => {
    flushAudio("");
    const rate = event.sample_rate_hz === undefined ? OUTPUT_RATE : event.sample_rate_hz;
    if (typeof rate !== "number" || !Number.isInteger(rate) || rate < 8000 || rate > 192000) {
      throw new Error(`${type} has sample_rate_hz ${JSON.stringify(rate)}: not an audio rate`);
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
    pendingAudio = { audio, epoch: turns.stamp() };
  };

  const responseDone = (event: Json): void => {
    const stamp = turns.stamp();
    endAudio(stamp);
    const response = obj(event.response);
    for (const item of Array.isArray(response?.output) ? response.output : []) {
      const o = obj(item);
      if (o?.type === "function_call") functionCallItem(o, true);
    }
    emitCalls(stamp, true);
    calls = [];
    const details = obj(response?.status_details);
    turns.responseEnded();
    // What waited for this (cancelled) response to end is asked again now.
    for (const respond of waiting.splice(0)) {
      turns.askedAgain(respond);
      send(respond.event);
    }
    const status = str(response?.status);
    const reason = str(details?.reason);
    if (status === "failed") {
      emit({
        kind: "failure",
        epoch: stamp,
        message: str(obj(details?.error)?.message) ?? "the upstream response failed",
      });
    } else if (status === "incomplete") {
      // OpenAI's reasons pass through; another is no status this server can show as incomplete.
      if ((INCOMPLETE_REASONS as readonly (string | null)[]).includes(reason)) {
        emit({ kind: "incomplete", epoch: stamp, reason: reason as IncompleteReason });
      } else {
        emit({
          kind: "failure",
          epoch: stamp,
          message: `the upstream ended the response incomplete (${reason ?? "no reason"})`,
        });
      }
    } else if (status === "cancelled") {
      // Cancelled upstream (its own VAD heard the user, say): ours is cancelled too, not completed.
      emit({ kind: "cancelled", epoch: stamp, reason: reason ?? "upstream_cancelled" });
    } else {
      emit({ kind: "end_of_turn", epoch: stamp });
    }
  };

  const onEvent = (event: Json): void => {
    const type = str(event.type) ?? "";
    switch (type) {
      case "error": {
        const error = obj(event.error);
        const refused = turns.refused(str(error?.event_id));
        const what = `${str(error?.code) ?? "error"}: ${str(error?.message) ?? ""}`;
        if (refused?.kind === "respond" && str(error?.code) === "response_already_active" && turns.windingDown()) {
          // The upstream still ends a response we cancelled (a cancel that overtook its response.created): this
          // one is asked again once that one is done.
          waiting.push(refused.respond);
          return;
        }
        if (refused?.kind === "respond") {
          emit({ kind: "failure", epoch: refused.epoch, message: `the upstream refused response.create: ${what}` });
        } else if (refused?.kind === "commit") {
          emit({
            kind: "input_transcript_failed",
            epoch: turns.epoch(),
            code: "upstream_commit_refused",
            message: `the upstream refused the commit of this item (${what}); it has no transcript`,
            ...(refused.itemId === undefined ? {} : { itemId: refused.itemId }),
          });
        }
        // Other refusals change nothing here: the upstream keeps its session, and this server decides what its
        // own client is told.
        return;
      }
      case "response.created": {
        const response = obj(event.response);
        const id = str(response?.id) ?? str(event.response_id) ?? "";
        // Asked in an epoch cancelled since: cancelled upstream now, and its events are dropped by their epoch.
        if (turns.responseCreated(id)) send({ type: "response.cancel", response_id: id });
        calls = [];
        return;
      }
      case "response.output_item.added":
      case "response.output_item.done": {
        const item = obj(event.item);
        if (item?.type === "message") turns.messageItem(str(item.id));
        if (item?.type === "function_call") {
          functionCallItem(item, type === "response.output_item.done");
          emitCalls(turns.stamp(), false);
        }
        return;
      }
      case "response.function_call_arguments.delta": {
        const call = callFor({ itemId: str(event.item_id), callId: str(event.call_id) });
        if (!call.done && !call.emitted) call.arguments += str(event.delta) ?? "";
        return;
      }
      case "response.function_call_arguments.done": {
        const call = callFor({ itemId: str(event.item_id), callId: str(event.call_id) });
        if (call.emitted) return;
        call.name ??= str(event.name);
        const args = str(event.arguments);
        if (args !== null) call.arguments = args;
        call.done = true;
        emitCalls(turns.stamp(), false);
        return;
      }
      case "duplex.function_call.done": {
        const raw = obj(event.event) ?? {};
        emit({
          kind: "tool_call",
          epoch: turns.stamp(),
          callId: null,
          name: null,
          arguments: str(raw.arguments) ?? "",
        });
        return;
      }
      case "response.speak":
        emit({ kind: "speak", epoch: turns.stamp() });
        return;
      case "response.output_audio.delta":
      case "response.audio.delta":
        audioDelta(type, event);
        return;
      case "response.output_audio_transcript.delta":
      case "response.audio_transcript.delta":
        if (pendingAudio !== null) flushAudio(str(event.delta) ?? "");
        else transcriptAhead += str(event.delta) ?? "";
        return;
      case "response.output_audio.done":
      case "response.audio.done":
        endAudio(turns.stamp());
        return;
      case "response.output_text.delta":
      case "response.text.delta":
        emit({ kind: "text", epoch: turns.stamp(), text: str(event.delta) ?? "" });
        return;
      case "input_audio_buffer.committed":
        turns.committed(str(event.item_id));
        return;
      case "conversation.item.input_audio_transcription.completed": {
        const itemId = turns.ourItem(str(event.item_id));
        emit({
          kind: "input_transcript",
          epoch: turns.epoch(),
          transcript: str(event.transcript) ?? "",
          ...(itemId === undefined ? {} : { itemId }),
        });
        return;
      }
      case "conversation.item.input_audio_transcription.failed": {
        const itemId = turns.ourItem(str(event.item_id));
        const error = obj(event.error);
        emit({
          kind: "input_transcript_failed",
          epoch: turns.epoch(),
          code: "transcription_failed",
          message: `the upstream could not transcribe this item: ${str(error?.code) ?? "error"}: ${str(error?.message) ?? ""}`,
          ...(itemId === undefined ? {} : { itemId }),
        });
        return;
      }
      case "response.listen": {
        const metadata = obj(obj(event.response)?.metadata);
        emit({ kind: "listen", epoch: turns.stamp(), reason: str(metadata?.reason) ?? "model_listen" });
        return;
      }
      case "response.done":
        responseDone(event);
        return;
      default:
        return;
    }
  };

  return {
    onEvent,
    abort() {
      pendingAudio = null;
    },
  };
};

/** The inbound side of an upstream session: `onEvent` for each event, `abort` when an epoch is cut. */
export interface Inbound {
  /** @throws Error from an event that cannot be used: the runner loses the stage. */
  onEvent(event: Json): void;
  /** Forgets the audio chunk waiting for its transcript: its epoch was aborted. */
  abort(): void;
}
