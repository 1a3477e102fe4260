/**
 * Percentiles of the load bench: exact ones of the client's samples, and interpolated ones of a Prometheus
 * histogram scraped from the server's /metrics (prom-client's text format).
 */

/**
 * The `p`-th percentile (0..100) of `values` by nearest rank: the smallest value with at least p% of the values at
 * or below it. With ten values p99 is the largest. NaN for no values.
 */
export const percentile = (values: readonly number[], p: number): number => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1] ?? Number.NaN;
};

/** One cumulative bucket of a histogram: `count` observations at or below `le` (seconds; `Infinity` for +Inf). */
export interface HistogramBucket {
  readonly le: number;
  readonly count: number;
}

/**
 * The buckets of histogram `name` in a Prometheus text exposition (`NAME_bucket{le="0.005"} 12` lines, cumulative,
 * labels other than `le` summed), in increasing `le`. Empty when the metric is absent.
 */
export const parseHistogram = (text: string, name: string): HistogramBucket[] => {
  const counts = new Map<number, number>();
  const line = new RegExp(`^${name}_bucket\\{([^}]*)\\}\\s+(\\S+)`, "gm");
  for (const match of text.matchAll(line)) {
    const le = /(?:^|,)le="([^"]+)"/.exec(match[1] ?? "")?.[1];
    if (le === undefined) continue;
    const bound = le === "+Inf" ? Number.POSITIVE_INFINITY : Number(le);
    counts.set(bound, (counts.get(bound) ?? 0) + Number(match[2]));
  }
  return [...counts].map(([le, count]) => ({ le, count })).sort((a, b) => a.le - b.le);
};

/** The observations between two scrapes of one histogram: `after - before`, bucket by bucket. */
export const histogramDelta = (
  after: readonly HistogramBucket[],
  before: readonly HistogramBucket[],
): HistogramBucket[] =>
  after.map((b) => ({ le: b.le, count: b.count - (before.find((x) => x.le === b.le)?.count ?? 0) }));

/**
 * The `q`-quantile (0..1) of a histogram, interpolated linearly inside the bucket that holds it, as Prometheus'
 * `histogram_quantile` does: the first bucket's lower bound is 0, and a quantile that falls in the +Inf bucket is
 * the highest finite bound (a lower limit, not a measurement). In the histogram's unit; NaN when it is empty.
 */
export const histogramQuantile = (buckets: readonly HistogramBucket[], q: number): number => {
  const total = buckets.at(-1)?.count ?? 0;
  if (total <= 0) return Number.NaN;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const bucket of buckets) {
    if (bucket.count >= rank) {
      if (bucket.le === Number.POSITIVE_INFINITY) return lower;
      const inBucket = bucket.count - below;
      return inBucket <= 0 ? bucket.le : lower + ((bucket.le - lower) * (rank - below)) / inBucket;
    }
    lower = bucket.le;
    below = bucket.count;
  }
  return lower;
};

/**
 * The sum of the samples of metric `name` (a gauge or counter, or a histogram's `_sum` / `_count`) in a Prometheus
 * text exposition, every label set added; null when the metric is absent.
 */
export const parseSample = (text: string, name: string): number | null => {
  let total: number | null = null;
  for (const match of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})?\\s+(\\S+)`, "gm")))
    total = (total ?? 0) + Number(match[1]);
  return total;
};
