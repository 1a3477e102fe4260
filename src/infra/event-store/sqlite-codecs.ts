import { PCM16_BROTLI, PCM16_LPC_RICE, PCM16_RICE } from "./blob-packing.ts";
import { JSON_DEFLATE_D1 } from "./text-packing.ts";

/** The codec columns of the sqlite store file (sqlite-writer.ts has the layout), shared by its readers and writers. */

/**
 * A codec column of layout 2: small integers for the codecs' names (a 15-byte name in nearly every row was 2 MB
 * per session-hour). `name` of an id this version does not know gives `#ID`, which the unpacking refuses as an
 * unknown codec.
 */
const codecColumn = (names: readonly string[]) => ({
  id: (name: string | null): number | null => (name === null ? null : names.indexOf(name) + 1 || -1),
  name: (id: number | null): string | null => (id === null ? null : (names[id - 1] ?? `#${id}`)),
  /** SQL mapping a layout-1 name column to its id (-1 for a name not known here). */
  sqlOf: (column: string): string =>
    `CASE WHEN ${column} IS NULL THEN NULL ${names.map((n, i) => `WHEN ${column} = '${n}' THEN ${i + 1}`).join(" ")} ELSE -1 END`,
});
/** `entries.bin_codec`: 1, 2, 3 for these (blob-packing.ts). */
export const binCodecs = codecColumn([PCM16_RICE, PCM16_BROTLI, PCM16_LPC_RICE]);
/** `entries.text_codec`: 1 for this (text-packing.ts). */
export const textCodecs = codecColumn([JSON_DEFLATE_D1]);
