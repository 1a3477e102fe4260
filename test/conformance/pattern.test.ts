import { describe, expect, it } from "vitest";
import { fill, mismatch, PatternError, unknownOperators, valueAt } from "../../src/conformance/pattern.ts";

describe("conformance patterns", () => {
  const event = {
    type: "response.done",
    response: { id: "resp_1", status: "cancelled", output: [{ type: "message" }, { type: "function_call" }] },
    seq: 7,
  };

  it("match partially: named keys must match, other keys are ignored, lists match element by element", () => {
    expect(mismatch({ type: "response.done", response: { status: "cancelled" } }, event)).toBeNull();
    expect(mismatch({ response: { output: [{ type: "message" }, {}] } }, event)).toBeNull();
    expect(mismatch({ response: { status: "completed" } }, event)).toBe(
      'response.status: expected "completed", got "cancelled"',
    );
    expect(mismatch({ response: { output: [{ type: "message" }] } }, event)).toContain(
      "response.output: expected 1 elements, got 2",
    );
    expect(mismatch({ response: { reason: "x" } }, event)).toBe('response.reason: missing (expected "x")');
    expect(mismatch({ seq: null }, { seq: undefined })).toBe("seq: missing (expected null)");
  });

  it("apply operators, also beside ordinary keys", () => {
    expect(mismatch({ seq: { $gt: 6, $lte: 7 } }, event)).toBeNull();
    expect(mismatch({ seq: { $lt: 7 } }, event)).toBe("seq: expected lt 7, got 7");
    expect(mismatch({ missing: { $exists: false }, seq: { $exists: true } }, event)).toBeNull();
    expect(mismatch({ response: { id: { $regex: "^resp_", $type: "string", $not: "resp_2" } } }, event)).toBeNull();
    expect(mismatch({ response: { output: { $contains: { type: "function_call" }, $length: 2 } } }, event)).toBeNull();
    expect(mismatch({ response: { output: { $contains: { type: "audio" } } } }, event)).toBe(
      'response.output: no element matches {"type":"audio"}',
    );
    expect(
      mismatch({ type: "response.done", $any_of: [{ seq: 1 }, { response: { id: "resp_1" } }] }, event),
    ).toBeNull();
    expect(mismatch({ $any_of: [{ seq: 1 }, { seq: 2 }] }, event)).toContain("matches none of $any_of");
    expect(mismatch({ response: { $eq: { id: "resp_1" } } }, event)).toContain("expected exactly");
  });

  it("refuse an unknown operator, and find misspelt ones before a scenario runs", () => {
    expect(() => mismatch({ seq: { $gtt: 1 } }, event)).toThrow(PatternError);
    expect(
      unknownOperators({ a: [{ b: { $exist: true } }], $any_of: [{ c: { $rgx: "x" } }], $capture: { x: "y" } }),
    ).toEqual([
      ["a", 0, "b", "$exist"],
      ["$any_of", 0, "c", "$rgx"],
    ]);
  });

  it("fill placeholders, keeping the type of a whole placeholder, and leave $capture alone", () => {
    /** A `${name}` placeholder, written so that no linter takes it for a template literal gone wrong. */
    const v = (name: string) => `$\{${name}}`;
    const vars: Record<string, unknown> = { seq: 12, id: "sess_1" };
    const filled = fill(
      { a: v("seq"), b: `item_${v("id")}`, c: [v("id")], $capture: { x: v("not_filled") } },
      (name) => vars[name],
    );
    expect(filled).toEqual({ a: 12, b: "item_sess_1", c: ["sess_1"], $capture: { x: v("not_filled") } });
    expect(() => fill(v("nope"), () => undefined)).toThrow(/unknown variable \$\{nope\}/);
  });

  it("read values at dotted paths, through lists", () => {
    expect(valueAt(event, "response.output.1.type")).toBe("function_call");
    expect(valueAt(event, "response.nothing.here")).toBeUndefined();
  });
});
