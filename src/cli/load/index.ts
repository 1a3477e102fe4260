/**
 * The parts of `duplex bench load` (issue 11): the load client and the bare relay (scripts run as processes of
 * their own), one run against a server or the relay with its /proc figures, the per-session tally, percentiles of
 * samples and of Prometheus histograms, the capacity search, and the JSON line and table of a run.
 */
export { type CapacityProbe, searchCapacity } from "./capacity.ts";
export type { LoadClientConfig, LoadClientResult } from "./load-client.ts";
export { cpuSeconds, measureCpu, rssKib, sampleRss } from "./proc.ts";
export { allDelivered, firstAudioP99, LOAD_MEANING, loadLine, loadTable, responsesLost } from "./report.ts";
export { LOAD_INPUTS, type LoadRunOptions, type RunMeasure, runAgainstRelay, runAgainstServer } from "./run.ts";
export {
  type HistogramBucket,
  histogramDelta,
  histogramQuantile,
  parseHistogram,
  parseSample,
  percentile,
} from "./stats.ts";
export { addTallies, createTally, type ResponseOutcome, type Tally, type TallyCounts } from "./tally.ts";
