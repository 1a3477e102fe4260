import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeStandardBase64, isStandardBase64 } from "../../src/protocol/base64.ts";

describe("decodeStandardBase64", () => {
  it("decodes exactly what the standard alphabet accepts, to the bytes that were encoded", () => {
    // Valid base64 of random bytes, then one character changed to anything, including -, _, =, space and non-ASCII.
    const corrupted = fc
      .tuple(fc.uint8Array({ maxLength: 64 }), fc.nat(), fc.constantFrom("-", "_", "=", " ", "!", "é", "\n", "A", "/"))
      .map(([bytes, at, c]) => {
        const text = Buffer.from(bytes).toString("base64");
        if (text.length === 0) return c;
        const i = at % text.length;
        return text.slice(0, i) + c + text.slice(i + 1);
      });
    fc.assert(
      fc.property(fc.oneof(corrupted, fc.string({ maxLength: 16 })), (text) => {
        const decoded = decodeStandardBase64(text);
        expect(decoded !== null).toBe(isStandardBase64(text));
        if (decoded !== null) expect(Buffer.from(decoded)).toEqual(Buffer.from(text, "base64"));
      }),
      { numRuns: 3000 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        expect(decodeStandardBase64(Buffer.from(bytes).toString("base64"))).toEqual(bytes);
      }),
    );
  });

  it("refuses base64url, whitespace, padding in the middle and a length that is not a multiple of 4", () => {
    for (const text of ["AAEC-wQF", "AAEC_wQF", "AAEC wQF", "AAE=AwQF", "AAECAwQ", "====", "A==="]) {
      expect(decodeStandardBase64(text)).toBeNull();
    }
    expect(decodeStandardBase64("")).toEqual(new Uint8Array(0));
  });

  it("returns an array of its own, not a view into Node's buffer pool", () => {
    const decoded = decodeStandardBase64("AAECAwQF");
    expect(decoded?.byteOffset).toBe(0);
    expect(decoded?.buffer.byteLength).toBe(6);
  });
});
