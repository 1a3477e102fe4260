/** The `error` server event (BEHAVIOUR.md, "Errors"): its envelope, built from an error code of the catalogue. */
import { ERROR_CODES } from "../domain/index.ts";
import type { ServerEvent } from "./server-event.ts";

/** An error event body with the envelope of BEHAVIOUR.md, "Errors". */
export const errorBody = (
  code: keyof typeof ERROR_CODES,
  message: string,
  clientEventId: string | null,
  param: string | null,
): ServerEvent => ({
  type: "error",
  error: { type: ERROR_CODES[code].type, code, message, event_id: clientEventId, param },
});
