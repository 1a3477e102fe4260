import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { loadConfig } from "../../src/infra/config.ts";
import { startTestServer } from "../support/server.ts";
import { captureDuplexProgram, type ParseDuplexLine } from "./cli-program.ts";
import { type FencedBlock, fencedBlocks } from "./fenced-blocks.ts";
import { duplexArgs, shellCommands } from "./shell-commands.ts";

/**
 * Every fenced block of README.md and docs/*.md is checked by its language (issue 33, part 6: docs a newcomer can
 * trust): `ts` and `js` blocks run (those that dial 127.0.0.1:8099 against an in-process server instead), `yaml`
 * blocks load through the config loader, `json` blocks parse, and the `duplex` command lines of `sh` blocks parse
 * with the CLI's own program without running. `text` blocks (diagrams, layouts) hold no code. A block marked
 * `no-run` (```` ```js no-run ````) is not run, and is counted: NOT_RUN names how many each file has.
 */
const run = promisify(execFile);
const ROOT = process.cwd();
/** The port of the in-process server the blocks that connect are pointed at (this file's range: 19700-19799). */
const PORT = 19710;
/** Blocks marked `no-run`, by file: a change here is a change to what the docs prove. */
const NOT_RUN: Readonly<Record<string, number>> = { "docs/clients.md": 1, "docs/deploy.md": 1 };
const LANGS = ["ts", "js", "yaml", "json", "sh", "sql", "text"];
/** The run's throwaway PostgreSQL (test/support/postgres.ts), or null where PostgreSQL is not installed. */
const postgresUrl = inject("postgresUrl");

const docFiles = async (): Promise<string[]> => [
  "README.md",
  ...(await readdir(join(ROOT, "docs")))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
];

const where = (block: FencedBlock, line = 1): string => `${block.file}:${block.line + line}`;

/**
 * `block`'s code as a module file in `dir`: its relative imports (`./src/client/index.ts`) made absolute, since the
 * docs run their code from the clone's root, and `8099` replaced by `port`.
 */
