import { expect } from "vitest";
import type { ServerEvent } from "../../src/client/index.ts";
import { foldLog, type stepsOf } from "../../src/engine/index.ts";

/** One delivered event as compared: its type, seq and event_id (`session.created` has no seq, as ConnectionResumed). */
const key = (e: { type: string; server_event_seq?: unknown; event_id?: unknown }): string =>
  `${e.type}#${String(e.server_event_seq ?? "-")}#${String(e.event_id ?? "-")}`;

/**
 * Asserts that what a DuplexClient delivered, as delivered (nothing sorted or dropped first), is exactly the
 * session's log rendered: `session.created`, then every sequenced server event of the log once, in seq order from 1
 * to the last, with one `connection.resumed` after the events each resume started from, and nothing else. So no
 * event was lost, duplicated or reordered, and the client ended up holding the whole stream.
 * Returns the number of sequenced events.
 */
export const expectDeliveredAsLogged = (delivered: readonly ServerEvent[], entries: Parameters<typeof stepsOf>[0]) => {
  const rendered = foldLog(entries).replay.filter((e) => e.seq !== null);
  const resumedAfter = delivered
    .filter((e) => e.type === "connection.resumed")
    .map((e) => Number(e.last_received_server_event_seq));
  const expected: string[] = [];
  const created = delivered[0];
  expected.push(key({ type: "session.created", event_id: created?.event_id }));
  let r = 0;
  for (; r < resumedAfter.length && resumedAfter[r] === 0; r += 1) expected.push(key({ type: "connection.resumed" }));
  for (const e of rendered) {
    const event = JSON.parse(e.json) as { type: string; server_event_seq: number; event_id: string };
    expected.push(key(event));
    for (; r < resumedAfter.length && resumedAfter[r] === event.server_event_seq; r += 1)
      expected.push(key({ type: "connection.resumed" }));
  }
  expect(delivered.map(key)).toEqual(expected);
  return rendered.length;
};
