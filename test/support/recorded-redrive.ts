import type { RecordedEntry } from "../../src/engine/index.ts";
import { createResampler, createSpeexStreamResampler } from "../../src/infra/audio/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { createRecordedRunner } from "../../src/infra/runners/recorded.ts";
import { type RedriveResult, redrive } from "../../src/replay/index.ts";

/**
 * `entries` re-driven live, without pauses, through the recorded runner that plays them back in step (as
 * `duplex replay FILE --runner recorded` does), over an in-memory store: the re-drive's result and the live
 * session's log.
 */
export const redriveThroughOwnRecording = async (
  entries: readonly RecordedEntry[],
): Promise<{ result: RedriveResult; live: RecordedEntry[] }> => {
  const store = createSqliteEventStore({ path: ":memory:" });
  const runner = createRecordedRunner(entries, { paced: true });
  try {
    const result = await redrive(entries, {
      store,
      runner,
      createResampler,
      createOutputResampler: createSpeexStreamResampler,
      speed: Number.POSITIVE_INFINITY,
      settleMs: 3000,
      playback: runner,
    });
    const [stream] = await store.listStreams("session-");
    return { result, live: stream === undefined ? [] : await store.read(stream.stream) };
  } finally {
    await store.close();
  }
};