const moduleOf = (block: FencedBlock, port: number): string =>
  block.code
    .replaceAll("8099", String(port))
    .replace(
      /(\bfrom\s*|\bimport\s*\(\s*|^import\s*)(["'])(\.\.?\/[^"']+)\2/gm,
      (_m, head: string, quote: string, spec: string) => `${head}${quote}${resolve(ROOT, spec)}${quote}`,
    );

describe("the docs' code blocks", () => {
  let blocks: FencedBlock[] = [];
  let parse: ParseDuplexLine;
  beforeAll(async () => {
    const files = await docFiles();
    blocks = (await Promise.all(files.map(async (f) => fencedBlocks(await readFile(join(ROOT, f), "utf8"), f)))).flat();
    parse = await captureDuplexProgram();
  });

  it("every block names a language this test checks (ts, js, yaml, json, sh, sql, text), or is marked no-run", () => {
    const unknown = blocks
      .filter((b) => !LANGS.includes(b.lang) && !b.flags.includes("no-run"))
      .map((b) => `${where(b, 0)} "${b.lang}"`);
    expect(unknown).toEqual([]);
    // README.md and docs/ have blocks of every checked kind but json: the test cannot pass by finding nothing.
    for (const lang of ["ts", "js", "yaml", "sh"])
      expect(blocks.filter((b) => b.lang === lang).length).toBeGreaterThan(0);
  });

  it("marks as no-run only the blocks NOT_RUN counts", () => {
    const counts: Record<string, number> = {};
    for (const b of blocks.filter((b) => b.flags.includes("no-run"))) counts[b.file] = (counts[b.file] ?? 0) + 1;
    expect(counts).toEqual(NOT_RUN);
  });

  it("parses every duplex command line of the sh blocks with the CLI's program: its commands and flags exist", async () => {
    const refused: string[] = [];
    let parsed = 0;
    for (const block of blocks.filter((b) => b.lang === "sh" && !b.flags.includes("no-run"))) {
      for (const command of shellCommands(block.code)) {
        const args = duplexArgs(command.words);
        if (args === null) continue;
        parsed += 1;
        const error = await parse(args);
        if (error !== null) refused.push(`${where(block, command.line)} duplex ${args.join(" ")}: ${error}`);
      }
    }
    expect(refused).toEqual([]);
    expect(parsed).toBeGreaterThan(40);
  });

  it("loads every yaml block (each of its documents) through the config loader", async () => {
    const dir = await mkdtemp(join(tmpdir(), "duplex-docs-yaml-"));
    try {
      const refused: string[] = [];
      let loaded = 0;
      for (const block of blocks.filter((b) => b.lang === "yaml" && !b.flags.includes("no-run"))) {
        const documents = parseAllDocuments(block.code);
        if (!Array.isArray(documents)) throw new Error(`${where(block, 0)}: no YAML documents`);
        for (const [n, document] of documents.entries()) {
          if (document.errors.length > 0) {
            refused.push(`${where(block, 0)} document ${n + 1}: ${document.errors[0]?.message.split("\n")[0]}`);
            continue;
          }
          const file = join(dir, `block-${block.line}-${n}.yaml`);
          await writeFile(file, document.toString());
          // No environment: DUPLEX_EVENT_STORE_URL in the shell running the tests must not hide a bad store.
          await loadConfig(file, {}).then(
            () => {
              loaded += 1;
            },
            (error: Error) => refused.push(`${where(block, 0)} document ${n + 1}: ${error.message}`),
          );
        }
      }
      expect(refused).toEqual([]);
      expect(loaded).toBeGreaterThan(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("parses every json block", () => {
    const refused: string[] = [];
    for (const block of blocks.filter((b) => b.lang === "json" && !b.flags.includes("no-run"))) {
      try {
        JSON.parse(block.code);
      } catch (error) {
        refused.push(`${where(block, 0)}: ${(error as Error).message}`);
      }
    }
    expect(refused).toEqual([]);
  });

  it.skipIf(postgresUrl === null)(
    "runs the sql blocks on a PostgreSQL server, and a node starts on the database they create, as the role they create",
    async () => {
      // The blocks' names (role and database `duplex`) made unique, so the run's server is left as it was.
      const name = `docs_${process.pid}_${Date.now().toString(36)}`;
      const sql = blocks.filter((b) => b.lang === "sql" && !b.flags.includes("no-run"));
      expect(sql.length).toBeGreaterThan(0);
      const admin = new pg.Client(postgresUrl ?? "");
      await admin.connect();
      try {
        for (const block of sql)
          for (const statement of block.code.replaceAll(/\bduplex\b/g, name).split(";")) {
            if (statement.trim() !== "") await admin.query(statement);
          }
        const url = new URL(postgresUrl ?? "");
        url.username = name;
        url.password = /PASSWORD '([^']*)'/.exec(sql.map((b) => b.code).join(""))?.[1] ?? "";
        url.pathname = `/${name}`;
        const node = await startTestServer({ event_store: { kind: "postgres", url: url.toString(), poll_ms: 50 } });
        await node.stop();
        const tables = new pg.Client(url.toString());
        await tables.connect();
        const owned = await tables.query("SELECT tablename FROM pg_tables WHERE tableowner = current_user ORDER BY 1");
        await tables.end();
        expect(owned.rows.map((r: { tablename: string }) => r.tablename)).toEqual(
          expect.arrayContaining(["duplex_entries", "duplex_streams"]),
        );
      } finally {
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await admin.query(`DROP ROLE IF EXISTS ${name}`);
        await admin.end();
      }
    },
  );

  describe("ts and js blocks, as a user runs them (from the clone's root), against an in-process server", () => {
    let server: Awaited<ReturnType<typeof startTestServer>>;
    let dir = "";
    let code: { block: FencedBlock; file: string }[] = [];
    beforeAll(async () => {
      server = await startTestServer({ listen: { host: "127.0.0.1", port: PORT } });
      dir = await mkdtemp(join(tmpdir(), "duplex-docs-code-"));
      // Bare imports (`openai`) resolve from the block's folder: this package's node_modules.
      await symlink(join(ROOT, "node_modules"), join(dir, "node_modules"));
      code = blocks
        .filter((b) => (b.lang === "ts" || b.lang === "js") && !b.flags.includes("no-run"))
        .map((block, n) => ({ block, file: join(dir, `block-${n}.${block.lang === "ts" ? "mts" : "mjs"}`) }));
      for (const { block, file } of code) await writeFile(file, moduleOf(block, PORT));
    });
    afterAll(async () => {
      await server?.stop();
      if (dir !== "") await rm(dir, { recursive: true, force: true });
    });

    const sessions = async (): Promise<{ id: string; state: string; responses: number; error_codes: string[] }[]> =>
      ((await (await fetch(`http://127.0.0.1:${PORT}/v1/sessions?limit=200`)).json()) as { data: [] }).data;

    it("type-checks each one with the project's compiler options (js blocks through checkJs)", async () => {
      const project = {
        extends: join(ROOT, "tsconfig.json"),
        compilerOptions: { allowJs: true, checkJs: true },
        files: [...code.map((c) => c.file), join(ROOT, "src/infra/audio/speex-resampler-wasm.d.ts")],
        include: [],
      };
      await writeFile(join(dir, "tsconfig.json"), JSON.stringify(project));
      const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
      const { stdout } = await run(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: dir }).catch(
        (error: { stdout: string }) => error,
      );
      // Name each block by its place in the docs rather than its temp file.
      const named = code.reduce((text, c) => text.replaceAll(basename(c.file), where(c.block, 0)), stdout);
      expect(named).toBe("");
      expect(code.length).toBeGreaterThan(1);
    });

    it("runs each one to its end; each that dials the server holds one session that answered and closed", async () => {
      const ran: string[] = [];
      for (const { block, file } of code) {
        const before = new Set((await sessions()).map((s) => s.id));
        const { stderr } = await run(process.execPath, [...(block.lang === "ts" ? ["--import", "tsx"] : []), file], {
          cwd: ROOT,
          timeout: 15_000,
        }).catch((error: Error) => {
          throw new Error(`${where(block, 0)} failed: ${error.message}`);
        });
        expect(stderr, where(block, 0)).toBe("");
        if (block.code.includes("8099")) {
          const opened = async () => (await sessions()).filter((s) => !before.has(s.id));
          await expect
            .poll(async () => (await opened()).map((s) => [s.state.split(" ")[0], s.responses, s.error_codes]))
            .toEqual([["closed", 1, []]]);
        }
        ran.push(block.file);
      }
      expect(ran).toEqual(expect.arrayContaining(["README.md", "docs/clients.md"]));
    });
  });
});

describe("fencedBlocks", () => {
  it("reads the info string's language and flags, the opening line, and code indented under a list item", () => {
    const md = [
      "# t",
      "",
      "```ts no-run",
      "const a = 1;",
      "```",
      "- item",
      "  ```sh",
      "  npx duplex --help",
      "  ```",
      "",
    ];
    expect(fencedBlocks(md.join("\n"), "x.md")).toEqual([
      { file: "x.md", line: 3, lang: "ts", flags: ["no-run"], code: "const a = 1;\n" },
      { file: "x.md", line: 7, lang: "sh", flags: [], code: "npx duplex --help\n" },
    ]);
  });

  it("closes a fence only with one of its character at least as long", () => {
    const md = ["````md", "```ts", "x", "```", "````", "~~~", "y", "~~~"].join("\n");
    expect(fencedBlocks(md, "x.md").map((b) => [b.lang, b.code])).toEqual([
      ["md", "```ts\nx\n```\n"],
      ["", "y\n"],
    ]);
  });
});

describe("shellCommands and duplexArgs", () => {
  it("splits commands at operators and newlines, joins continued lines, drops comments, quotes and redirections", () => {
    const sh = [
      "npm ci && npm start     # the server",
      "npx duplex demo --url 'ws://h:1/v1/realtime?native_duplex=1' \\",
      '  --input "a b.wav"',
      "curl -s http://h/v1/x > s.jsonl 2>&1",
      "for n in 1 20; do DUPLEX_X=1 npx duplex bench load --sessions $n; done",
    ].join("\n");
    expect(shellCommands(sh)).toEqual([
      { line: 1, words: ["npm", "ci"] },
      { line: 1, words: ["npm", "start"] },
      {
        line: 2,
        words: ["npx", "duplex", "demo", "--url", "ws://h:1/v1/realtime?native_duplex=1", "--input", "a b.wav"],
      },
      { line: 4, words: ["curl", "-s", "http://h/v1/x"] },
      { line: 5, words: ["for", "n", "in", "1", "20"] },
      { line: 5, words: ["DUPLEX_X=1", "npx", "duplex", "bench", "load", "--sessions", "$n"] },
    ]);
    expect(() => shellCommands("npx duplex demo --url 'ws://h\n")).toThrow("line 1: unclosed '");
  });

  it("gives the duplex program's arguments of npx duplex, npm start --, and nothing for other commands", () => {
    expect(duplexArgs(["DUPLEX_X=1", "npx", "duplex", "bench", "load", "--sessions", "$n"])).toEqual([
      "bench",
      "load",
      "--sessions",
      "1",
    ]);
    expect(duplexArgs(["npm", "start", "--", "--port", "9000"])).toEqual(["serve", "--port", "9000"]);
    expect(duplexArgs(["npm", "start"])).toEqual(["serve"]);
    expect(duplexArgs(["curl", "-s", "http://h/v1/x"])).toBeNull();
    expect(duplexArgs(["npm", "ci"])).toBeNull();
  });

  it("the captured program refuses an unknown flag, a bad value and an unknown command, and takes --help", async () => {
    const parse = await captureDuplexProgram();
    expect(await parse(["show", "--no-such-flag"])).toBe("error: unknown option '--no-such-flag'");
    expect(await parse(["serve", "--port", "x"])).toMatch(/^error: option '--port <port>' argument 'x' is invalid/);
    expect(await parse(["serv"])).toMatch(/^error: unknown command 'serv'/);
    expect(await parse(["demo"])).toBe("error: required option '--input <wav>' not specified");
    expect(await parse(["--help"])).toBeNull();
    expect(await parse(["serve", "--port", "9000", "--host", "0.0.0.0"])).toBeNull();
    // A parse leaves nothing behind for the next: the same command without the flag that failed parses.
    expect(await parse(["sessions", "--data", "./data"])).toBeNull();
  });
});
