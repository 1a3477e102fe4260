import { CLIENT_EVENTS, SERVER_EVENTS } from "../protocol/index.ts";
import { SOCKET_CLOSED } from "./connection.ts";

/** Covered and missing event types of one direction of the catalogue (src/protocol/catalogue.ts). */
export interface CoverageOf {
  readonly total: number;
  readonly covered: readonly string[];
  readonly missing: readonly string[];
}

/**
 * What a conformance run exercised of the event catalogue: the server events it observed, the client events it
 * sent (an alias counts for its canonical event too), the aliases it sent, and the server event types it observed
 * that the catalogue does not list (such as beta spellings).
 */
export interface Coverage {
  readonly server: CoverageOf;
  readonly client: CoverageOf;
  readonly aliases: CoverageOf;
  readonly unlisted: readonly string[];
}

const of = (all: readonly string[], seen: ReadonlySet<string>): CoverageOf => ({
  total: all.length,
  covered: all.filter((t) => seen.has(t)),
  missing: all.filter((t) => !seen.has(t)),
});

/**
 * Compares the event types a run observed (`serverTypes`) and sent (`clientTypes`, as written, aliases included)
 * with the catalogue's 44 server and 21 client events.
 */
export const coverageOf = (serverTypes: Iterable<string>, clientTypes: Iterable<string>): Coverage => {
  const observed = new Set(serverTypes);
  const sent = new Set(clientTypes);
  const canonical = new Set(sent);
  for (const entry of CLIENT_EVENTS) {
    if ((entry.aliases ?? []).some((alias) => sent.has(alias))) canonical.add(entry.type);
  }
  const serverNames = SERVER_EVENTS.map((e) => e.type);
  return {
    server: of(serverNames, observed),
    client: of(
      CLIENT_EVENTS.map((e) => e.type),
      canonical,
    ),
    aliases: of(
      CLIENT_EVENTS.flatMap((e) => e.aliases ?? []),
      sent,
    ),
    unlisted: [...observed].filter((t) => t !== SOCKET_CLOSED && !serverNames.includes(t)).sort(),
  };
};
