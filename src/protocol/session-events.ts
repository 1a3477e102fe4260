/**
 * The session flow's server events: `session.created`, `.updated`, `.resumed`, `.closed`, `.expired`,
 * `session.heartbeat_ack`, `runtime.control` and the `error` of a rejected request (reference/realtime-duplex-api.md,
 * "Server to client").
 */
import { isExpiry } from "../domain/index.ts";
import { errorBody } from "./error-events.ts";
import { type FlowRenderers, renderNothing } from "./render-context.ts";
import { sessionObject } from "./session-object.ts";

/**
 * Placeholder of the resume token in recorded wire events; the socket writer puts the real token there
 * (DESIGN.md rule 4). A replayed event whose token is no longer current carries null instead.
 */
export const REDACTED_RESUME_TOKEN = "<resume_token>";

export const SESSION_RENDERERS = {
  SessionCreated: (ctx, event) => [
    {
      type: "session.created",
      incarnation: 0,
      attachment_generation: event.data.attachmentGeneration,
      resume_token: event.data.resumeTokenSha256 === null ? null : REDACTED_RESUME_TOKEN,
      session: sessionObject({
        ...ctx,
        sessionId: event.data.sessionId,
        config: event.data.config,
        capabilities: event.data.capabilities,
      }),
    },
  ],
  SessionConfigured: (ctx, event) => [
    {
      type: "session.updated",
      session: sessionObject({
        ...ctx,
        config: event.data.config,
        ...(event.data.view ? { view: event.data.view } : {}),
      }),
    },
  ],
  RequestRejected: (_ctx, event) => [
    errorBody(event.data.code, event.data.message, event.data.clientEventId, event.data.param),
  ],
  SessionResumed: (ctx, event) => [
    {
      type: "session.resumed",
      session_id: ctx.sessionId,
      incarnation: 0,
      attachment_generation: event.data.attachmentGeneration,
      resume_token: event.data.resumeTokenSha256 === null ? null : REDACTED_RESUME_TOKEN,
      // Why the last socket was let go of (ours, issue 33, part 3): a slow reader learns it was cut for that.
      ...(event.data.detachReason === undefined ? {} : { detach_reason: event.data.detachReason }),
      // The session as it stands (the reference's newest revision); absent in logs recorded before it.
      ...(event.data.config === undefined
        ? {}
        : {
            session: sessionObject({
              ...ctx,
              config: event.data.config,
              ...(event.data.view ? { view: event.data.view } : {}),
            }),
          }),
    },
  ],
  SessionDetached: renderNothing,
  EventsAcknowledged: renderNothing,
  HeartbeatAcknowledged: (ctx) => [{ type: "session.heartbeat_ack", session_id: ctx.sessionId }],
  RuntimeControlReported: (ctx, event) => [
    {
      type: "runtime.control",
      session_id: ctx.sessionId,
      result: { signal: event.data.signal, supported: event.data.supported, detail: event.data.detail },
    },
  ],
  TurnSignalled: (ctx, event) => [
    { type: "turn.event", session_id: ctx.sessionId, event: event.data.event, turn_state: event.data.turnState },
  ],
  SessionClosed: (ctx, event) =>
    isExpiry(event.data.reason)
      ? [{ type: "session.expired", session_id: ctx.sessionId, incarnation: 0, reason: event.data.reason }]
      : [
          {
            type: "session.closed",
            session_id: ctx.sessionId,
            reason: event.data.reason,
            // The native event under `event`, as the reference's newest revision wraps it (its epoch included).
            event: { type: "session.closed", session_id: ctx.sessionId, epoch: ctx.epoch, reason: event.data.reason },
          },
        ],
} satisfies FlowRenderers;
