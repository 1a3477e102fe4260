import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";

/**
 * Node.js flags the server runs with: `npm start`, bin/duplex.js's first line and {@link startServerProcess} carry
 * them (a test checks the three agree). `--max-semi-space-size=64` (MiB) lets V8's young generation grow to 64 MiB
 * semi-spaces instead of 16: a realtime session's frames, audio and events die young, and at 200 sessions the
 * default spent about 0.24 cores in GC threads and put p99 first audio at 900 ms; with 64, 0.12 cores and 170 ms
 * (issue 11; docs/benchmarks.md, "Load").
 */
export const SERVE_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=64"];

/** A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0));
    });
  });

/**
 * Starts `duplex serve --port PORT --data DIR` (no `--data` for null: the config's store) as a real process (bin/duplex.js, from the package root as working
 * folder) and resolves once it logs that it listens. `stdout()`: everything it printed there so far (pino lines);
 * `output()`: stdout and stderr together, as they came. `args` go after those (`--config FILE`).
 * @throws Error with its output when it exits first or does not listen within `timeoutMs`.
 */
export const startServerProcess = (
  port: number,
  dataDir: string | null,
  timeoutMs = 60_000,
  args: readonly string[] = [],
): Promise<{ child: ChildProcess; stdout(): string; output(): string }> =>
  new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        ...SERVE_NODE_FLAGS,
        "bin/duplex.js",
        "serve",
        "--port",
        String(port),
        ...(dataDir === null ? [] : ["--data", dataDir]),
        ...args,
      ],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    let all = "";
    const timer = setTimeout(() => reject(new Error(`server did not start: ${all}`)), timeoutMs);
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      all += chunk.toString();
      if (out.includes("duplex server listening")) {
        clearTimeout(timer);
        resolve({ child, stdout: () => out, output: () => all });
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      all += chunk.toString();
    });
    child.once("exit", (code) => reject(new Error(`server exited with ${code}: ${all}`)));
  });
