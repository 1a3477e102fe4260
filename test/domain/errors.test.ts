import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { ERROR_CODES, type ErrorClass, isErrorCode, reject } from "../../src/domain/index.ts";

/** BEHAVIOUR.md, read at test time so the table is pinned against the doc itself. */
const BEHAVIOUR = readFileSync(resolve(process.cwd(), "../shared/docs/BEHAVIOUR.md"), "utf8");

/** The core set of BEHAVIOUR.md, "Errors": the backticked list after "the core set is". */
const coreSet = (): string[] => {
  const match = /the core set is `([^`]+)`/s.exec(BEHAVIOUR);
  if (match?.[1] === undefined) throw new Error("BEHAVIOUR.md has no 'the core set is `...`' list under Errors");
  return match[1]
    .split(",")
    .map((code) => code.trim())
    .filter((code) => code.length > 0);
};

/** The class the reference system uses for each code; every other code of the core set is invalid_request_error. */
const RATE_LIMIT = ["resource_exhausted", "input_backpressure", "output_backpressure"];
const SERVER = [
  "internal_error",
  "runtime_append_failed",
  "runtime_data_plane_stream_failed",
  "server_vad_unavailable",
  "commit_aborted",
];
const expectedClass = (code: string): ErrorClass =>
  RATE_LIMIT.includes(code) ? "rate_limit_error" : SERVER.includes(code) ? "server_error" : "invalid_request_error";

const CLASSES: readonly ErrorClass[] = ["invalid_request_error", "server_error", "rate_limit_error"];

describe("error code table", () => {
  const core = coreSet();

  it("reads the whole core set from BEHAVIOUR.md", () => {
    expect(core).toHaveLength(33);
    expect(new Set(core).size).toBe(core.length);
    for (const code of core) expect(code).toMatch(/^[a-z_]+$/);
    for (const code of [...RATE_LIMIT, ...SERVER, "bad_event", "playback_ack_too_late"]) expect(core).toContain(code);
  });

  it.each(core)("has %s with the class the reference uses", (code) => {
    expect(isErrorCode(code)).toBe(true);
    expect(ERROR_CODES).toHaveProperty([code, "type"], expectedClass(code));
  });

  it("agrees with every class the doc writes next to a code, as `code` (class)", () => {
    const inline = [...BEHAVIOUR.matchAll(/`([a-z_]+)` \((invalid_request_error|server_error|rate_limit_error)\)/g)];
    expect(inline.length).toBeGreaterThan(0);
    for (const [, code, cls] of inline) {
      expect(ERROR_CODES).toHaveProperty([code as string, "type"], cls);
    }
  });

  it("knows every code of the 'on violation' column of the defaults table", () => {
    const section = BEHAVIOUR.split(/^## /m).find((part) => part.startsWith("Defaults and limits")) ?? "";
    const rows = section.split("\n").filter((line) => line.startsWith("|") && !line.startsWith("| ---"));
    const codes = rows
      .slice(1)
      .flatMap((row) => [...(row.split("|").at(-2) ?? "").matchAll(/`([a-z_]+)`/g)].map((m) => m[1] as string));
    expect(codes).toEqual(
      expect.arrayContaining(["resource_exhausted", "config_timeout", "event_too_large", "input_backpressure"]),
    );
    for (const code of codes) expect(isErrorCode(code), code).toBe(true);
  });

  it("gives every row one of the three classes and a message", () => {
    for (const [code, spec] of Object.entries(ERROR_CODES)) {
      expect(CLASSES, code).toContain(spec.type);
      expect(spec.message.length, code).toBeGreaterThan(0);
    }
  });

  it("does not know a code outside the table", () => {
    expect(isErrorCode("no_such_code")).toBe(false);
    expect(isErrorCode("toString")).toBe(false);
  });

  it("builds a rejection with the table's message unless given one", () => {
    expect(reject("response_not_active")).toEqual({
      code: "response_not_active",
      message: ERROR_CODES.response_not_active.message,
    });
    expect(reject("bad_event", "played_ms is missing", "played_ms")).toEqual({
      code: "bad_event",
      message: "played_ms is missing",
      param: "played_ms",
    });
  });
});
