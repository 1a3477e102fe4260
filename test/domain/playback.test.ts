import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AudioTextMark, estimatePlayedMs, textPrefixFor } from "../../src/domain/index.ts";

describe("textPrefixFor", () => {
  it("is proportional without marks: 'hello' of 1000 ms at 400 ms is 'he'", () => {
    expect(textPrefixFor("hello", [], 1000, 400)).toBe("he");
    expect(textPrefixFor("hello", [], 1000, 399)).toBe("h");
  });

  it("interpolates linearly between the marks around the position", () => {
    const marks: AudioTextMark[] = [
      { textChars: 6, audioEndMs: 500 },
      { textChars: 11, audioEndMs: 1000 },
    ];
    expect(textPrefixFor("hello world", marks, 1000, 250)).toBe("hel");
    expect(textPrefixFor("hello world", marks, 1000, 750)).toBe("hello wo");
    expect(textPrefixFor("hello world", marks, 1000, 500)).toBe("hello");
  });

  it("follows the marks rather than the proportion when the text is uneven over the audio", () => {
    // All of "hello" in the first 100 ms, then 900 ms of " world".
    const marks: AudioTextMark[] = [
      { textChars: 5, audioEndMs: 100 },
      { textChars: 11, audioEndMs: 1000 },
    ];
    expect(textPrefixFor("hello world", marks, 1000, 100)).toBe("hello");
    expect(textPrefixFor("hello world", [], 1000, 100)).toBe("h");
  });

  it("right-trims the prefix", () => {
    // 600 ms of 1000 of "hello world" is 6.6 characters: "hello " -> "hello".
    expect(textPrefixFor("hello world", [], 1000, 600)).toBe("hello");
    expect(textPrefixFor("hello   world", [], 1300, 800)).toBe("hello");
  });

  it("is empty at 0 ms and below", () => {
    expect(textPrefixFor("hello", [], 1000, 0)).toBe("");
    expect(textPrefixFor("hello", [{ textChars: 5, audioEndMs: 1000 }], 1000, -5)).toBe("");
  });

  it("is the whole text at or past the end", () => {
    expect(textPrefixFor("hello", [], 1000, 1000)).toBe("hello");
    expect(textPrefixFor("hello", [{ textChars: 5, audioEndMs: 1000 }], 1000, 2535)).toBe("hello");
  });

  describe("properties", () => {
    /** An item as the decider builds it: audio deltas (ms, text), cumulative marks, total = the last mark. */
    const item = fc
      .array(
        fc.record({
          ms: fc.integer({ min: 0, max: 2000 }),
          text: fc.string({ unit: fc.constantFrom("a", "b", " ", "é", "z"), maxLength: 8 }),
        }),
        { minLength: 1, maxLength: 12 },
      )
      .map((deltas) => {
        let text = "";
        let ms = 0;
        const marks: AudioTextMark[] = deltas.map((d) => {
          text += d.text;
          ms += d.ms;
          return { textChars: text.length, audioEndMs: ms };
        });
        return { text, marks, totalMs: ms };
      });

    it("the heard prefix only grows with committed_ms", () => {
      fc.assert(
        fc.property(item, fc.integer({ min: -100, max: 30000 }), fc.integer({ min: -100, max: 30000 }), (it_, a, b) => {
          const [lo, hi] = a <= b ? [a, b] : [b, a];
          const shorter = textPrefixFor(it_.text, it_.marks, it_.totalMs, lo);
          const longer = textPrefixFor(it_.text, it_.marks, it_.totalMs, hi);
          expect(longer.startsWith(shorter)).toBe(true);
          expect(longer.length).toBeGreaterThanOrEqual(shorter.length);
        }),
      );
    });

    it("it is always a prefix of the transcript, whole at the end", () => {
      fc.assert(
        fc.property(item, fc.integer({ min: -100, max: 30000 }), (it_, committed) => {
          const heard = textPrefixFor(it_.text, it_.marks, it_.totalMs, committed);
          expect(it_.text.startsWith(heard)).toBe(true);
          if (committed >= it_.totalMs) expect(heard).toBe(it_.text);
          else expect(heard).toBe(heard.trimEnd());
          if (committed <= 0 && it_.totalMs > 0) expect(heard).toBe("");
        }),
      );
    });
  });
});

describe("estimatePlayedMs", () => {
  it("is min(sent, time since the first delta)", () => {
    expect(estimatePlayedMs(1000, 5000, 5400, null)).toBe(400);
    expect(estimatePlayedMs(1000, 5000, 9000, null)).toBe(1000);
  });

  it("is 0 before the first delta or for a clock that goes back", () => {
    expect(estimatePlayedMs(1000, null, 9000, null)).toBe(0);
    expect(estimatePlayedMs(1000, 5000, 4000, null)).toBe(0);
  });

  it("is capped by a truncation", () => {
    expect(estimatePlayedMs(1000, 5000, 9000, 250)).toBe(250);
  });
});
