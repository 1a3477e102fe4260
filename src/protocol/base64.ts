/** Standard base64 (RFC 4648 section 4): `A-Z a-z 0-9 + /`, padded with `=` to a multiple of 4 characters. */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Whether `text` is standard padded base64 (an empty string is). */
export const isStandardBase64 = (text: string): boolean => text.length % 4 === 0 && BASE64.test(text);

/** The byte count that standard padded base64 `text` decodes to, without decoding it. */
export const base64ByteLength = (text: string): number =>
  (text.length / 4) * 3 - (text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0);

/**
 * Decodes standard padded base64 (RFC 4648 section 4), or returns null when `text` is not that. Node's decoder
 * skips characters outside the alphabet and stops at the first `=`, so any such character leaves fewer bytes than
 * the text's length promises; it also reads base64url's `-` and `_`, which are refused here first. Issue 11: this is
 * cheaper than matching the text against the alphabet first (it is decoded anyway).
 *
 * @returns a Uint8Array of its own (not a view of Node's buffer pool), or null.
 */
export const decodeStandardBase64 = (text: string): Uint8Array | null => {
  if (text.length % 4 !== 0 || text.includes("-") || text.includes("_")) return null;
  const decoded = Buffer.from(text, "base64");
  if (decoded.byteLength !== base64ByteLength(text)) return null;
  return new Uint8Array(decoded);
};
