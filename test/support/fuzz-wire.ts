import { sniffEventId } from "../../src/protocol/decode.ts";
import { MAX_FRAME_BYTES, MAX_JSON_DEPTH } from "../../src/protocol/index.ts";
import { CLOSE_TYPES, type DeepShape, type FrameSpec, type Mutation } from "./fuzz-frames.ts";

/**
 * The fuzz guard's frames on the wire (issue 10, part 9): a generated frame (./fuzz-frames.ts) becomes the text or
 * bytes that are sent, with the event_id its answer must echo and what the server must do with it.
 */

/** A frame ready to send: its data, the event_id its error must echo, and what the server must do with it. */
export interface Materialized {
  readonly data: string | Buffer;
  /** What the server must echo as `error.event_id` (and record as the command's eventId): null when none. */
  readonly eventId: string | null;
  /** `any`: may be accepted; `reject`: refused with a code of the table; else refused with one of these codes. */
  readonly must: "any" | "reject" | readonly string[];
  /** A short description for failure messages (never the whole of a large frame). */
  readonly label: string;
  /** The `type` the frame carries (after its mutations), when it is a JSON object with a string type. */
  readonly type: string | null;
}

/** The event_id the codec reads from a text frame: the top-level string `event_id` of a JSON object, else null. */
export const eventIdOf = (text: string): string | null => {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
    const id = (value as Record<string, unknown>).event_id;
    return typeof id === "string" ? id : null;
  } catch {
    // Malformed JSON echoes the top-level event_id its first 2048 characters hold (BEHAVIOUR.md, scenario 2).
    return sniffEventId(text);
  }
};

const typeOf = (text: string): string | null => {
  try {
    const value = JSON.parse(text) as { type?: unknown } | null;
    return typeof value?.type === "string" ? value.type : null;
  } catch {
    return null;
  }
};

const resolvePath = (
  root: Record<string, unknown>,
  path: readonly number[],
): [Record<string, unknown>, string] | null => {
  let node: Record<string, unknown> = root;
  for (const [i, step] of path.entries()) {
    const keys = Object.keys(node);
    if (keys.length === 0) return null;
    const key = keys[step % keys.length] as string;
    const next = node[key];
    if (i === path.length - 1 || typeof next !== "object" || next === null) return [node, key];
    node = next as Record<string, unknown>;
  }
  return null;
};

const applyToObject = (frame: Record<string, unknown>, m: Mutation): void => {
  switch (m.op) {
    case "delete": {
      const at = resolvePath(frame, m.path);
      if (at !== null) delete at[0][at[1]];
      return;
    }
    case "set": {
      const at = resolvePath(frame, m.path);
      if (at !== null) at[0][at[1]] = structuredClone(m.value);
      return;
    }
    case "add":
      frame[m.key] = structuredClone(m.value);
      return;
    case "retype":
      frame.type = m.type;
      return;
    case "event_id":
      if (m.value === undefined) delete frame.event_id;
      else frame.event_id = structuredClone(m.value);
      return;
    case "cut":
    case "splice":
    case "wrap":
      return;
    default: {
      const unhandled: never = m;
      throw new Error(`unhandled mutation ${JSON.stringify(unhandled)}`);
    }
  }
};

const applyToText = (text: string, m: Mutation): string => {
  switch (m.op) {
    case "cut":
      return text.slice(0, Math.floor(text.length * m.at));
    case "splice": {
      const at = Math.floor(text.length * m.at);
      return text.slice(0, at) + m.insert + text.slice(at + m.remove);
    }
    case "wrap":
      if (m.how === "array") return `[${text}]`;
      if (m.how === "twice") return `${text}${text}`;
      if (m.how === "bom") return `\ufeff${text}`;
      return ` \n\t${text} \r\n`;
    default:
      return text;
  }
};

/**
 * Makes a frame that could end the session or set a timer on it harmless, keeping it as a frame of its kind: a
 * session.close (or an alias) that its schema would accept gets an over-long event_id, and `idle_timeout_s` (a
 * short idle TTL would expire the session) is renamed to a key the schema ignores.
 */
