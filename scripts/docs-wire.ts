// Writes docs/wire.md from the event catalogue (src/protocol/catalogue.ts). `npm run docs:wire`.
import { writeFileSync } from "node:fs";
import { renderWireDoc } from "../src/protocol/catalogue.ts";

writeFileSync(new URL("../docs/wire.md", import.meta.url), renderWireDoc());
