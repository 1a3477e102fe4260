import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { canonicalBytes, chainOf } from "../../src/engine/chain.ts";

/** The formula of docs/log-format.md, computed the plain way: over the whole canonical text. */
const plain = (previous: string, entry: Parameters<typeof canonicalBytes>[0]): string =>
  createHash("sha256").update(previous).update("\n").update(canonicalBytes(entry)).digest("hex");

describe("the hash chain's digest, fed piece by piece", () => {
  it("is the digest of the whole canonical text: byte arrays anywhere, none, NULs and unicode in strings", () => {
    const audio = new Uint8Array(3200).map((_, i) => (i * 7) % 256);
    const entries = [
      { type: "CommandReceived", metadata: { at: 1, epoch: 0, turnId: 0 }, data: { audio, note: "é ✓ \u0000" } },
      { type: "SessionOpened", metadata: { at: 2, epoch: 0, turnId: 0, chain: "x" }, data: { id: "sess" } },
      {
        type: "StageOutputReceived",
        metadata: { at: 3, epoch: 1, turnId: 1 },
        data: { list: [audio.subarray(5, 9), { deep: Buffer.from("abc") }], empty: new Uint8Array(0) },
      },
      // A string that looks like a slot of another process's nonce is hashed as the string it is.
      { type: "X", metadata: { at: 4, epoch: 0, turnId: 0 }, data: { s: "\u0000abcdef012345:0\u0000", b: audio } },
    ];
    let head = "";
    for (const entry of entries) {
      expect(chainOf(head, entry)).toBe(plain(head, entry));
      head = chainOf(head, entry);
    }
  });
});
