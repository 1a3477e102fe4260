import { createHash, timingSafeEqual } from "node:crypto";

/**
 * Secrets are kept and compared as SHA-256 digests (BEHAVIOUR.md, "Resume": only the token's SHA-256 is stored;
 * comparison is constant-time). A digest has a fixed length, so comparing two of them leaks nothing about the
 * secret through its length, and `timingSafeEqual` leaks nothing through where the first difference is.
 */

/** The SHA-256 of `text` (UTF-8), as 64 lowercase hex digits. */
export const sha256Hex = (text: string): string => createHash("sha256").update(text).digest("hex");

/**
 * True when the hex digests `a` and `b` are the same bytes, compared in constant time (`crypto.timingSafeEqual`).
 * Digests of different lengths, or text that is not whole hex bytes, are unequal (never a throw): `Buffer.from`
 * stops at the first non-hex digit, so the decoded lengths are compared before the bytes.
 */
export const equalDigests = (a: string, b: string): boolean => {
  const left = Buffer.from(a, "hex");
  const right = Buffer.from(b, "hex");
  return (
    left.length * 2 === a.length &&
    right.length * 2 === b.length &&
    left.length === right.length &&
    timingSafeEqual(left, right)
  );
};
