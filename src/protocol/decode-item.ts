/**
 * Decoding of a client's conversation item (`conversation.item.create`'s `item`, `response.create`'s
 * `response.input` entries): a message with its content parts (text; audio in the session's input format, its
 * length in ms), a function call or a function call's output; or the error code, message and `param` that refuse it.
 */
import type { z } from "zod";
import type { ErrorCode, ItemContent, ItemCreate } from "../domain/index.ts";
import { bytesPerSample } from "./audio-formats.ts";
import { base64ByteLength, isStandardBase64 } from "./base64.ts";
import type { clientEventSchemas } from "./client-events.ts";
import { type DecodeContext, inputFormatOf } from "./decode-context.ts";

/** A client item (conversation.item.create, response.input), or why it is refused (`param` relative to `at`). */
export const decodeItem = (
  item: z.infer<(typeof clientEventSchemas)["conversation.item.create"]>["item"],
  ctx: DecodeContext,
  at: string,
): ItemCreate["item"] | { code: ErrorCode; message: string; param: string } => {
  if (item.type === "function_call_output") {
    if (item.call_id === undefined || item.output === undefined) {
      return {
        code: "invalid_function_call_output",
        message: "a function_call_output item needs call_id and output",
        param: `${at}.call_id`,
      };
    }
    return { type: "function_call_output", callId: item.call_id, output: item.output };
  }
  if (item.type === "function_call") {
    if (item.call_id === undefined || item.name === undefined) {
      return {
        code: "bad_event",
        message: "a function_call item needs call_id and name",
        param: `${at}.${item.call_id === undefined ? "call_id" : "name"}`,
      };
    }
    return { type: "function_call", callId: item.call_id, name: item.name, arguments: item.arguments ?? "" };
  }
  const content: ItemContent[] = [];
  for (const [i, part] of (item.content ?? []).entries()) {
    const path = `${at}.content.${i}`;
    if (part.type === "input_text" || part.type === "text" || part.type === "output_text") {
      if (part.text === undefined)
        return { code: "bad_event", message: `${path}: a ${part.type} part needs text`, param: `${path}.text` };
      content.push({ type: part.type, text: part.text });
      continue;
    }
    let audioMs = 0;
    if (part.audio !== undefined) {
      if (!isStandardBase64(part.audio)) {
        return { code: "bad_audio", message: `${path}.audio must be standard base64`, param: `${path}.audio` };
      }
      const bytes = base64ByteLength(part.audio);
      // The audio of an item is in the session's input format.
      const { encoding, rate } = inputFormatOf(ctx);
      const size = bytesPerSample(encoding);
      if (bytes % size !== 0)
        return {
          code: "bad_audio",
          message:
            size === 2
              ? `${path}.audio: ${encoding} needs an even byte count, got ${bytes}`
              : `${path}.audio: ${encoding} needs a whole number of ${size}-byte samples, got ${bytes} bytes`,
          param: `${path}.audio`,
        };
      audioMs = (bytes / size / rate) * 1000;
    }
    content.push({ type: part.type, transcript: part.transcript ?? null, audioMs });
  }
  if (content.length === 0)
    return { code: "bad_event", message: "a message item needs at least one content part", param: `${at}.content` };
  return { type: "message", role: item.role ?? "user", content };
};
