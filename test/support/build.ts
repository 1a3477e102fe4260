import { execFileSync } from "node:child_process";

/**
 * vitest's global setup: compiles src/ to dist/ (`npm run build`, incremental: about a second when nothing changed)
 * before any test runs, so the commands the tests spawn (bin/duplex.js, the load bench's processes) run the sources
 * under test, never a stale build. @throws Error with tsc's output when the build fails.
 */
export default function build(): void {
  execFileSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json"], {
    stdio: ["ignore", "inherit", "inherit"],
  });
}
