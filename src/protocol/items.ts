import type { HistoryItem, ItemId } from "../domain/index.ts";

/**
 * Conversation items and ledgers as the wire shows them (reference/realtime-duplex-api.md, "Object shapes":
 * `realtime.item` with `input_text` / `input_audio` / `output_text` / `output_audio` parts, function calls and
 * their outputs).
 */

/** A user message item: its audio part (no transcript: no transcription stage runs) and/or its typed text. */
export const userItem = (id: ItemId, audio: boolean, text: string): Record<string, unknown> => ({
  id,
  object: "realtime.item",
  type: "message",
  role: "user",
  status: "completed",
  content: [
    ...(audio ? [{ type: "input_audio", transcript: null }] : []),
    ...(text === "" ? [] : [{ type: "input_text", text }]),
  ],
});

/** An assistant message item with its audio part (transcript) and/or text part. */
export const messageItem = (
  id: ItemId,
  status: string,
  transcript: string | null,
  text: string | null,
): Record<string, unknown> => ({
  id,
  object: "realtime.item",
  type: "message",
  role: "assistant",
  status,
  content: [
    ...(transcript === null ? [] : [{ type: "output_audio", transcript }]),
    ...(text === null ? [] : [{ type: "output_text", text }]),
  ],
});

export const functionCallItem = (id: ItemId, callId: string, name: string, args: string): Record<string, unknown> => ({
  id,
  object: "realtime.item",
  type: "function_call",
  status: "completed",
  call_id: callId,
  name,
  arguments: args,
});

/** Any history item as a `realtime.item` (reference, "Object shapes"). */
export const historyItemJson = (item: HistoryItem): Record<string, unknown> => {
  switch (item.type) {
    case "function_call":
      return functionCallItem(item.id, item.callId ?? "", item.name ?? "", item.arguments ?? "");
    case "function_call_output":
      return {
        id: item.id,
        object: "realtime.item",
        type: "function_call_output",
        status: "completed",
        call_id: item.callId,
        output: item.output,
      };
    case "message": {
      const user = item.role !== "assistant";
      const part = item.audio
        ? { type: user ? "input_audio" : "output_audio", transcript: item.text === "" ? null : item.text }
        : { type: user ? "input_text" : "output_text", text: item.text };
      return {
        id: item.id,
        object: "realtime.item",
        type: "message",
        role: item.role,
        status: item.status,
        content: [part],
      };
    }
    default: {
      const unhandled: never = item.type;
      throw new Error(`historyItemJson: unhandled item type ${String(unhandled)}`);
    }
  }
};

/** A playback ledger in wire spelling, whole ms. */
export const roundLedger = (l: { generatedMs: number; sentMs: number; playedMs: number; committedMs: number }) => ({
  generated_ms: Math.floor(l.generatedMs),
  sent_ms: Math.floor(l.sentMs),
  played_ms: Math.floor(l.playedMs),
  committed_ms: Math.floor(l.committedMs),
});
