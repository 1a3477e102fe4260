import { MAX_FRAME_BYTES, sniffEventId } from "./decode.ts";

/**
 * Frame peeking (issue 34, part 3): what the socket reads of a client frame before the session's codec decodes it,
 * without regular expressions over JSON: its size in bytes, its text (the first 2048 bytes only of a frame over
 * `MAX_FRAME_BYTES`), its kind, read by a bounded tokenizer from the top-level `type` member within the first
 * `PEEK_WINDOW` characters, and its event_id (the protocol's `sniffEventId` over the first 2048 bytes).
 */

/**
 * What a frame looks like before it is decoded: `append` (an audio append, or one of its aliases: not counted
 * against the event rate before it is decoded), `commit` (counted against the pending turns), `resume` (a first
 * `session.resume` may resume another session than the one opened on connect), `event` (anything else).
 */
export type FrameKind = "append" | "commit" | "resume" | "event";

/** Characters of a frame's text searched for its top-level `type` (the kind of a frame whose type comes later is `event`). */
export const PEEK_WINDOW = 300;

/** Bytes of a frame read for its event_id when it is binary or too large to parse. */
const HEAD_BYTES = 2048;

const KINDS: Readonly<Record<string, FrameKind>> = {
  "input_audio_buffer.append": "append",
  "input.audio.append": "append",
  push_chunk: "append",
  "input_audio_buffer.commit": "commit",
  "input.commit": "commit",
  "session.resume": "resume",
};

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

/** Index of the quote that closes the string opening at `start` (a quote), or -1 when it does not close before `end`. */
const stringEnd = (text: string, start: number, end: number): number => {
  for (let i = start + 1; i < end; i += 1) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH) i += 1;
    else if (c === QUOTE) return i;
  }
  return -1;
};

/** The first index at or after `i` that is not JSON whitespace. */
const skipSpace = (text: string, i: number, end: number): number => {
  let j = i;
  while (j < end) {
    const c = text.charCodeAt(j);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    j += 1;
  }
  return j;
};

/**
 * The raw text (escapes kept) of the string value of the first top-level `type` member of the JSON object `text`
 * begins with, scanning its first `window` characters; null when there is none within them, or it is not a string.
 * Strings are skipped whole (escaped quotes included), so a `"type"` inside a string value or a nested object does
 * not count. Stops at the first top-level `type`: the append fast path reads a few dozen characters.
 */
export const topLevelType = (text: string, window = PEEK_WINDOW): string | null => {
  const end = Math.min(text.length, window);
  let depth = 0;
  let atKey = false;
  for (let i = 0; i < end; i += 1) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const close = stringEnd(text, i, end);
      if (close < 0) return null;
      if (depth === 1 && atKey) {
        atKey = false;
        const isType = close === i + 5 && text.startsWith("type", i + 1);
        const colon = skipSpace(text, close + 1, end);
        if (text.charCodeAt(colon) !== COLON) return null;
        if (isType) {
          const value = skipSpace(text, colon + 1, end);
          if (text.charCodeAt(value) !== QUOTE) return null;
          const valueEnd = stringEnd(text, value, end);
          return valueEnd < 0 ? null : text.slice(value + 1, valueEnd);
        }
        i = colon;
      } else i = close;
    } else if (c === OPEN_OBJECT) {
      depth += 1;
      atKey = depth === 1;
    } else if (c === OPEN_ARRAY) depth += 1;
    else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) depth -= 1;
    else if (c === COMMA && depth === 1) atKey = true;
  }
  return null;
};

/** The kind of a frame's text (see `FrameKind`); `event` for a binary frame (null). */
export const frameKind = (text: string | null): FrameKind => {
  if (text === null) return "event";
  const type = topLevelType(text);
  return type === null ? "event" : (KINDS[type] ?? "event");
};

/** A frame's payload as the WebSocket library delivers it (ws's `FrameData`): one buffer, fragments, or an ArrayBuffer. */
export type FrameData = Buffer | ArrayBuffer | Buffer[];

/** The first `n` bytes of a frame as text (for sniffing the event_id of a frame too large to parse). */
const head = (data: FrameData, n: number): string =>
  (Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data))
    .subarray(0, n)
    .toString();

/** A frame's size in bytes, all its fragments together. */
export const frameBytes = (data: FrameData): number =>
  Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data.byteLength;

/** The event_id a frame's first 2048 bytes carry (for a binary frame, one too large, or one dropped unread). */
export const frameEventId = (data: FrameData): string | null => sniffEventId(head(data, HEAD_BYTES));

/** A client frame as peeked: `text` null for a binary frame, its first 2048 bytes for one over MAX_FRAME_BYTES. */
export interface PeekedFrame {
  readonly text: string | null;
  readonly bytes: number;
  readonly kind: FrameKind;
  /** The event_id the frame's head carries (a refused or dropped frame's answer; a binary frame's error echoes it). */
  eventId(): string | null;
}

/**
 * Peeks at a frame as ws delivers it (`isBinary`: a binary frame, refused by the codec). Nothing returned keeps
 * `data`: a frame waiting in a mailbox or a takeover queue holds its text (the first 2048 bytes of one over the
 * maximum), never the raw buffer, which a binary or oversized frame would otherwise keep uncounted. A binary frame's
 * event_id is read at once; a text frame's from its text when asked (appends, the hot path, are never asked).
 */
export const peekFrame = (data: FrameData, isBinary: boolean): PeekedFrame => {
  const bytes = frameBytes(data);
  if (isBinary) {
    const eventId = frameEventId(data);
    return { text: null, bytes, kind: "event", eventId: () => eventId };
  }
  const text = bytes > MAX_FRAME_BYTES ? head(data, HEAD_BYTES) : data.toString();
  return { text, bytes, kind: frameKind(text), eventId: () => sniffEventId(text.slice(0, HEAD_BYTES)) };
};
