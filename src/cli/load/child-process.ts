import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The package root: the working folder of the scripts spawned here (tsx, for a .ts script, resolves from it). */
const PACKAGE_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** A TypeScript script running as a process of its own, which reports in JSON lines on stdout. */
export interface ScriptProcess {
  readonly child: ChildProcess;
  /**
   * Resolves with the next line of type `type` (`{"type": ...}`), one already received included.
   * @throws Error with the script's stderr when it exits first or nothing comes within `timeoutMs`.
   */
  line(type: string, timeoutMs: number): Promise<Record<string, unknown>>;
  /** Sends SIGTERM and waits for the process to exit (SIGKILL after 5 s). */
  stop(): Promise<void>;
}

/**
 * Starts `node SCRIPT ...args` (a compiled .js of dist/), or `node --import tsx SCRIPT` for a .ts source (`npm run
 * dev`, tests that import the sources), from the package root, with stdout read as JSON lines (other lines are
 * ignored) and stderr kept for errors.
 */
export const spawnScript = (script: URL, args: readonly string[]): ScriptProcess => {
  const path = fileURLToPath(script);
  const child = spawn(process.execPath, [...(path.endsWith(".ts") ? ["--import", "tsx"] : []), path, ...args], {
    cwd: PACKAGE_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Record<string, unknown>[] = [];
  const waiters = new Set<() => void>();
  let stderr = "";
  let exited: number | null | undefined;
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8000);
  });
  const wake = () => {
    for (const waiter of [...waiters]) waiter();
  };
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (text) => {
    if (!text.startsWith("{")) return;
    lines.push(JSON.parse(text) as Record<string, unknown>);
    wake();
  });
  const exit = new Promise<void>((resolve) =>
    child.once("exit", (code) => {
      exited = code;
      wake();
      resolve();
    }),
  );
  return {
    child,
    line(type, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const index = lines.findIndex((l) => l.type === type);
          if (index >= 0) {
            done();
            resolve(lines.splice(index, 1)[0] as Record<string, unknown>);
          } else if (exited !== undefined) {
            done();
            reject(new Error(`${fileURLToPath(script)} exited (${exited}) before "${type}": ${stderr}`));
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`no "${type}" from ${fileURLToPath(script)} within ${timeoutMs} ms: ${stderr}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    async stop() {
      if (exited !== undefined) return;
      const kill = setTimeout(() => child.kill("SIGKILL"), 5000);
      child.kill("SIGTERM");
      await exit;
      clearTimeout(kill);
    },
  };
};
