/**
 * The session flow's evolvers: the session's lifecycle (created, configured, resumed, detached, closed) and the
 * events that answer a request without changing state (a rejected request, a heartbeat, a runtime control report,
 * an acknowledgement of server events).
 */
import { withConfigDefaults } from "./config.ts";
import { type FlowEvolvers, unchanged } from "./evolver.ts";
import { DEFAULT_MAX_PENDING_TURNS } from "./state.ts";

export const SESSION_EVOLVERS = {
  SessionCreated: (state, event) => ({
    ...state,
    phase: "open",
    sessionId: event.data.sessionId,
    config: withConfigDefaults(event.data.config),
    capabilities: event.data.capabilities,
    attachmentGeneration: event.data.attachmentGeneration,
    resumeTokenSha256: event.data.resumeTokenSha256,
    attached: true,
    maxPendingTurns: event.data.maxPendingTurns ?? DEFAULT_MAX_PENDING_TURNS,
    ...(event.data.lifetimeEndsAt === undefined ? {} : { lifetimeEndsAt: event.data.lifetimeEndsAt }),
    ...(event.data.rules === undefined ? {} : { rules: event.data.rules }),
  }),
  SessionConfigured: (state, event) => ({ ...state, config: withConfigDefaults(event.data.config) }),
  SessionResumed: (state, event) => {
    const { detachReason: _told, ...rest } = state;
    return {
      ...rest,
      attachmentGeneration: event.data.attachmentGeneration,
      resumeTokenSha256: event.data.resumeTokenSha256,
      attached: true,
    };
  },
  SessionDetached: (state, event) => {
    const { detachReason: _before, ...rest } = state;
    return event.data.reason === undefined
      ? { ...rest, attached: false }
      : { ...rest, attached: false, detachReason: event.data.reason };
  },
  SessionClosed: (state) => ({ ...state, phase: "closed", response: null }),
  RequestRejected: unchanged,
  HeartbeatAcknowledged: unchanged,
  RuntimeControlReported: unchanged,
  TurnSignalled: unchanged,
  EventsAcknowledged: unchanged,
} satisfies FlowEvolvers;
