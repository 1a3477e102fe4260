#!/usr/bin/env node
// Entry point of the `duplex` command: registers tsx so the TypeScript sources run as they are, then hands over
// to the CLI in src/cli/main.ts.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
