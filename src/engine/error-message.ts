/** An error's message for a log line or an error event: the Error's own, else the thrown value as text. */
export const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error));
