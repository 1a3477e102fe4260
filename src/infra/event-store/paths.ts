import { join } from "node:path";

/** The sqlite file inside a `--data DIR`: `DIR/duplex.sqlite`. */
export const sqlitePathIn = (dataDir: string): string => join(dataDir, "duplex.sqlite");
