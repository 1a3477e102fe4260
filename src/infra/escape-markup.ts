/**
 * `text` made safe inside HTML or XML markup, in text and in a double-quoted attribute: `&`, `<`, `>` and `"` as
 * entities. For the pages and reports the server and the CLI write (the timeline, the session list, the client
 * conformance matrix and JUnit XML).
 */
export const escapeMarkup = (text: string): string =>
  text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;");
