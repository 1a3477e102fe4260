import type { z } from "zod";
import type { Command, ErrorCode, ItemId, ResponseId, ResponseInputItem } from "../domain/index.ts";
import { CLIENT_EVENT_ALIASES, type ClientEventType, clientEventSchemas } from "./client-events.ts";
import { type DecodedAppend, decodeAppend } from "./decode-append.ts";
import type { DecodeContext } from "./decode-context.ts";
import { decodeItem } from "./decode-item.ts";
import { jsonValuesExceededAt, MAX_JSON_VALUES } from "./json-depth.ts";
import { topLevelString } from "./json-scan.ts";
import { responseAudioOf, sessionPatchOf, toolsOf } from "./session-patch.ts";

export type { DecodedAppend } from "./decode-append.ts";
export type { DecodeContext } from "./decode-context.ts";

/** The largest client frame accepted, in bytes (BEHAVIOUR.md, "Defaults and limits": 15 MiB). */
export const MAX_FRAME_BYTES = 15 * 1024 * 1024;

/**
 * The deepest nesting of objects and arrays a client frame may have (ours). Fields that take any JSON (a
 * `turn.signal` payload, response metadata, tool parameters) are logged as they came, and the log's codec walks them
 * recursively: a frame thousands of levels deep would overflow the stack on append or on reading the log back.
 */
export const MAX_JSON_DEPTH = 128;

