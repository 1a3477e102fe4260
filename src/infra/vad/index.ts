/** Voice activity detection adapters of the Vad port (DESIGN.md, "Ports": Vad). */
export { createSileroVad, SILERO_VAD_V5_SHA256, type SileroVadOptions } from "./silero.ts";
