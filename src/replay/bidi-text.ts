/**
 * Client text made safe to show beside the server's own (issue 32, part 3: "client text is bidi-isolated"). Text a
 * client sends (ids, transcripts, instructions, tool names and arguments, error messages) may hold Unicode's explicit
 * bidirectional controls without their closers: an RLO (U+202E) left open reverses whatever follows it on the line,
 * the server's text included. UAX #9 (the Unicode Bidirectional Algorithm, rules X1-X8) closes an embedding or
 * override (LRE U+202A, RLE U+202B, LRO U+202D, RLO U+202E) with a PDF (U+202C), and an isolate (LRI U+2066, RLI
 * U+2067, FSI U+2068) with a PDI (U+2069); a PDI also closes every embedding opened inside its isolate, and a PDF
 * cannot close one opened outside the isolate it is in.
 */

const PDF = "\u202c";
const PDI = "\u2069";
const FSI = "\u2068";
/** Each opening control and the closer that ends it. */
const CLOSER_OF: Readonly<Record<string, string>> = {
  "\u202a": PDF,
  "\u202b": PDF,
  "\u202d": PDF,
  "\u202e": PDF,
  "\u2066": PDI,
  "\u2067": PDI,
  "\u2068": PDI,
};

/**
 * `text` with a closer appended for every control it leaves open, innermost first: a PDF for each embedding or
 * override, a PDI for each isolate, matched as UAX #9 does (a PDF closes only an embedding of the isolate it is in;
 * a PDI closes its isolate and what was opened inside it; an unmatched closer is ignored). Text with no open control
 * comes back unchanged. Paragraph separators are not taken to close anything (HTML turns a newline into a space
 * before the algorithm sees it), so a closer may be one too many, which the algorithm ignores.
 */
export const closeBidiControls = (text: string): string => {
  const open: string[] = [];
  for (const char of text) {
    const closer = CLOSER_OF[char];
    if (closer !== undefined) open.push(closer);
    else if (char === PDF) {
      if (open.at(-1) === PDF) open.pop();
    } else if (char === PDI) {
      const isolate = open.lastIndexOf(PDI);
      if (isolate >= 0) open.length = isolate;
    }
  }
  return open.length === 0 ? text : text + open.reverse().join("");
};

/**
 * `text` isolated for a context that takes plain text only (a `title` attribute, a document's title, a string drawn
 * beside others): FSI, the text with its open controls closed (`closeBidiControls`), PDI. In markup, prefer `<bdi>`.
 */
export const isolateBidi = (text: string): string => `${FSI}${closeBidiControls(text)}${PDI}`;

/**
 * A template tag for labels made of the server's words and client text: each substituted value has its open
 * controls closed (`closeBidiControls`), so ``bidiClosed`commit ${itemId} (120 ms)` `` keeps " (120 ms)" as written
 * whatever the id holds. Text without bidi controls comes out as the plain template would.
 */
export const bidiClosed = (strings: TemplateStringsArray, ...values: readonly unknown[]): string =>
  strings.reduce((out, s, i) => out + (i === 0 ? "" : closeBidiControls(String(values[i - 1]))) + s, "");
