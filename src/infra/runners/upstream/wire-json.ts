/**
 * The upstream's events as JSON objects (both dialects), and the two readers every side of the upstream runner uses
 * to take a field without trusting its type: a frame from a model server is data, never a typed value.
 */

/** A JSON object as the upstream sends or takes it. */
export type Json = Record<string, unknown>;

/** `value` when it is a string, else null. */
export const str = (value: unknown): string | null => (typeof value === "string" ? value : null);

/** `value` when it is a JSON object (not null, not an array), else null. */
export const obj = (value: unknown): Json | null =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : null;
