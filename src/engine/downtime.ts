import type { RecordedEntry } from "./ports/index.ts";

/** The downtime of server restarts and moves in a log, ms: before each `SessionRecovered` or `SessionOwned`, the gap since the entry before. */
export const downtimeMsOf = (entries: readonly RecordedEntry[]): number => {
  let downtime = 0;
  entries.forEach((e, i) => {
    const before = entries[i - 1];
    if ((e.type === "SessionRecovered" || e.type === "SessionOwned") && before !== undefined)
      downtime += e.metadata.at - before.metadata.at;
  });
  return downtime;
};
