import { STREAM_PREFIX } from "../engine/log.ts";
import { foldLog } from "../engine/step.ts";

export { parseDurationMs } from "../engine/duration.ts";

import type { EventStore, RecordedEntry } from "../engine/ports/index.ts";

/**
 * Retention of session logs (issue 10, "Journal limits and log retention"): removes the sessions whose log says
 * they ended (closed or expired) and whose last entry is older than `olderThanMs`. Open and detached sessions may
 * still be resumed and are never removed. `keep`, when given, is called with a session's entries before they are
 * removed (an export); `dryRun` removes nothing. `now` is ms since the Unix epoch.
 * @returns the ids of the sessions removed (or that would be), and how many were kept.
 */
export const removeFinishedSessions = async (
  store: EventStore,
  options: {
    readonly olderThanMs: number;
    readonly now: number;
    readonly dryRun?: boolean;
    readonly keep?: (sessionId: string, stream: string, entries: RecordedEntry[]) => Promise<void>;
  },
): Promise<{ removed: string[]; kept: number }> => {
  const cutoff = options.now - options.olderThanMs;
  const removed: string[] = [];
  let kept = 0;
  for (const info of await store.listStreams(STREAM_PREFIX)) {
    const entries = await store.read(info.stream);
    if (foldLog(entries).state.phase !== "closed" || info.lastAt > cutoff) {
      kept += 1;
      continue;
    }
    const sessionId = info.stream.slice(STREAM_PREFIX.length);
    if (options.dryRun !== true) {
      await options.keep?.(sessionId, info.stream, entries);
      await store.deleteStream(info.stream);
    }
    removed.push(sessionId);
  }
  return { removed, kept };
};
