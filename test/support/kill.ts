import type { ChildProcess } from "node:child_process";

/** SIGKILLs `child` and resolves once it has exited (at once when it already has). */
export const kill = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
