/**
 * How deep a JSON text nests, found before it is parsed (issue 32, part 2: a 200,000-deep body must be refused
 * without any recursion, in the parser or after it).
 */

/** Bytes (and UTF-16 code units) of a JSON text that the scans look at (ASCII); json-scan.ts reads them too. */
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const OPEN_BRACKET = 0x5b;
export const CLOSE_BRACKET = 0x5d;
export const OPEN_BRACE = 0x7b;
export const CLOSE_BRACE = 0x7d;

/**
 * Where a JSON text nests objects and arrays deeper than `limit` levels (the outermost value is level 1, as
 * {@link MAX_JSON_DEPTH} counts), by one pass over its bytes: `[` and `{` outside strings open a level, `]` and `}`
 * close one; inside a string a backslash skips the byte after it. No recursion and no allocation, so any depth is
 * scanned in linear time without touching the stack. UTF-8 bytes of non-ASCII characters are never `"`, `\`,
 * brackets or braces, so the bytes need no decoding. The text need not be valid JSON: JSON.parse judges that after.
 *
 * @param bytes the JSON text as UTF-8 bytes (a Buffer, or `TextEncoder` output).
 * @param limit the deepest nesting accepted, levels (`MAX_JSON_DEPTH`, 128, for client frames and HTTP bodies).
 * @returns the byte offset of the bracket or brace that opens level `limit + 1`, or -1 when none does.
 */
export const jsonDepthExceededAt = (bytes: Uint8Array, limit: number): number => {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
      continue;
    }
    if (byte === QUOTE) inString = true;
    else if (byte === OPEN_BRACKET || byte === OPEN_BRACE) {
      depth++;
      if (depth > limit) return i;
    } else if (byte === CLOSE_BRACKET || byte === CLOSE_BRACE) depth--;
  }
  return -1;
};

const COMMA = 0x2c;

/**
 * Values one JSON text (a client frame or an HTTP body) may hold, counted as the commas that separate them: a
 * 16 MiB body of 1.85 million keys took JSON.parse 1.8 s on the event loop; 100,000 take under 0.1 s, far above what
 * any event or request carries (audio is one string).
 */
export const MAX_JSON_VALUES = 100_000;

/**
 * Where a JSON text holds more than `limit` separated values (commas outside strings), by one pass over its
 * characters as {@link jsonDepthExceededAt} does, before it is parsed.
 *
 * @param text the JSON text.
 * @param limit the most commas accepted ({@link MAX_JSON_VALUES}).
 * @returns the index of the comma past `limit`, or -1 when there is none.
 */
export const jsonValuesExceededAt = (text: string, limit: number): number => {
  let commas = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === BACKSLASH) i++;
      else if (code === QUOTE) inString = false;
      continue;
    }
    if (code === QUOTE) inString = true;
    else if (code === COMMA && ++commas > limit) return i;
  }
  return -1;
};
