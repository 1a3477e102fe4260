import type { ErrorCode } from "../domain/index.ts";

/**
 * Errors before a session exists use the flat native shape `{type: "error", error: "message", code}`
 * (BEHAVIOUR.md, "Errors"; reference, "Handshake-stage errors").
 */
export const handshakeError = (code: ErrorCode, message: string): string =>
  JSON.stringify({ type: "error", error: message, code });
