/** Standard base64 (RFC 4648 section 4): `A-Z a-z 0-9 + /`, padded with `=` to a multiple of 4 characters. */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Whether `text` is standard padded base64 (an empty string is). */
export const isStandardBase64 = (text: string): boolean => text.length % 4 === 0 && BASE64.test(text);

/** The byte count that standard padded base64 `text` decodes to, without decoding it. */
export const base64ByteLength = (text: string): number =>
  (text.length / 4) * 3 - (text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0);
