import { concatMap, from, type OperatorFunction, scan } from "rxjs";
import { serverEventIdFor } from "../domain/index.ts";
import { type RenderContext, renderServerEvents } from "../protocol/index.ts";
import type { EventEnvelope } from "./envelope.ts";

/**
 * One server event as sent: its `server_event_seq` (null for `session.created`, which precedes the sequence, and
 * `session.resumed`, which stands outside it), its type and its exact JSON text.
 */
export interface WireEvent {
  readonly seq: number | null;
  readonly type: string;
  readonly json: string;
}

/** The wire projection's state: the render context and the last `server_event_seq` given out. */
export interface WireState {
  readonly ctx: RenderContext | null;
  readonly seq: number;
  /** The server events the last envelope rendered. */
  readonly emitted: readonly WireEvent[];
}

export const initialWireState: WireState = { ctx: null, seq: 0, emitted: [] };

/**
 * How an earlier release numbered its server events, for a replay of a log it wrote (docs/log-format.md, "Logs of
 * earlier releases"; src/engine/upcast.ts). Absent: today's numbering.
 */
export interface EarlierWireRules {
  /** Before 6ec247f: `session.resumed` takes the next `server_event_seq`, as any other event. */
  readonly sequenceResumed?: boolean;
}

/**
 * Renders one envelope to server events and stamps each with `event_id` (derived from the seq), its
 * `server_event_seq` (from 1, after `session.created`) and the session's `epoch` (BEHAVIOUR.md, "Resume";
 * DESIGN.md rule 4). Pure: a replay of the same envelopes renders the same bytes. `earlier`: the numbering of the
 * release that recorded the envelope, when a replay checks the bytes of an old log (absent: today's).
 */
export const reduceWire = (state: WireState, envelope: EventEnvelope, earlier?: EarlierWireRules): WireState => {
  const { event, metadata } = envelope;
  const ctx: RenderContext | null =
    event.type === "SessionCreated"
      ? {
          sessionId: event.data.sessionId,
          capabilities: event.data.capabilities,
          epoch: metadata.epoch,
          turnId: metadata.turnId,
        }
      : state.ctx === null
        ? null
        : {
            ...state.ctx,
            epoch: metadata.epoch,
            turnId: metadata.turnId,
            // Where the active response's message item sits in response.output.
            messageOutputIndex:
              event.type === "MessageStarted"
                ? event.data.outputIndex
                : event.type === "ResponseStarted"
                  ? 0
                  : state.ctx.messageOutputIndex,
          };
  if (ctx === null) return { ...state, emitted: [] };
  let seq = state.seq;
  const emitted = renderServerEvents(ctx, event).map((body): WireEvent => {
    // session.created precedes the sequence; session.resumed stands outside it, so that on one socket
    // server_event_seq strictly increases: the missed events that follow it have the smaller seqs (BEHAVIOUR.md,
    // "Resume"). Their event_ids are derived from the attachment generation instead.
    const outside = body.type === "session.created" || (body.type === "session.resumed" && !earlier?.sequenceResumed);
    if (outside) {
      const generation = typeof body.attachment_generation === "number" ? body.attachment_generation : 1;
      const eventId =
        body.type === "session.created"
          ? serverEventIdFor(ctx.sessionId, 0)
          : `${serverEventIdFor(ctx.sessionId, 0)}_resumed${generation}`;
      return { seq: null, type: body.type, json: JSON.stringify({ event_id: eventId, ...body, epoch: ctx.epoch }) };
    }
    seq += 1;
    return {
      seq,
      type: body.type,
      json: JSON.stringify({
        event_id: serverEventIdFor(ctx.sessionId, seq),
        ...body,
        server_event_seq: seq,
        epoch: ctx.epoch,
      }),
    };
  });
  return { ctx, seq, emitted };
};

/**
 * The wire projection as an RxJS operator: domain event envelopes in, server events out, in order
 * (STYLE.md, "Streams": a named operator built with `pipe()` around a pure reducer).
 */
export const wireProjection =
  (initial: WireState = initialWireState): OperatorFunction<EventEnvelope, WireEvent> =>
  (source) =>
    source.pipe(
      scan((state: WireState, envelope: EventEnvelope) => reduceWire(state, envelope), initial),
      concatMap((state) => from(state.emitted)),
    );
