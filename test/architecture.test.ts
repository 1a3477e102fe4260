import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

/** DESIGN.md, "Layout": dependencies point inward, and the pure layers do no I/O. */
const root = join(process.cwd(), "src");
const filesIn = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesIn(path) : path.endsWith(".ts") ? [path] : [];
  });
const importsOf = (file: string): string[] =>
  [...readFileSync(file, "utf8").matchAll(/^import\s[^;]*?from\s+"([^"]+)";/gms)].map((m) => m[1] as string);
const layerOf = (file: string, specifier: string): string | null =>
  specifier.startsWith(".") ? (relative(root, join(file, "..", specifier)).split("/")[0] ?? null) : null;

const IO_BUILTINS =
  /^(node:)?(fs|fs\/promises|net|http|https|http2|tls|dgram|child_process|cluster|worker_threads|readline|os|process)$/;

describe("architecture", () => {
  it.each([
    ["domain", ["domain"], []],
    ["protocol", ["domain", "protocol"], ["zod"]],
    ["projections", ["domain", "protocol", "projections"], ["rxjs"]],
    ["engine", ["domain", "protocol", "projections", "engine"], ["rxjs", "node:crypto"]],
    // The offline consumer reads logs through the engine's one step; the engine never imports it.
    ["replay", ["domain", "protocol", "projections", "engine", "replay"], ["rxjs"]],
  ])("src/%s imports only %j of the project and %j outside it", (layer, allowedLayers, allowedPackages) => {
    const files = filesIn(join(root, layer as string));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      for (const specifier of importsOf(file)) {
        const target = layerOf(file, specifier);
        if (target === null)
          expect(allowedPackages, `${relative(root, file)} imports ${specifier}`).toContain(specifier);
        else expect(allowedLayers, `${relative(root, file)} imports ${specifier}`).toContain(target);
      }
    }
  });

  it("src/domain and src/protocol import no Node built-in that does I/O", () => {
    const pure = [...filesIn(join(root, "domain")), ...filesIn(join(root, "protocol"))];
    const offending = pure.flatMap((file) =>
      importsOf(file)
        .filter((s) => IO_BUILTINS.test(s))
        .map((s) => `${relative(root, file)}: ${s}`),
    );
    expect(offending).toEqual([]);
  });

  it("the decider reads no clock and no randomness", () => {
    const domain = filesIn(join(root, "domain"))
      .map((f) => readFileSync(f, "utf8"))
      .join("\n");
    expect(domain).not.toMatch(/Date\.now|new Date\(|Math\.random|performance\.now|randomBytes|randomUUID/);
  });
});
