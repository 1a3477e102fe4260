import { describe, expect, it } from "vitest";
import { bidiClosed, closeBidiControls, isolateBidi } from "../../src/replay/index.ts";

/** Client text with bidi controls, closed where it ends (issue 32, part 3; UAX #9 rules X1-X8). */
const LRE = "\u202a";
const RLE = "\u202b";
const PDF = "\u202c";
const RLO = "\u202e";
const LRI = "\u2066";
const RLI = "\u2067";
const FSI = "\u2068";
const PDI = "\u2069";

describe("closeBidiControls", () => {
  it.each([
    ["plain text", "hello", "hello"],
    ["right-to-left text without a control", "שלום", "שלום"],
    ["a closed override", `a${RLO}b${PDF}c`, `a${RLO}b${PDF}c`],
    ["a closed isolate", `a${RLI}b${PDI}c`, `a${RLI}b${PDI}c`],
  ])("leaves %s as it is", (_name, text, closed) => {
    expect(closeBidiControls(text)).toBe(closed);
  });

  it.each([
    ["an open override", `evil ${RLO}text`, `evil ${RLO}text${PDF}`],
    ["an open isolate", `${RLI}text`, `${RLI}text${PDI}`],
    ["nested embeddings, innermost first", `${LRE}a${RLE}b${RLO}c`, `${LRE}a${RLE}b${RLO}c${PDF}${PDF}${PDF}`],
    ["an override inside an isolate", `${FSI}a${RLO}b`, `${FSI}a${RLO}b${PDF}${PDI}`],
    ["an isolate inside an override", `${RLO}a${LRI}b`, `${RLO}a${LRI}b${PDI}${PDF}`],
  ])("closes %s", (_name, text, closed) => {
    expect(closeBidiControls(text)).toBe(closed);
  });

  it("matches closers as the algorithm does: a PDI closes what its isolate opened, a PDF cannot leave an isolate", () => {
    // The PDI ends the isolate and the override inside it: nothing is left open.
    expect(closeBidiControls(`${RLI}a${RLO}b${PDI}c`)).toBe(`${RLI}a${RLO}b${PDI}c`);
    // The PDF inside the isolate cannot close the override outside it: both stay open.
    expect(closeBidiControls(`${RLO}a${RLI}b${PDF}`)).toBe(`${RLO}a${RLI}b${PDF}${PDI}${PDF}`);
    // Unmatched closers are ignored, and do not count against later openers.
    expect(closeBidiControls(`${PDF}${PDI}${RLO}x`)).toBe(`${PDF}${PDI}${RLO}x${PDF}`);
  });
});

describe("isolateBidi", () => {
  it("puts the closed text between FSI and PDI", () => {
    expect(isolateBidi("abc")).toBe(`${FSI}abc${PDI}`);
    expect(isolateBidi(`${RLI}${RLO}abc`)).toBe(`${FSI}${RLI}${RLO}abc${PDF}${PDI}${PDI}`);
  });
});

describe("bidiClosed", () => {
  it("closes each substituted value where it ends, and leaves the template's own text as written", () => {
    const id = `item_${RLO}1`;
    expect(bidiClosed`commit ${id} (${120} ms)`).toBe(`commit item_${RLO}1${PDF} (120 ms)`);
    expect(bidiClosed`${"a"}: ${"b"}`).toBe("a: b");
  });
});
