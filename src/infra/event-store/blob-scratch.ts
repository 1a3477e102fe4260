/**
 * Scratch arrays of blob packing (issue 34, part 5), reused from call to call (packing runs synchronously on one
 * thread): allocating a typed array of a few KB took about 20 us on the machines this runs on, as long as coding its
 * samples (docs/benchmarks.md, "The log's size"). Grown when a longer blob comes. The predictors
 * (blob-prediction.ts) fill `second` and `lpc` with residuals, the Rice coder (blob-rice.ts) decodes into `values`
 * and encodes into `out`; a caller reads its array before the next call of the same kind.
 */
export const scratch = {
  second: new Int32Array(4800),
  lpc: new Int32Array(4800),
  values: new Int32Array(4800),
  out: new Uint8Array(24000),
};

/** The scratch array `key`, grown to hold at least `n` numbers (its contents are stale: the caller writes them). */
export const scratchInts = (key: "second" | "lpc" | "values", n: number): Int32Array => {
  if (scratch[key].length < n) scratch[key] = new Int32Array(n);
  return scratch[key];
};
