import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
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

/**
 * The files `file` imports or re-exports from within src (static `import`/`export ... from`, type-only ones
 * included; a lazy `await import()` is not an edge): `./x.ts` or `./x.js` is x.ts, a folder is its index.ts.
 */
const localEdgesOf = (file: string, files: ReadonlySet<string>): string[] =>
  [...readFileSync(file, "utf8").matchAll(/^(?:import|export)\s[^;]*?from\s+"(\.[^"]+)";/gms)].flatMap((m) => {
    const target = join(dirname(file), (m[1] as string).replace(/\.js$/, ".ts"));
    const resolved = [target, `${target}.ts`, join(target, "index.ts")].find((t) => files.has(t));
    return resolved === undefined ? [] : [resolved];
  });

/** The strongly connected components of more than one file (Tarjan): each is an import circle. */
const circlesOf = (graph: ReadonlyMap<string, readonly string[]>): string[][] => {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    for (;;) {
      const w = stack.pop() as string;
      onStack.delete(w);
      component.push(w);
      if (w === v) break;
    }
    if (component.length > 1) circles.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return circles;
};

/** Issue 34, part 5: the rooms a newcomer can hold. */
const MAX_FILE_LINES = 400;

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

  it(`no src file is over ${MAX_FILE_LINES} lines`, () => {
    const long = filesIn(root)
      .map((file) => ({ file: relative(root, file), lines: readFileSync(file, "utf8").split("\n").length - 1 }))
      .filter((f) => f.lines > MAX_FILE_LINES);
    expect(long).toEqual([]);
  });

  it("src has no import circle, type-only imports and re-exports included", () => {
    const files = new Set(filesIn(root));
    const graph = new Map([...files].map((file) => [file, localEdgesOf(file, files)]));
    // The resolver finds the edges it should: the engine's index re-exports its host.
    expect(graph.get(join(root, "engine", "index.ts"))).toContain(join(root, "engine", "session-host.ts"));
    expect(circlesOf(graph).map((circle) => circle.map((f) => relative(root, f)))).toEqual([]);
  });
});
