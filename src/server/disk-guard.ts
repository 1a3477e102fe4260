import { statfs } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import type { AdmissionRefusal } from "../engine/index.ts";

/**
 * The store's disk (issue 32, part 2; docs/deploy.md, "Limits"): the free space of the folder that holds the sqlite
 * file, looked at every {@link DISK_CHECK_INTERVAL_MS} (one `statfs`, not one per append). Below
 * `limits.disk_free_floor_mb` new sessions are refused with `resource_exhausted`, as at `max_sessions`; below
 * `limits.disk_hard_floor_mb` the open sessions are ended too, while their logs can still be written (`onHardFloor`).
 * Each change of level is logged once, the recovery included, never once per refused session. A store with no local
 * disk (PostgreSQL, KurrentDB, sqlite `:memory:`) has no guard.
 */

/** How often the free space is looked at, ms (5 s). */
export const DISK_CHECK_INTERVAL_MS = 5000;

/** `ok`: above the floor; `low`: below `disk_free_floor_mb` (no new sessions); `critical`: below the hard floor too. */
export type DiskLevel = "ok" | "low" | "critical";

/** `limits.disk_free_floor_mb` and `limits.disk_hard_floor_mb`, MB (2^20 bytes). */
export interface DiskFloors {
  readonly floorMb: number;
  readonly hardFloorMb: number;
}

/** Bytes free to this process (`statfs`'s `bavail * bsize`) on the file system that holds `dir`. */
export type FreeBytes = (dir: string) => Promise<number>;

/** The file system's free space for unprivileged users. @throws what `fs.statfs` throws (a folder that is gone). */
export const statfsFreeBytes: FreeBytes = async (dir) => {
  const stats = await statfs(dir);
  return stats.bavail * stats.bsize;
};

const MB = 1024 * 1024;

/** The level of `freeBytes` against `floors`: pure. A hard floor above the floor refuses new sessions from it too. */
export const diskLevelOf = (freeBytes: number, floors: DiskFloors): DiskLevel => {
  if (freeBytes < floors.hardFloorMb * MB) return "critical";
  if (freeBytes < Math.max(floors.floorMb, floors.hardFloorMb) * MB) return "low";
  return "ok";
};

/** What the guard logs with: structured, static messages (pino's shape). */
export interface DiskGuardLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface DiskGuardOptions extends DiskFloors {
  /** The folder whose file system is watched: the sqlite file's. */
  readonly dir: string;
  /** Free bytes on `dir`'s file system (default `statfsFreeBytes`; tests: a disk that fills up). */
  readonly freeBytes?: FreeBytes;
  /** ms between looks (default {@link DISK_CHECK_INTERVAL_MS}). */
  readonly intervalMs?: number;
  readonly log: DiskGuardLog;
  /**
   * Called on every look that finds the disk below the hard floor (the first one, and later ones while it stays
   * there: sessions recovered or opened meanwhile end too), with the message their clients get.
   */
  readonly onHardFloor: (message: string) => void;
}

/** A running guard. */
export interface DiskGuard {
  /** The level of the last look (`ok` before the first). */
  readonly level: DiskLevel;
  /** Why a new session is refused now (`resource_exhausted`), or null; read by the engine's admission. */
  refusal(): AdmissionRefusal | null;
  /** Looks at the disk now; resolves with the level found (a failed `statfs` is logged once and keeps the level). */
  check(): Promise<DiskLevel>;
  /** Looks at once, then every `intervalMs` (the timer does not keep the process alive). */
  start(): Promise<void>;
  close(): void;
}

/** Creates the guard of one store's disk; nothing is looked at before `check` or `start`. */
export const createDiskGuard = (options: DiskGuardOptions): DiskGuard => {
  const freeBytes = options.freeBytes ?? statfsFreeBytes;
  const floors: DiskFloors = { floorMb: options.floorMb, hardFloorMb: options.hardFloorMb };
  let level: DiskLevel = "ok";
  let freeMb: number | null = null;
  let failing = false;
  let timer: NodeJS.Timeout | null = null;
  const where = { dir: options.dir, floorMb: floors.floorMb, hardFloorMb: floors.hardFloorMb };

  const changed = (next: DiskLevel): void => {
    const fields = { ...where, freeMb };
    if (next === "ok") options.log.info(fields, "store disk has room again: new sessions are admitted");
    else if (next === "low")
      options.log.warn(fields, "store disk below limits.disk_free_floor_mb: new sessions are refused");
    else options.log.error(fields, "store disk below limits.disk_hard_floor_mb: open sessions are ended");
  };

  const guard: DiskGuard = {
    get level() {
      return level;
    },
    refusal() {
      if (level === "ok") return null;
      return {
        code: "resource_exhausted",
        message: `the event store's disk has ${freeMb} MB free, below limits.disk_free_floor_mb (${Math.max(floors.floorMb, floors.hardFloorMb)} MB): no new sessions until space is freed`,
      };
    },
    async check() {
      let bytes: number;
      try {
        bytes = await freeBytes(options.dir);
      } catch (error) {
        if (!failing) options.log.warn({ ...where, err: error }, "store disk free space unknown: statfs failed");
        failing = true;
        return level;
      }
      failing = false;
      freeMb = Math.floor(bytes / MB);
      const next = diskLevelOf(bytes, floors);
      if (next !== level) changed(next);
      level = next;
      if (level === "critical")
        options.onHardFloor(
          `the event store's disk has ${freeMb} MB free, below limits.disk_hard_floor_mb (${floors.hardFloorMb} MB): the session ends while its log can still be written`,
        );
      return level;
    },
    async start() {
      await guard.check();
      timer ??= setInterval(() => void guard.check(), options.intervalMs ?? DISK_CHECK_INTERVAL_MS);
      timer.unref();
    },
    close() {
      if (timer !== null) clearInterval(timer);
      timer = null;
    },
  };
  return guard;
};

/**
 * The guard of a deployment's store, or null when it has no local disk: a sqlite file's folder (PostgreSQL,
 * KurrentDB and sqlite `:memory:` have none). `onHardFloor` as {@link DiskGuardOptions}.
 */
export const diskGuardFor = (
  store: { readonly kind: string; readonly path?: string },
  limits: { readonly disk_free_floor_mb: number; readonly disk_hard_floor_mb: number },
  log: DiskGuardLog,
  onHardFloor: (message: string) => void,
  options: { readonly freeBytes?: FreeBytes; readonly intervalMs?: number } = {},
): DiskGuard | null => {
  if (store.kind !== "sqlite" || store.path === undefined || store.path === "" || store.path === ":memory:")
    return null;
  return createDiskGuard({
    dir: dirname(resolve(store.path)),
    floorMb: limits.disk_free_floor_mb,
    hardFloorMb: limits.disk_hard_floor_mb,
    log,
    onHardFloor,
    ...options,
  });
};
