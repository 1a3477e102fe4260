import { createHash, randomBytes } from "node:crypto";
import type { NewEntry, RecordedEntry } from "./ports/index.ts";

/**
 * The hash chain of a session's log (issue 20, part 4; the formula is in docs/log-format.md): each entry's
 * `metadata.chain` is
 *
 *     chain(n) = hex(SHA-256( chain(n-1) || 0x0a || canonical(entry n) ))      chain(-1) = "" (the empty string)
 *
 * where `canonical(entry)` is the UTF-8 of `JSON.stringify([type, metadata without chain, data])` with every byte
 * array written as `{"$b64": "<standard base64>"}`. It is computed at append, over the entry as stored (an audio
 * delta stored as a reference to its input's audio is hashed as that reference), so a change of one byte of any
 * entry, a removed entry or entries put in another order make every digest from there on differ. It is not a
 * signature: whoever rewrites the log can rewrite the chain; it shows a change, it does not prove who made it.
 */

/** The chain value before the first entry. */
export const CHAIN_GENESIS = "";

/** The entry's canonical bytes, as hashed (see the module comment). */
export const canonicalBytes = (entry: Pick<NewEntry, "type" | "data" | "metadata">): Buffer => {
  const { chain: _chain, ...metadata } = entry.metadata as Record<string, unknown>;
  const text = JSON.stringify([entry.type, metadata, entry.data], function (this: unknown, key, value: unknown) {
    // `this[key]` is the value before toJSON (a Buffer's toJSON would turn it into an array of numbers).
    const raw = (this as Record<string, unknown>)[key];
    return raw instanceof Uint8Array
      ? { $b64: Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString("base64") }
      : value;
  });
  return Buffer.from(text, "utf8");
};

/**
 * Stands for the i-th byte array in the JSON text `chainOf` hashes. JSON.stringify writes its NULs as the six
 * characters `\u0000`, which the pattern below looks for; the process's random nonce keeps a string of the entry
 * from passing for a slot, and a text whose slots are not exactly the byte arrays in order is hashed whole instead.
 */
const NONCE = randomBytes(6).toString("hex");
const slot = (i: number): string => `\u0000${NONCE}:${i}\u0000`;
const SLOT = new RegExp(String.raw`"\\u0000${NONCE}:(\d+)\\u0000"`, "g");

/**
 * The chain value of `entry` after `previous`, as 64 lowercase hex digits: SHA-256 over the same bytes as
 * `canonicalBytes`, fed to the hash piece by piece (the JSON around each byte array, then its base64), so that no
 * text of the whole entry, audio included, is built and copied for every entry appended.
 */
export const chainOf = (previous: string, entry: Pick<NewEntry, "type" | "data" | "metadata">): string => {
  const { chain: _chain, ...metadata } = entry.metadata as Record<string, unknown>;
  const bytes: Uint8Array[] = [];
  const text = JSON.stringify([entry.type, metadata, entry.data], function (this: unknown, key, value: unknown) {
    const raw = (this as Record<string, unknown>)[key];
    if (!(raw instanceof Uint8Array)) return value;
    bytes.push(raw);
    return { $b64: slot(bytes.length - 1) };
  });
  const hash = createHash("sha256").update(previous).update("\n");
  const slots = [...text.matchAll(SLOT)];
  if (slots.length !== bytes.length || slots.some((m, i) => Number(m[1]) !== i))
    return hash.update(canonicalBytes(entry)).digest("hex");
  let from = 0;
  for (const [i, match] of slots.entries()) {
    const raw = bytes[i] as Uint8Array;
    const at = match.index ?? 0;
    // The quotes around the slot stay: the base64 goes between them.
    hash.update(text.slice(from, at + 1));
    hash.update(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString("base64"));
    from = at + match[0].length - 1;
  }
  return hash.update(text.slice(from)).digest("hex");
};

/** `entries` with their `metadata.chain` set, each after the one before; returns them and the new head. */
export const chained = (head: string, entries: readonly NewEntry[]): { entries: NewEntry[]; head: string } => {
  let at = head;
  const out = entries.map((entry) => {
    at = chainOf(at, entry);
    return { ...entry, metadata: { ...entry.metadata, chain: at } };
  });
  return { entries: out, head: at };
};

/** The chain head of a log read back: its last entry's `metadata.chain`, or the genesis without one. */
export const chainHeadOf = (entries: readonly RecordedEntry[]): string => {
  const last = entries.at(-1)?.metadata.chain;
  return typeof last === "string" ? last : CHAIN_GENESIS;
};

/** What `verifyChain` found. */
export type ChainVerdict =
  | { readonly ok: true; readonly entries: number; readonly head: string }
  | {
      readonly ok: false;
      /** The first entry where the log stops being the one that was written. */
      readonly revision: number;
      readonly kind: "changed" | "missing_chain" | "revision_gap";
      readonly message: string;
      readonly entries: number;
    };

/**
 * Checks a session's log against its chain: every entry's `metadata.chain` must be the chain value of the entries
 * before it and itself, and revisions must follow on from 0 with no gap. Names the first entry where a change, a
 * removal (a gap, or a digest that no longer follows) or an entry without a digest starts. A truncation at the end
 * leaves a valid chain: compare the head with one kept elsewhere (`GET /v1/sessions/:id` serves it; an export's
 * header records it).
 */
export const verifyChain = (entries: readonly RecordedEntry[]): ChainVerdict => {
  let head = CHAIN_GENESIS;
  for (const [i, entry] of entries.entries()) {
    if (entry.revision !== i)
      return {
        ok: false,
        revision: entry.revision,
        kind: "revision_gap",
        message: `revision ${entry.revision} follows revision ${i - 1}: ${entry.revision - i} entr${entry.revision - i === 1 ? "y is" : "ies are"} missing before it`,
        entries: entries.length,
      };
    const recorded = entry.metadata.chain;
    if (typeof recorded !== "string")
      return {
        ok: false,
        revision: entry.revision,
        kind: "missing_chain",
        message: `revision ${entry.revision} (${entry.type}) carries no chain digest`,
        entries: entries.length,
      };
    head = chainOf(head, entry);
    if (head !== recorded)
      return {
        ok: false,
        revision: entry.revision,
        kind: "changed",
        message: `revision ${entry.revision} (${entry.type}) is not the entry that was written: its digest does not follow from the entries before it and its content`,
        entries: entries.length,
      };
  }
  return { ok: true, entries: entries.length, head };
};
