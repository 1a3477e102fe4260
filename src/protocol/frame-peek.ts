import { MAX_FRAME_BYTES, sniffEventId } from "./decode.ts";
import { topLevelString } from "./json-scan.ts";

/**
 * Frame peeking (issue 34, part 3): what the socket reads of a client frame before the session's codec decodes it,
 * without regular expressions over JSON: its size in bytes, its text (the first 2048 bytes only of a frame over
 * `MAX_FRAME_BYTES`), its kind, read from its top-level `type` member wherever it stands (`topLevelString`,
 * src/protocol/json-scan.ts: strings are skipped at native speed, so an append's audio costs a scan for its closing
 * quote), and its event_id (the protocol's `sniffEventId` over the first 2048 bytes).
 */

/**
 * What a frame looks like before it is decoded: `append` (an audio append, or one of its aliases: not counted
 * against the event rate before it is decoded), `commit` (counted against the pending turns), `resume` (a first
 * `session.resume` may resume another session than the one opened on connect), `event` (anything else).
 */
export type FrameKind = "append" | "commit" | "resume" | "event";

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

/** The kind of a frame's text (see `FrameKind`); `event` for a binary frame (null). */
export const frameKind = (text: string | null): FrameKind => {
  if (text === null) return "event";
  const type = topLevelString(text, "type");
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
