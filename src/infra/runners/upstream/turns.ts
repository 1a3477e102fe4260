import type { ResponseId } from "../../../domain/index.ts";
import type { Json } from "./wire-json.ts";

/** An upstream response as the runner knows it: its id, and its message item's once announced. */
export interface UpstreamResponse {
  readonly id: string;
  itemId: string | null;
}

/** A `response.create` sent for our response `ours`, in `epoch`, as `event`, not answered yet. */
export interface PendingRespond {
  readonly eventId: string;
  readonly epoch: number;
  readonly ours: ResponseId;
  readonly event: Json;
}

/** A request the upstream refused, by the `event_id` its error echoed. */
export type Refused =
  | { readonly kind: "respond"; readonly epoch: number; readonly respond: PendingRespond }
  | { readonly kind: "commit"; readonly itemId: string | undefined };

/**
 * The bookkeeping that ties one session's turns to the upstream's (the outbound side records what it asked, the
 * inbound side what the upstream answered): the epoch in force and the epoch of the response being answered (its
 * events are stamped with it, so the decider drops what a barge-in cut); our responses and the upstream's, for
 * playback reports; and our commits in order with their `event_id`s, so a transcript names our user item and a
 * refused commit is reported for its own item, never shifting later transcripts onto it.
 */
export const createTurns = () => {
  let epoch = 0;
  /** The upstream response being answered: its id and the epoch its events are stamped with. */
  let active: { id: string; epoch: number } | null = null;
  /**
   * The response.creates sent and not yet answered by response.created, in order (a cancel may be followed by a new
   * create before the first is answered): the next response.created answers the oldest; a refusal fails its own.
   */
  let pendingRespond: PendingRespond[] = [];
  let respondCount = 0;
  /**
   * Our responses and the upstream's: a response we asked for is the next one the upstream creates; one the model
   * started by itself is matched, in order, by the first playback report of a response of ours not yet matched.
   */
  const upstreamOf = new Map<string, UpstreamResponse>();
  const unmatched: UpstreamResponse[] = [];
  let lastCreated: UpstreamResponse | null = null;
  /** Our commits not yet answered (committed or refused), in order. */
  let commits: { eventId: string; itemId: string | undefined }[] = [];
  let commitCount = 0;
  /** Our user items by the upstream's (from its input_audio_buffer.committed), for transcripts. */
  const itemOf = new Map<string, string>();

  return {
    epoch: (): number => epoch,
    /** The epoch the upstream's response events carry: the one their response was asked in. */
    stamp: (): number => active?.epoch ?? epoch,
    /**
     * Moves to a newer epoch (an abort). Returns the upstream response to cancel there: the active one, asked in an
     * older epoch; null when none.
     */
    advance(newEpoch: number): string | null {
      if (newEpoch <= epoch) return null;
      epoch = newEpoch;
      return active !== null && active.epoch < newEpoch ? active.id : null;
    },
    /** Records a `response.create` for our response, made by `event(eventId)`; returns the event to send. */
    asked(ours: ResponseId, askedEpoch: number, event: (eventId: string) => Json): Json {
      respondCount += 1;
      const eventId = `evt_respond_${respondCount}`;
      const json = event(eventId);
      pendingRespond.push({ eventId, epoch: askedEpoch, ours, event: json });
      return json;
    },
    /** Records again a `response.create` the upstream refused, before it is sent again. */
    askedAgain(respond: PendingRespond): void {
      pendingRespond.push(respond);
    },
    /** Whether the upstream response being answered is one of an epoch cancelled since (still winding down). */
    windingDown: (): boolean => active !== null && active.epoch < epoch,
    /**
     * The upstream created a response. Returns whether it must be cancelled there at once: it answers a
     * `response.create` of an epoch cancelled since (BEHAVIOUR.md: a cancel before response.created still cancels).
     */
    responseCreated(id: string): boolean {
      const asked = pendingRespond.shift();
      active = { id, epoch: asked?.epoch ?? epoch };
      lastCreated = { id, itemId: null };
      if (asked !== undefined) upstreamOf.set(asked.ours, lastCreated);
      else unmatched.push(lastCreated);
      return active.epoch < epoch;
    },
    /** The upstream announced the message item of the response it created last. */
    messageItem(itemId: string | null): void {
      if (lastCreated !== null && lastCreated.itemId === null) lastCreated.itemId = itemId;
    },
    responseEnded(): void {
      active = null;
    },
    /** Records a commit of our user item `itemId`; returns its `event_id`. */
    commitSent(itemId: string | undefined): string {
      commitCount += 1;
      const eventId = `evt_commit_${commitCount}`;
      commits.push({ eventId, itemId });
      return eventId;
    },
    /** The upstream committed the item `theirs`: the oldest of our commits not yet answered. */
    committed(theirs: string | null): void {
      const ours = commits.shift();
      if (ours?.itemId !== undefined && theirs !== null) itemOf.set(theirs, ours.itemId);
    },
    /** Our user item for the upstream's `theirs`, when one of our commits made it. */
    ourItem: (theirs: string | null): string | undefined => (theirs === null ? undefined : itemOf.get(theirs)),
    /** What the upstream refused, by the `event_id` its error echoed (forgotten once told); null: not ours. */
    refused(eventId: string | null): Refused | null {
      if (eventId === null) return null;
      const respond = pendingRespond.find((p) => p.eventId === eventId);
      if (respond !== undefined) {
        pendingRespond = pendingRespond.filter((p) => p !== respond);
        return { kind: "respond", epoch: respond.epoch, respond };
      }
      const commit = commits.find((c) => c.eventId === eventId);
      if (commit === undefined) return null;
      commits = commits.filter((c) => c !== commit);
      return { kind: "commit", itemId: commit.itemId };
    },
    /** The upstream response a playback report of our `ours` is about, or undefined when none is known. */
    playbackTarget(ours: ResponseId): UpstreamResponse | undefined {
      const known = upstreamOf.get(ours);
      if (known !== undefined) return known;
      const next = unmatched.shift();
      if (next !== undefined) upstreamOf.set(ours, next);
      return next;
    },
  };
};

export type UpstreamTurns = ReturnType<typeof createTurns>;
