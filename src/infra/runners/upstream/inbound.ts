import { INCOMPLETE_REASONS, type IncompleteReason, type StageOutput } from "../../../domain/index.ts";
import { createInboundAudio, type InboundAudio } from "./inbound-audio.ts";
import { createInboundCalls, type InboundCalls } from "./inbound-calls.ts";
import type { PendingRespond, UpstreamTurns } from "./turns.ts";
import { type Json, obj, str } from "./wire-json.ts";

export { OUTPUT_RATE } from "./inbound-audio.ts";

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
  const audio = createInboundAudio(emit);
  const calls = createInboundCalls(emit);
  /** `response.create`s the upstream refused while it ended a response cancelled here: sent again after it. */
  const waiting: PendingRespond[] = [];

  const responseDone = (event: Json): void => {
    const stamp = turns.stamp();
    audio.end(stamp);
    const response = obj(event.response);
    for (const item of Array.isArray(response?.output) ? response.output : []) {
      const o = obj(item);
      if (o?.type === "function_call") calls.item(o, true);
    }
    calls.emit(stamp, true);
    calls.reset();
    turns.responseEnded();
    // What waited for this (cancelled) response to end is asked again now.
    for (const respond of waiting.splice(0)) {
      turns.askedAgain(respond);
      send(respond.event);
    }
    emit(responseEnd(response, stamp));
  };

  /** An `error` that echoed one of our requests: a refused `response.create` fails its response, a commit its item. */
  const refusal = (event: Json): void => {
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
      // The reference's own code for an aborted commit reaches the client as it is; any other refusal is ours.
      const aborted = str(error?.code) === "commit_aborted";
      emit({
        kind: "input_transcript_failed",
        epoch: turns.epoch(),
        code: aborted ? "commit_aborted" : "upstream_commit_refused",
        message: aborted
          ? `the model server aborted the commit of this item (${what}); it has no transcript`
          : `the upstream refused the commit of this item (${what}); it has no transcript`,
        ...(refused.itemId === undefined ? {} : { itemId: refused.itemId }),
      });
    }
    // Other refusals change nothing here: the upstream keeps its session, and this server decides what its
    // own client is told.
  };

  /** `response.created`: one asked in an epoch cancelled since is cancelled upstream now (its events are dropped). */
  const responseCreated = (event: Json): void => {
    const response = obj(event.response);
    const id = str(response?.id) ?? str(event.response_id) ?? "";
    if (turns.responseCreated(id)) send({ type: "response.cancel", response_id: id });
    calls.reset();
  };

  /** A response's output item: its message item (for playback reports) or a function call's parts. */
  const outputItem = (type: string, event: Json): void => {
    const item = obj(event.item);
    if (item?.type === "message") turns.messageItem(str(item.id));
    if (item?.type === "function_call") {
      calls.item(item, type === "response.output_item.done");
      calls.emit(turns.stamp(), false);
    }
  };

  const steps: InboundSteps = { turns, emit, audio, calls, responseDone, refusal, responseCreated, outputItem };
  return { onEvent: (event) => onInboundEvent(steps, event), abort: () => audio.abort() };
};

/** What the routing of one event calls: the session's parts and the steps of createInbound that keep its state. */
interface InboundSteps {
  readonly turns: UpstreamTurns;
  readonly emit: (output: StageOutput) => void;
  readonly audio: InboundAudio;
  readonly calls: InboundCalls;
  readonly responseDone: (event: Json) => void;
  readonly refusal: (event: Json) => void;
  readonly responseCreated: (event: Json) => void;
  readonly outputItem: (type: string, event: Json) => void;
}

