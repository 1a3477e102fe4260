/**
 * Branded ids (STYLE.md, "Branded ids"). A response id cannot be passed where an item id is expected.
 * Ids are derived from the session id and counters in the session state, so a replay derives the same ones
 * (DESIGN.md, rule 1). Only the session id itself is random, allocated by the engine (BEHAVIOUR.md, "Identity").
 */
declare const brand: unique symbol;
export type Brand<T, B extends string> = T & { readonly [brand]: B };

export type SessionId = Brand<string, "SessionId">;
export type ResponseId = Brand<string, "ResponseId">;
export type ItemId = Brand<string, "ItemId">;

/** `sess_` + 32 hex digits (128 bits); the engine supplies the random part. */
export const isSessionId = (value: string): value is SessionId => /^sess_[0-9a-f]{32}$/.test(value);

/** A short tag of the session id (its first 8 hex digits) that keeps derived ids readable and distinct. */
export const tagOf = (sessionId: string): string => sessionId.slice(5, 13);

/**
 * `value` with every string's derived-id tag of session `from` (`_<tag>_`) made the tag of session `to`, so that what
 * one session recorded names the same items and responses in another (a recorded session re-driven live); bytes
 * and everything else are left alone.
 */
export const retagged = <T>(value: T, from: string, to: string): T => {
  const [a, b] = [tagOf(from), tagOf(to)];
  if (a === b) return value;
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return v.split(`_${a}_`).join(`_${b}_`);
    if (v instanceof Uint8Array || typeof v !== "object" || v === null) return v;
    if (Array.isArray(v)) return v.map(walk);
    return Object.fromEntries(Object.entries(v).map(([k, inner]) => [k, walk(inner)]));
  };
  return walk(value) as T;
};

/** The n-th response of a session (n from 1): `resp_<tag>_<n>`. Never reused, even after a cancel. */
export const responseIdFor = (sessionId: SessionId, n: number): ResponseId =>
  `resp_${tagOf(sessionId)}_${n}` as ResponseId;

/** The assistant item of a response: `item_<response_id>` (BEHAVIOUR.md, "Identity"). */
export const assistantItemIdFor = (responseId: ResponseId): ItemId => `item_${responseId}` as ItemId;

/** The n-th user item of a session (n from 1): `item_<tag>_u<n>`. */
export const userItemIdFor = (sessionId: SessionId, n: number): ItemId => `item_${tagOf(sessionId)}_u${n}` as ItemId;

/** The `event_id` of a server event: derived from its `server_event_seq` (0 for `session.created`). */
export const serverEventIdFor = (sessionId: SessionId, seq: number): string => `event_${tagOf(sessionId)}_${seq}`;
