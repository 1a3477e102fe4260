import { describe, expect, it } from "vitest";
import { equalDigests, sha256Hex } from "../../src/engine/digest.ts";

/** The resume token check (BEHAVIOUR.md, "Resume": only the token's SHA-256 is stored; comparison is constant-time). */
describe("digest", () => {
  const token = "tok_a-b_c";
  const digest = sha256Hex(token);

  it("writes SHA-256 as 64 lowercase hex digits", () => {
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it("finds a digest equal to itself and to the same token's digest", () => {
    expect(equalDigests(digest, digest)).toBe(true);
    expect(equalDigests(sha256Hex(token), digest)).toBe(true);
  });

  it("finds digests of different tokens unequal, even when only the last hex digit differs", () => {
    expect(equalDigests(sha256Hex("tok_a-b_d"), digest)).toBe(false);
    const last = digest.at(-1) === "0" ? "1" : "0";
    expect(equalDigests(`${digest.slice(0, -1)}${last}`, digest)).toBe(false);
  });

  it("finds digests of different lengths unequal instead of throwing", () => {
    expect(equalDigests(digest.slice(0, 62), digest)).toBe(false);
    expect(equalDigests(digest, digest.slice(0, 62))).toBe(false);
    expect(equalDigests(`${digest}00`, digest)).toBe(false);
    expect(equalDigests("", digest)).toBe(false);
  });

  it("finds text that is not whole hex bytes unequal instead of throwing, even at the same length", () => {
    const notHex = `zz${digest.slice(2)}`;
    expect(notHex).toHaveLength(digest.length);
    expect(() => equalDigests(notHex, digest)).not.toThrow();
    expect(equalDigests(notHex, digest)).toBe(false);
    expect(equalDigests(`${digest.slice(0, 63)}`, `${digest.slice(0, 63)}`)).toBe(false);
    expect(equalDigests(token, token)).toBe(false);
  });
});
