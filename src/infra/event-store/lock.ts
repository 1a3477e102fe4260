import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { dirname } from "node:path";

/**
 * One server per store (issue 10, "One server per store"): a lock file beside the sqlite file (`<path>.lock`)
 * holding the owner's process id, created exclusively. A lock whose process is gone is stale and taken over.
 */
export class StoreInUseError extends Error {
  constructor(
    readonly path: string,
    readonly pid: number,
  ) {
    super(`${path} is used by process ${pid} (another duplex server); stop it, or pass another --data`);
    this.name = "StoreInUseError";
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
};

/**
 * Takes the lock of the store at `storePath` for this process. Returns the function that releases it.
 * @throws StoreInUseError when a live process holds it.
 */
export const lockStore = (storePath: string): (() => void) => {
  const lockPath = `${storePath}.lock`;
  mkdirSync(dirname(storePath), { recursive: true });
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      const fd = openSync(lockPath, "wx");
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return () => {
        try {
          if (Number(readFileSync(lockPath, "utf8").trim()) === process.pid) unlinkSync(lockPath);
        } catch {
          // Already gone.
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const pid = Number(readFileSync(lockPath, "utf8").trim());
      if (Number.isInteger(pid) && pid > 0 && alive(pid)) throw new StoreInUseError(storePath, pid);
      unlinkSync(lockPath);
    }
  }
  throw new Error(`cannot take the lock ${lockPath}`);
};
