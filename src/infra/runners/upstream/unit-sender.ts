/**
 * How each unit the engine submits goes to the upstream (reference/realtime-duplex-api.md; OpenAI Realtime client
 * events): appends (resampled to 24 kHz for an OpenAI server), commits and `response.create`s recorded in the turns
 * (turns.ts) so that what the upstream answers names our items and responses, playback reports as `playback.ack`
 * (duplex) or a truncation (openai), text, clears, placed items and function call outputs.
 */
import type { RunnerUnit } from "../../../domain/index.ts";
import { createResampler, pcm16FromBytes, pcm16ToBytes, type StreamResampler } from "../../audio/index.ts";
import { appendEvent, INPUT_RATE, itemJson, respondEvent, textEvent } from "./outbound.ts";
import type { UpstreamTurns } from "./turns.ts";
import type { Json } from "./wire-json.ts";

/** What an OpenAI Realtime server takes as `pcm16` (Hz). */
const OPENAI_RATE = 24000;

/** Sends one unit upstream, as the events of the session's dialect. */
export type UnitSender = (unit: RunnerUnit) => void;

/**
 * The unit sender of one upstream session: `send` takes each event (the link), `turns` the session's bookkeeping.
 * An OpenAI dialect's appends go through one streaming resampler, continuous across appends.
 */
export const createUnitSender = (
  dialect: "duplex" | "openai",
  turns: UpstreamTurns,
  send: (event: Json) => void,
): UnitSender => {
  const toOpenAi: StreamResampler | null = dialect === "openai" ? createResampler(INPUT_RATE, OPENAI_RATE) : null;

  /** Forwarded so the upstream's history holds what was heard (reference, "Playback"). */
  const playback = (unit: Extract<RunnerUnit, { kind: "playback" }>): void => {
    const target = turns.playbackTarget(unit.responseId);
    if (target === undefined) return;
    if (dialect === "duplex") {
      send({
        type: "playback.ack",
        response_id: target.id,
        played_ms: Math.floor(unit.playedMs),
        committed_ms: Math.floor(unit.committedMs),
        truncate: unit.truncate,
      });
    } else if (unit.truncate && target.itemId !== null) {
      send({
        type: "conversation.item.truncate",
        item_id: target.itemId,
        content_index: 0,
        audio_end_ms: Math.floor(unit.committedMs),
      });
    }
  };

  return (unit) => {
    switch (unit.kind) {
      case "append": {
        const audio = toOpenAi === null ? unit.audio : pcm16ToBytes(toOpenAi.push(pcm16FromBytes(unit.audio)));
        send(appendEvent(dialect, audio, unit.videoFrames, unit.forceListen === true));
        return;
      }
      case "commit":
        send({ type: "input_audio_buffer.commit", event_id: turns.commitSent(unit.itemId) });
        return;
      case "respond":
        send(turns.asked(unit.responseId, unit.epoch, (eventId) => respondEvent(unit, eventId)));
        return;
      case "playback":
        playback(unit);
        return;
      case "text":
        send(textEvent(dialect, unit.text));
        return;
      case "clear":
        send({ type: "input_audio_buffer.clear" });
        return;
      case "item": {
        // An assistant message or a function call the client placed (as a seed's items are given): the model's own.
        const item = itemJson(unit.item);
        if (item !== null) send({ type: "conversation.item.create", item });
        return;
      }
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
  };
};
