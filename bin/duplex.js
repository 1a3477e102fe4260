#!/usr/bin/env -S node --max-semi-space-size=64
// Entry point of the `duplex` command: the CLI compiled to dist/ by `npm run build` (`npm ci` runs it through the
// `prepare` script; `npm start` and `npm test` run it first). `npm run dev -- ARGS` runs the sources through tsx
// instead. The flags of the first line are SERVE_NODE_FLAGS (src/cli/server-process.ts).
import { existsSync } from "node:fs";

const main = new URL("../dist/cli/main.js", import.meta.url);
if (!existsSync(main)) {
  process.stderr.write("duplex: dist/ is missing: run npm run build (npm ci runs it)\n");
  process.exit(2);
}
await import(main.href);
