import type { StreamInfo } from "../../engine/ports/event-store.ts";

/** A row of the streams table, as the sqlite (`streams`) and PostgreSQL (`duplex_streams`) stores select it. */
export interface StreamRow {
  readonly stream: string;
  /** The last revision (revisions are contiguous from 0). */
  readonly revision: number;
  /** `metadata.at` of the stream's first and last entries, ms since the Unix epoch. */
  readonly first_at: number;
  readonly last_at: number;
}

/** A streams row as `EventStore.listStreams` answers it: the count follows from the last revision. */
export const streamInfoOf = (row: StreamRow): StreamInfo => ({
  stream: row.stream,
  revision: row.revision,
  count: row.revision + 1,
  firstAt: row.first_at,
  lastAt: row.last_at,
});