/** Whether `value` nests objects and arrays deeper than `limit` (the frame object itself is level 1); iterative. */
const deeperThan = (value: unknown, limit: number): boolean => {
  const stack: [unknown, number][] = [[value, 1]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [node, depth] = next;
    if (typeof node !== "object" || node === null) continue;
    if (depth > limit) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
};

/**
 * `session.resume` (reference, "Session lifecycle"): re-attach a live session on a new socket. Handled by the
 * server before any session is bound to the socket, never by a session's mailbox.
 */
export interface DecodedResume {
  readonly type: "session.resume";
  readonly eventId: string | null;
  readonly sessionId: string;
  readonly resumeToken: string;
  readonly lastReceivedSeq: number;
}

/**
 * What a client frame decodes to: a command (an `invalid` one when it was refused), an audio append, or a resume.
 * `session.event_ack` comes with `headSeq` -1: the session host stamps the real head before recording it.
 */
export type DecodedFrame = Exclude<Command, { type: "input_audio_buffer.append" }> | DecodedAppend | DecodedResume;

const invalid = (
  code: ErrorCode,
  message: string,
  eventId: string | null,
  eventType: string | null,
  param: string | null = null,
): DecodedFrame => ({ type: "invalid", eventId, code, message, param, eventType });

const firstIssue = (error: z.ZodError): { param: string; message: string } => {
  const issue = error.issues[0];
  const param = issue === undefined ? "" : issue.path.map(String).join(".");
  return { param, message: issue === undefined ? "invalid event" : `${param || "event"}: ${issue.message}` };
};

const decodeItemCreate = (
  event: z.infer<(typeof clientEventSchemas)["conversation.item.create"]>,
  eventId: string | null,
  ctx: DecodeContext,
): DecodedFrame => {
  const type = "conversation.item.create" as const;
  const item = decodeItem(event.item, ctx, "item");
  if ("code" in item) return invalid(item.code, item.message, eventId, type, item.param);
  return {
    type,
    eventId,
    previousItemId: (event.previous_item_id ?? null) as ItemId | null,
    itemId: (event.item.id ?? null) as ItemId | null,
    item,
  };
};

const decodeResponseCreate = (
  event: z.infer<(typeof clientEventSchemas)["response.create"]>,
  eventId: string | null,
  ctx: DecodeContext,
): DecodedFrame => {
  const type = "response.create" as const;
  const r = event.response;
  const audio = r === undefined ? {} : responseAudioOf(r);
  if ("code" in audio) return invalid(audio.code, audio.message, eventId, type, audio.param);
  let input: ResponseInputItem[] | null = null;
  if (r?.input !== undefined) {
    input = [];
    for (const [i, entry] of r.input.entries()) {
      if (entry.type === "item_reference") {
        input.push({ type: "item_reference", id: entry.id as ItemId });
        continue;
      }
      const item = decodeItem(entry, ctx, `response.input.${i}`);
      if ("code" in item) return invalid(item.code, item.message, eventId, type, item.param);
      input.push(item);
    }
  }
  return {
    type,
    eventId,
    metadata: r?.metadata ?? null,
    instructions: r?.instructions ?? null,
    modalities: r?.output_modalities ?? r?.modalities ?? null,
    conversation: r?.conversation ?? "auto",
    input,
    tools: r?.tools === undefined ? null : toolsOf(r.tools),
    toolChoice: r?.tool_choice ?? null,
    temperature: r?.temperature ?? null,
    maxOutputTokens: r?.max_output_tokens ?? r?.max_response_output_tokens ?? null,
    ...audio,
  };
};

const decodeKnown = (type: ClientEventType, raw: unknown, eventId: string | null, ctx: DecodeContext): DecodedFrame => {
  const parsed = clientEventSchemas[type].safeParse(raw);
  if (!parsed.success) {
    const { param, message } = firstIssue(parsed.error);
    const missingItem = param === "item_id" && (raw as Record<string, unknown>).item_id === undefined;
    return missingItem
      ? invalid("missing_item_id", `${type} needs an item_id`, eventId, type, "item_id")
      : invalid("bad_event", `${type}: ${message}`, eventId, type, param || null);
  }
  switch (type) {
    case "session.update": {
      const event = parsed.data as z.infer<(typeof clientEventSchemas)["session.update"]>;
      const patch = sessionPatchOf(event.session ?? {}, ctx);
      if ("code" in patch) return invalid(patch.code, patch.message, eventId, type, patch.param);
      return { type, eventId, patch };
    }
    case "input_audio_buffer.append":
      return decodeAppend(parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>, eventId, ctx);
    case "input_audio_buffer.commit": {
      const event = parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>;
      const silence = event.is_speech === false ? { declaredSilence: true as const } : {};
      return { type, eventId, createResponse: event.response_create ?? event.create_response ?? null, ...silence };
    }
    case "input_audio_buffer.clear":
    case "session.heartbeat":
    case "session.close":
      return { type, eventId };
    case "response.create":
      return decodeResponseCreate(parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>, eventId, ctx);
    case "session.event_ack": {
      const event = parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>;
      return { type, eventId, seq: event.server_event_seq, headSeq: -1 };
    }
    case "session.resume": {
      const event = parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>;
      return {
        type,
        eventId,
        sessionId: event.session_id,
        resumeToken: event.resume_token,
        lastReceivedSeq: event.last_received_server_event_seq ?? 0,
      };
    }
    case "input.cancel":
    case "output_audio_buffer.clear":
    case "barge_in":
      return { type, eventId };
    case "input.text.append": {
      const event = parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>;
      return { type, eventId, text: event.text };
    }
    case "turn.signal": {
      const event = parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>;
      return { type, eventId, event: event.event, payload: event.payload ?? null };
    }
    case "conversation.item.retrieve":
    case "conversation.item.delete": {
      const event = parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>;
      return { type, eventId, itemId: event.item_id as ItemId };
    }
    case "conversation.item.create":
      return decodeItemCreate(parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>, eventId, ctx);
    case "response.cancel": {
      const event = parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>;
      return { type, eventId, responseId: (event.response_id ?? null) as ResponseId | null };
    }
    case "playback.ack": {
      const event = parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>;
      return {
        type,
        eventId,
        responseId: (event.response_id ?? null) as ResponseId | null,
        itemId: (event.item_id ?? null) as ItemId | null,
        playedMs: event.played_ms,
        committedMs: event.committed_ms ?? null,
        truncate: event.truncate ?? false,
      };
    }
    case "conversation.item.truncate": {
      const event = parsed.data as z.infer<(typeof clientEventSchemas)[typeof type]>;
      return {
        type,
        eventId,
        itemId: event.item_id as ItemId,
        contentIndex: event.content_index ?? 0,
        audioEndMs: event.audio_end_ms,
      };
    }
    default: {
      const unhandled: never = type;
      throw new Error(`decodeKnown: unhandled type ${String(unhandled)}`);
    }
  }
};

/**
 * Decodes one client frame (a WebSocket text frame of `byteLength` bytes). Never throws: a frame that cannot be
 * decoded becomes an `invalid` command with its code (`event_too_large`, `invalid_json`, `bad_event`,
 * `unknown_event`, `bad_audio`, `unsupported_audio_format`), echoing the frame's `event_id` when it had one
 * (BEHAVIOUR.md scenario 2).
 */
/**
 * The `event_id` of a frame that is not parsed (too large, malformed, or binary), read from its first 2048
 * characters: the string value of its top-level `event_id` member (src/protocol/json-scan.ts: one inside a nested
 * object or a string never counts), unescaped, of 1 to 512 characters; else null.
 */
export const sniffEventId = (text: string): string | null => {
  const raw = topLevelString(text, "event_id", 2048);
  if (raw === null) return null;
  let value = raw;
  if (raw.includes("\\")) {
    try {
      value = JSON.parse(`"${raw}"`) as string;
    } catch {
      return null;
    }
  }
  return value.length >= 1 && value.length <= 512 ? value : null;
};

export const decodeClientFrame = (text: string, byteLength: number, ctx: DecodeContext): DecodedFrame => {
  if (byteLength > MAX_FRAME_BYTES) {
    // Too large to parse; the event_id is still echoed when it stands near the start of the frame.
    return invalid(
      "event_too_large",
      `frame of ${byteLength} bytes exceeds the maximum of ${MAX_FRAME_BYTES} bytes`,
      sniffEventId(text),
      null,
    );
  }
  // Counted before parsing: a frame of millions of tiny values would hold the event loop for seconds in JSON.parse.
  if (jsonValuesExceededAt(text, MAX_JSON_VALUES) >= 0) {
    return invalid(
      "invalid_json",
      `frame holds more than ${MAX_JSON_VALUES} values (commas outside strings); it was not parsed`,
      sniffEventId(text),
      null,
    );
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    // The event_id is echoed when the text holds one before it breaks off (BEHAVIOUR.md, scenario 2).
    return invalid("invalid_json", `frame is not valid JSON: ${(error as Error).message}`, sniffEventId(text), null);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return invalid("invalid_json", "frame must be a JSON object", null, null);
  }
  const record = raw as Record<string, unknown>;
  const eventId = typeof record.event_id === "string" ? record.event_id : null;
  if (typeof record.type !== "string") {
    return invalid("bad_event", "event has no string `type`", eventId, null, "type");
  }
  const type = CLIENT_EVENT_ALIASES[record.type] ?? record.type;
  if (deeperThan(raw, MAX_JSON_DEPTH)) {
    return invalid(
      "bad_event",
      `frame nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`,
      eventId,
      record.type,
    );
  }
  if (Object.hasOwn(clientEventSchemas, type)) return decodeKnown(type as ClientEventType, raw, eventId, ctx);
  return invalid("unknown_event", `unknown event type "${record.type}"`, eventId, record.type, "type");
};
