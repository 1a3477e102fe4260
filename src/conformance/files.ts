import { fileURLToPath } from "node:url";

/**
 * Where the conformance suite's data lives, relative to the package (not the working directory): the scenario
 * catalogue `conformance/scenarios/*.yaml`, the reference peer's script `conformance/reference-peer.yaml`, and the
 * shared test audio `../shared/audio`.
 */
export const SCENARIO_DIR = fileURLToPath(new URL("../../conformance/scenarios/", import.meta.url));
export const REFERENCE_PEER_SCRIPT = fileURLToPath(new URL("../../conformance/reference-peer.yaml", import.meta.url));
export const AUDIO_DIR = fileURLToPath(new URL("../../../shared/audio/", import.meta.url));
/** Client conformance (issue 23): the cases `conformance/client-cases/*.yaml` and the client peer's script. */
export const CLIENT_CASE_DIR = fileURLToPath(new URL("../../conformance/client-cases/", import.meta.url));
export const CLIENT_PEER_SCRIPT = fileURLToPath(new URL("../../conformance/client-peer.yaml", import.meta.url));
