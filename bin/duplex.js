#!/usr/bin/env -S node --max-semi-space-size=64
// Entry point of the `duplex` command: registers tsx so the TypeScript sources run as they are, then hands over
// to the CLI in src/cli/main.ts. The flags of the first line are SERVE_NODE_FLAGS (src/cli/server-process.ts).
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
