/** The envelope of every message of the domain: a discriminated union member `{ type, data }`. */

/** A message: a discriminated union member `{ type, data }` (STYLE.md, "Messages are discriminated unions"). */
export interface Message<T extends string, D> {
  readonly type: T;
  readonly data: D;
}
