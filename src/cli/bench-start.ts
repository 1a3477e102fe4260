import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { sqlitePathIn } from "../infra/config.ts";
import { createSqliteEventStore } from "../infra/event-store/index.ts";
import { percentile } from "./load/stats.ts";

/** The package root (bin/, src/, dist/, node_modules/): two folders up from src/cli/ and from dist/cli/ alike. */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** Median wall time in ms of `runs` runs of `node ...args` from the package root. @throws Error when one fails. */
const medianMs = (args: readonly string[], runs: number): number => {
  const times: number[] = [];
  for (let i = 0; i < runs; i += 1) {
    const started = performance.now();
    const r = spawnSync(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
    times.push(performance.now() - started);
    if (r.status !== 0) throw new Error(`node ${args.join(" ")} exited ${r.status}: ${String(r.stderr).slice(-400)}`);
  }
  return Math.round(percentile(times, 50) * 10) / 10;
};

/**
 * `duplex bench --only start`: how long a CLI call takes before it does anything (issue 19, "A compiled start").
 * Medians of `runs` runs (default 7) of `duplex --version` and `duplex sessions` (an empty store) compiled
 * (bin/duplex.js, dist/) and from the sources through tsx (`npm run dev`, the way every call ran before the build),
 * each also as a ratio to a bare `node -e 0` of the same run. The tsx figures need the dev dependencies (null
 * without tsx). Times in ms.
 */
export const benchStart = async (o: { runs?: number; print: (line: Record<string, unknown>) => void }) => {
  const runs = o.runs ?? 7;
  const data = await mkdtemp(join(tmpdir(), "duplex-bench-start-"));
  try {
    await createSqliteEventStore({ path: sqlitePathIn(data) }).close();
    const bare = medianMs(["-e", "0"], runs);
    const tsx = existsSync(join(ROOT, "node_modules/tsx"));
    const compiled = (args: string[]) => medianMs(["bin/duplex.js", ...args], runs);
    const sources = (args: string[]) => (tsx ? medianMs(["--import", "tsx", "src/cli/main.ts", ...args], runs) : null);
    const version = compiled(["--version"]);
    const versionTsx = sources(["--version"]);
    const sessions = compiled(["sessions", "--data", data]);
    const sessionsTsx = sources(["sessions", "--data", data]);
    const ratio = (value: number | null) => (value === null ? null : Math.round((value / bare) * 10) / 10);
    o.print({
      bench: "start",
      meaning:
        "median ms from spawning a CLI call to its exit, compiled (dist/) and from the sources through tsx, each also as a ratio to a bare `node -e 0` of the same run: lower is better",
      runs,
      bare_node_ms: bare,
      version_ms: version,
      version_ms_tsx: versionTsx,
      sessions_ms: sessions,
      sessions_ms_tsx: sessionsTsx,
      version_ratio_to_bare_node: ratio(version),
      version_ratio_to_bare_node_tsx: ratio(versionTsx),
      sessions_ratio_to_bare_node: ratio(sessions),
      sessions_ratio_to_bare_node_tsx: ratio(sessionsTsx),
    });
  } finally {
    await rm(data, { recursive: true, force: true });
  }
};