const harmless = (text: string): string => {
  const safe = text.replaceAll("idle_timeout_s", "idle_timeout_x");
  let value: unknown;
  try {
    value = JSON.parse(safe);
  } catch {
    return safe;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return safe;
  const record = value as Record<string, unknown>;
  const closes = typeof record.type === "string" && CLOSE_TYPES.has(record.type);
  const id = record.event_id;
  if (closes && (id === undefined || (typeof id === "string" && id.length <= 512))) {
    return JSON.stringify({ ...record, event_id: `${String(id ?? "close")}:${"x".repeat(513)}` });
  }
  return safe;
};

const deepText = (shape: DeepShape, depth: number, eventId: string): string => {
  const objects = `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
  const arrays = `${"[".repeat(depth)}${"]".repeat(depth)}`;
  switch (shape) {
    case "array":
      return arrays;
    case "unknown":
      return `{"event_id":"${eventId}","type":"fuzz.nope","x":${arrays}}`;
    case "typed":
      return `{"event_id":"${eventId}","type":"input.text.append","text":${objects}}`;
    case "unclosed":
      return `{"event_id":"${eventId}","type":"turn.signal","payload":${'{"a":'.repeat(depth)}`;
    case "payload":
      return `{"event_id":"${eventId}","type":"turn.signal","event":"listen","payload":${objects}}`;
    default: {
      const unhandled: never = shape;
      throw new Error(`unhandled shape ${String(unhandled)}`);
    }
  }
};

/** `n` bytes of JSON text: an unknown event whose event_id comes first, padded with a string. */
const paddedText = (eventId: string, type: string, n: number): string => {
  const head = `{"event_id":"${eventId}","type":"${type}","audio":"`;
  const tail = '"}';
  return `${head}${"A".repeat(Math.max(0, n - head.length - tail.length))}${tail}`;
};

/**
 * Materializes frame `spec` as the `n`-th frame of a session whose id is `sessionId`: gives it the event_id `f<n>`
 * (first key, so a binary or too-large frame's id can be sniffed), applies its mutations, and says what the server
 * must echo and do. `item_@LIVE` becomes `liveItemId` (an item the session held when the batch was made), or an
 * unknown id without one. Text is normalized to what the server decodes (a lone surrogate becomes U+FFFD).
 */
export const materialize = (spec: FrameSpec, n: number, sessionId: string, liveItemId?: string): Materialized => {
  const id = `f${n}`;
  const tag = sessionId.slice(5, 13);
  const fill = (text: string) =>
    text
      .replaceAll("item_@LIVE", liveItemId ?? "item_nope")
      .replaceAll("@T", tag)
      .replaceAll("sess_@S", sessionId);
  switch (spec.kind) {
    case "json": {
      const frame: Record<string, unknown> = { event_id: id, type: spec.type, ...structuredClone(spec.fields) };
      for (const m of spec.mutations) applyToObject(frame, m);
      let text = fill(JSON.stringify(frame));
      for (const m of spec.mutations) text = applyToText(text, m);
      text = Buffer.from(harmless(text)).toString();
      const label = `${spec.type} ${JSON.stringify(spec.mutations).slice(0, 300)}: ${text.slice(0, 300)}`;
      return { data: text, eventId: eventIdOf(text), must: spec.must, label, type: typeOf(text) };
    }
    case "text": {
      const text = Buffer.from(spec.text).toString();
      return {
        data: text,
        eventId: null,
        must: ["invalid_json", "input_backpressure"],
        label: `text ${JSON.stringify(text)}`,
        type: null,
      };
    }
    case "binary": {
      const text = fill(JSON.stringify({ event_id: id, type: spec.type, ...spec.fields }));
      const label = `binary ${text.slice(0, 300)}`;
      return { data: Buffer.from(text), eventId: id, must: ["invalid_json"], label, type: spec.type };
    }
    case "noise":
      return {
        data: Buffer.from(spec.bytes),
        eventId: null,
        must: ["invalid_json"],
        label: `binary noise ${Buffer.from(spec.bytes).toString("hex")}`,
        type: null,
      };
    case "deep": {
      const text = deepText(spec.shape, spec.depth, id);
      // The frame object is level 1, its payload's objects the levels below: beyond MAX_JSON_DEPTH it is refused.
      const must =
        spec.shape === "payload"
          ? spec.depth + 1 > MAX_JSON_DEPTH
            ? ["bad_event"]
            : "any"
          : spec.shape === "array" || spec.shape === "unclosed"
            ? ["invalid_json"]
            : ["unknown_event", "bad_event"];
      return {
        data: text,
        // An array has no top-level event_id; an unclosed object echoes the one it starts with.
        eventId: spec.shape === "array" ? null : id,
        must: must === "any" ? "any" : [...must, "input_backpressure"],
        label: `deep ${spec.shape} ${spec.depth}`,
        type: null,
      };
    }
    case "large":
      return {
        data: paddedText(id, "fuzz.large", spec.bytes),
        eventId: id,
        must: ["unknown_event", "input_backpressure"],
        label: `large ${spec.bytes} bytes`,
        type: null,
      };
    case "oversize": {
      const text = paddedText(id, "input_audio_buffer.append", MAX_FRAME_BYTES + 1);
      return spec.binary
        ? { data: Buffer.from(text), eventId: id, must: ["invalid_json"], label: "binary oversize", type: null }
        : { data: text, eventId: id, must: ["event_too_large"], label: "text oversize", type: null };
    }
    default: {
      const unhandled: never = spec;
      throw new Error(`unhandled frame ${JSON.stringify(unhandled)}`);
    }
  }
};
