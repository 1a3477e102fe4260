import { ERROR_CODES, type ErrorCode } from "../domain/index.ts";

/**
 * A refusal of a chat completion (`POST /v1/chat/completions`): its HTTP status and OpenAI's error envelope,
 * `{error: {type, code, message, param}}`, `param` the dotted path of the field at fault
 * (`messages.0.content.1.input_audio.data`) or null. `cause` (a store's error) stays inside: never in the body.
 */
export class ChatError extends Error {
  override readonly name = "ChatError";
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly param: string | null = null,
    options?: { readonly cause?: unknown },
  ) {
    super(message, options);
  }
  /** The response body: OpenAI's envelope with the code's class from the error table. */
  body(): Record<string, unknown> {
    return { error: { type: ERROR_CODES[this.code].type, code: this.code, message: this.message, param: this.param } };
  }
}

/** The HTTP status of an error the session reported: 400 for the client's errors, 429 for capacity, else 500. */
export const statusOf = (code: ErrorCode): number => {
  const type: string = ERROR_CODES[code].type;
  return type === "invalid_request_error" ? 400 : type === "rate_limit_error" ? 429 : 500;
};
