import { BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, OPEN_BRACE, OPEN_BRACKET, QUOTE } from "./json-depth.ts";

/**
 * Reading one top-level member of a JSON object's text without parsing it (frame peeking, src/protocol/frame-peek.ts,
 * and the event_id of a frame that is not parsed, src/protocol/decode.ts): a tokenizer that tracks depth and skips
 * strings whole, so a key inside a string value or a nested object or array never counts. Strings are skipped with
 * `indexOf` (native speed: an append's megabytes of base64 cost a search for the closing quote); the rest is read
 * character by character, linear in the text, and never more than the JSON.parse it precedes. A text that breaks off
 * (a frame's head, malformed JSON) is read up to the break.
 */

const COLON = 0x3a;
const COMMA = 0x2c;

/** Index of the quote that closes the string opening at `start` (a quote), or -1 when it does not close before `end`. */
const stringEnd = (text: string, start: number, end: number): number => {
  for (let from = start + 1; ; ) {
    const quote = text.indexOf('"', from);
    if (quote < 0 || quote >= end) return -1;
    // Escaped when an odd number of backslashes stands before it.
    let back = quote - 1;
    while (back > start && text.charCodeAt(back) === BACKSLASH) back -= 1;
    if ((quote - 1 - back) % 2 === 0) return quote;
    from = quote + 1;
  }
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
 * The raw text (escapes kept) of the string value of the first top-level member named `key` (spelt without escapes)
 * of the JSON object `text` begins with, reading at most its first `end` characters (default: all); null when there
 * is none, its value is not a string, or the text breaks off or turns out not to be an object before it.
 */
export const topLevelString = (text: string, key: string, end = text.length): string | null => {
  const stop = Math.min(text.length, end);
  let depth = 0;
  let atKey = false;
  for (let i = 0; i < stop; i += 1) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const close = stringEnd(text, i, stop);
      if (close < 0) return null;
      if (depth === 1 && atKey) {
        atKey = false;
        const isKey = close === i + key.length + 1 && text.startsWith(key, i + 1);
        const colon = skipSpace(text, close + 1, stop);
        if (text.charCodeAt(colon) !== COLON) return null;
        if (isKey) {
          const value = skipSpace(text, colon + 1, stop);
          if (text.charCodeAt(value) !== QUOTE) return null;
          const valueEnd = stringEnd(text, value, stop);
          return valueEnd < 0 ? null : text.slice(value + 1, valueEnd);
        }
        i = colon;
      } else i = close;
    } else if (c === OPEN_BRACE) {
      depth += 1;
      atKey = depth === 1;
    } else if (c === OPEN_BRACKET) {
      if (depth === 0) return null;
      depth += 1;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth -= 1;
      if (depth <= 0) return null;
    } else if (c === COMMA && depth === 1) atKey = true;
  }
  return null;
};