/** Routes one upstream event (after the link took its seq) by its type; a type not listed is not ours to decide. */
const onInboundEvent = (steps: InboundSteps, event: Json): void => {
  const { turns, emit, audio, calls } = steps;
  const type = str(event.type) ?? "";
  switch (type) {
    case "error":
      steps.refusal(event);
      return;
    case "response.created":
      steps.responseCreated(event);
      return;
    case "response.output_item.added":
    case "response.output_item.done":
      steps.outputItem(type, event);
      return;
    case "response.function_call_arguments.delta":
      calls.argumentsDelta(event);
      return;
    case "response.function_call_arguments.done":
      if (calls.argumentsDone(event)) calls.emit(turns.stamp(), false);
      return;
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
      audio.delta(type, event, turns.stamp());
      return;
    case "response.output_audio_transcript.delta":
    case "response.audio_transcript.delta":
      audio.transcript(str(event.delta) ?? "");
      return;
    case "response.output_audio.done":
    case "response.audio.done":
      audio.end(turns.stamp());
      return;
    case "response.output_text.delta":
    case "response.text.delta":
      emit({ kind: "text", epoch: turns.stamp(), text: str(event.delta) ?? "" });
      return;
    case "input_audio_buffer.committed":
      turns.committed(str(event.item_id));
      return;
    case "conversation.item.input_audio_transcription.completed":
    case "conversation.item.input_audio_transcription.failed":
      emit(transcriptionOutput(event, turns.ourItem(str(event.item_id)), turns.epoch()));
      return;
    case "response.listen": {
      const metadata = obj(obj(event.response)?.metadata);
      emit({ kind: "listen", epoch: turns.stamp(), reason: str(metadata?.reason) ?? "model_listen" });
      return;
    }
    case "response.done":
      steps.responseDone(event);
      return;
    default:
      return;
  }
};

/**
 * How a `response.done` ends our response, stamped `stamp`: `failed` is a `failure`; `incomplete` with one of OpenAI's
 * reasons is `incomplete` (another reason, a `failure`); `cancelled` (the upstream's own VAD heard the user, say) is
 * `cancelled`; anything else completed it (`end_of_turn`).
 */
const responseEnd = (response: Json | null, stamp: number): StageOutput => {
  const details = obj(response?.status_details);
  const status = str(response?.status);
  const reason = str(details?.reason);
  if (status === "failed") {
    return {
      kind: "failure",
      epoch: stamp,
      message: str(obj(details?.error)?.message) ?? "the upstream response failed",
    };
  }
  if (status === "incomplete") {
    // OpenAI's reasons pass through; another is no status this server can show as incomplete.
    return (INCOMPLETE_REASONS as readonly (string | null)[]).includes(reason)
      ? { kind: "incomplete", epoch: stamp, reason: reason as IncompleteReason }
      : {
          kind: "failure",
          epoch: stamp,
          message: `the upstream ended the response incomplete (${reason ?? "no reason"})`,
        };
  }
  // Cancelled upstream (its own VAD heard the user, say): ours is cancelled too, not completed.
  if (status === "cancelled") return { kind: "cancelled", epoch: stamp, reason: reason ?? "upstream_cancelled" };
  return { kind: "end_of_turn", epoch: stamp };
};

/**
 * A user item's transcription (`conversation.item.input_audio_transcription.completed` or `.failed`) as a stage
 * output of `epoch`, naming our item `itemId` when one of our commits made it.
 */
const transcriptionOutput = (event: Json, itemId: string | undefined, epoch: number): StageOutput => {
  const ours = itemId === undefined ? {} : { itemId };
  if (event.type === "conversation.item.input_audio_transcription.completed") {
    return { kind: "input_transcript", epoch, transcript: str(event.transcript) ?? "", ...ours };
  }
  const error = obj(event.error);
  return {
    kind: "input_transcript_failed",
    epoch,
    code: "transcription_failed",
    message: `the upstream could not transcribe this item: ${str(error?.code) ?? "error"}: ${str(error?.message) ?? ""}`,
    ...ours,
  };
};

/** The inbound side of an upstream session: `onEvent` for each event, `abort` when an epoch is cut. */
export interface Inbound {
  /** @throws Error from an event that cannot be used: the runner loses the stage. */
  onEvent(event: Json): void;
  /** Forgets the audio chunk waiting for its transcript: its epoch was aborted. */
  abort(): void;
}
