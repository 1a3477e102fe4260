/**
 * The upstream link's outbound queue (reference/realtime-duplex-api.md, "Reconnect and resume"): events wait in an
 * outbox until the upstream session is ready and go out in order; on a duplex link each event sent is kept until a
 * barrier (a `session.heartbeat` whose ack confirms every event sent before it) confirms it, so that after a resume
 * what the upstream did not confirm is sent again, except a `response.create` it already answered with
 * `response.created`.
 */
import { type Json, obj, str } from "./wire-json.ts";

/** What the queue needs from its link. */
export interface DeliveryLink {
  /** Duplex links keep what they sent until it is confirmed; OpenAI links cannot resume, and keep nothing. */
  readonly duplex: boolean;
  /** Whether the upstream session is ready for traffic now. */
  readonly isOpen: () => boolean;
  /** Writes one frame on the socket when it is open (else drops it). */
  readonly write: (text: string) => void;
}

/** One session's outbound queue. */
export interface Delivery {
  /** Sends `event` now when the link is open, else keeps it in the outbox (in order). */
  send(event: Json): void;
  /** The opening `session.update` of a duplex session, taken out of the outbox (else undefined). */
  takeOpening(): string | undefined;
  /** The session is ready: everything in the outbox goes out, in order. */
  flush(): void;
  /** Sends a barrier now, unless one is outstanding or the link is not open (the keepalive). */
  barrier(): void;
  /** A `session.heartbeat_ack`: confirms the events sent before the oldest outstanding barrier. */
  acked(): void;
  /** A `response.created`: the oldest `response.create` waiting is answered (it is never sent again). */
  responseCreated(): void;
  /** An error that echoed a `response.create`'s `event_id`: it will not be answered. */
  refused(eventId: string | null): void;
  /** After a resume: what was not confirmed goes out again (answered `response.create`s left out), then the outbox. */
  resend(): void;
  /** Stops the barrier timer (a drop, or the end of the link). */
  pause(): void;
}

/** The `event_id` of a `response.create` in its JSON text, else null. */
const respondIdOf = (text: string): string | null =>
  text.startsWith('{"type":"response.create"') ? str(obj(JSON.parse(text))?.event_id) : null;

/** The outbound queue of one link. */
export const createDelivery = (link: DeliveryLink): Delivery => {
  /** Events waiting for the session to be ready (sent in order once it is). */
  const outbox: string[] = [];
  /** Events sent since the last confirmed barrier, each with its place in the stream of sent events. */
  let unconfirmed: { readonly index: number; readonly text: string; readonly respondId: string | null }[] = [];
  let sentCount = 0;
  /** Barriers sent and not acknowledged: how many events had been sent before each. */
  let barriers: number[] = [];
  let barrierTimer: NodeJS.Timeout | null = null;
  /** `response.create` event ids the upstream answered with `response.created`. */
  const answered = new Set<string>();
  /** `response.create` event ids sent and not yet answered or refused, in order. */
  let waitingRespond: string[] = [];

  /** Sends a barrier: a heartbeat whose ack confirms every event sent before it. */
  const sendBarrier = (): void => {
    barrierTimer = null;
    // One outstanding at a time: its ack refreshes the upstream's lease as well as a second one would.
    if (!link.isOpen() || barriers.length > 0) return;
    barriers.push(sentCount);
    link.write(JSON.stringify({ type: "session.heartbeat" }));
  };

  /**
   * A barrier follows each burst of events (the events one turn of the event loop sent), or, while one is on its
   * way, the ack that confirms it: at most one barrier is outstanding, so a slow upstream gets fewer, not more.
   */
  const scheduleBarrier = (): void => {
    if (barrierTimer !== null || barriers.length > 0 || !link.duplex) return;
    barrierTimer = setTimeout(sendBarrier, 0);
  };

  /** Sends one event on the open link and keeps it until a barrier confirms it. */
  const transmit = (text: string, respondId: string | null): void => {
    sentCount += 1;
    if (link.duplex) unconfirmed.push({ index: sentCount, text, respondId });
    link.write(text);
    scheduleBarrier();
  };

  const flush = (): void => {
    for (const text of outbox.splice(0)) transmit(text, respondIdOf(text));
  };

  return {
    send(event) {
      const text = JSON.stringify(event);
      const respondId = event.type === "response.create" ? str(event.event_id) : null;
      if (respondId !== null) waitingRespond.push(respondId);
      if (link.isOpen()) transmit(text, respondIdOf(text));
      else outbox.push(text);
    },
    takeOpening: () => (outbox[0]?.startsWith('{"type":"session.update"') ? outbox.shift() : undefined),
    flush,
    barrier: sendBarrier,
    acked() {
      const upTo = barriers.shift();
      if (upTo === undefined) return;
      unconfirmed = unconfirmed.filter((e) => e.index > upTo);
      if (unconfirmed.length > 0 && link.isOpen()) scheduleBarrier();
    },
    responseCreated() {
      const next = waitingRespond.shift();
      if (next !== undefined) answered.add(next);
    },
    refused(eventId) {
      if (eventId !== null) waitingRespond = waitingRespond.filter((id) => id !== eventId);
    },
    resend() {
      const again = unconfirmed.filter((e) => e.respondId === null || !answered.has(e.respondId));
      unconfirmed = [];
      barriers = [];
      for (const e of again) transmit(e.text, e.respondId);
      flush();
    },
    pause() {
      if (barrierTimer !== null) clearTimeout(barrierTimer);
      barrierTimer = null;
    },
  };
};
