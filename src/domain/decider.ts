import { type Decision, decisionBuilder, decisionOf } from "./builder.ts";
import { decideCommand, sessionSnapshotOf } from "./command-decider.ts";
import { type Capabilities, defaultSessionConfig, type SessionConfig } from "./config.ts";
import type { CloseReason, DomainEvent, Input } from "./events.ts";
import { evolve } from "./evolve.ts";
import { settleEstimatedItems } from "./history.ts";
import { speechInProgress } from "./input-flow.ts";
import { laneOf } from "./lane.ts";
import {
  cancelResponse,
  endSession,
  responseProgressOf,
  startDeferredResponse,
  timeOutResponse,
} from "./response-flow.ts";
import { applyStageOutput } from "./stage-output.ts";
import { type EarlierRules, initialState, type SessionState } from "./state.ts";

/**
 * The session decider (DESIGN.md, "How data flows"; emmett's `Decider`): a plain object of pure functions.
 * `decide(state, input)` reads no clock, no randomness and no I/O: time is `input.at`, ids come from the session
 * id and the counters in `state`. A rejected command decides one `RequestRejected` and changes nothing else.
 */
export interface Decider<S, I, E> {
  readonly initialState: S;
  decide(state: S, input: I): E[];
  evolve(state: S, event: E): S;
}

/**
 * The configuration a session recorded by an earlier release started with (EarlierRules): the runner's input rate
 * before 83a7701, barge-in after the short remark's 700 ms before 387785c. `config` itself under today's rules.
 */
const withEarlierDefaults = (
  config: SessionConfig,
  capabilities: Capabilities,
  rules: EarlierRules | undefined,
): SessionConfig => {
  if (rules === undefined) return config;
  return {
    ...config,
    ...(rules.inputRateOfRunner === true
      ? { inputAudio: { format: "pcm16" as const, rate: capabilities.inputSampleRateHz } }
      : {}),
    ...(rules.bargeInAfterShortAck === true ? { overlapBargeInMs: config.overlapShortAckMs } : {}),
  };
};

/** The reason a session ends with when a lease timer fires (BEHAVIOUR.md, "Defaults and limits"). */
const EXPIRY_REASONS = {
  idle_ttl: "idle_ttl_expired",
  disconnect_grace: "disconnect_grace_expired",
  max_lifetime: "max_lifetime_expired",
} as const satisfies Record<string, CloseReason>;

/** `SessionOpened`: the session is created with its default configuration (once; a second opening decides nothing). */
const decideSessionOpened = (state: SessionState, input: Extract<Input, { type: "SessionOpened" }>): Decision => {
  if (state.phase !== "new") return decisionOf(state, []);
  const created = defaultSessionConfig(
    input.data.model,
    input.data.capabilities,
    input.data.idleTimeoutS,
    input.data.responseTimeoutMs,
  );
  const defaults = withEarlierDefaults(created, input.data.capabilities, input.data.rules);
  // Logs recorded before `nativeDuplex` existed lack it: absent means the default, as null does.
  const nativeDuplex = input.data.nativeDuplex ?? null;
  // `?native_duplex=` opts an opt_in model in or out of its native implementation; on any other model it is the
  // lane switch (false: the turn lane).
  const config =
    nativeDuplex === null
      ? defaults
      : input.data.capabilities.nativeDuplex === "opt_in"
        ? { ...defaults, nativeDuplex }
        : { ...defaults, autoResponse: nativeDuplex };
  return decisionOf(state, [
    {
      type: "SessionCreated",
      data: {
        sessionId: input.data.sessionId,
        config,
        capabilities: input.data.capabilities,
        attachmentGeneration: 1,
        resumeTokenSha256: input.data.resumeTokenSha256,
        ...(input.data.maxPendingTurns === undefined ? {} : { maxPendingTurns: input.data.maxPendingTurns }),
        ...(input.data.maxLifetimeS === undefined ? {} : { lifetimeEndsAt: input.at + input.data.maxLifetimeS * 1000 }),
        ...(input.data.rules === undefined ? {} : { rules: input.data.rules }),
      },
    },
  ]);
};

/**
 * `AttachmentChanged`: a socket took the session over (resumed), closed it with 1000 (closed), never used it
 * (abandoned) or dropped (detached; the session ends when its runner cannot resume).
 */
const decideAttachmentChanged = (
  state: SessionState,
  input: Extract<Input, { type: "AttachmentChanged" }>,
): Decision => {
  // Sessions recorded before ea7ac2c decided nothing of an attachment (EarlierRules).
  if (state.phase !== "open" || state.rules?.attachmentsDecideNothing === true) return decisionOf(state, []);
  const b = decisionBuilder(state);
  if (input.data.change === "resumed") {
    b.push({
      type: "SessionResumed",
      data: {
        attachmentGeneration: input.data.generation,
        resumeTokenSha256: input.data.resumeTokenSha256,
        lastReceivedSeq: input.data.lastReceivedSeq ?? 0,
        // Only a detach that said why (logs before reasons were recorded say nothing, and replay so).
        ...(state.detachReason === undefined ? {} : { detachReason: state.detachReason }),
        // Sessions recorded before issue 35, part 1 resumed without the session object (EarlierRules).
        ...(state.rules?.resumedWithoutSession === true
          ? {}
          : { config: state.config, view: sessionSnapshotOf(state) }),
      },
    });
  } else if (input.data.change === "closed") {
    // A close frame with code 1000 is the end a stock OpenAI client means: as session.close (BEHAVIOUR.md,
    // "Resume", ours), so the session holds no slot for the grace.
    cancelResponse(b, input.at, "session_closed");
    b.push(...settleEstimatedItems(b.state, input.at));
    b.push({ type: "SessionClosed", data: { reason: "client_closed" } });
  } else if (input.data.change === "abandoned") {
    // Nothing of the client reached it (BEHAVIOUR.md, "Identity", ours): it closes, leaving nothing to resume.
    cancelResponse(b, input.at, "session_closed");
    b.push({ type: "SessionClosed", data: { reason: "unused" } });
  } else if (state.capabilities.supportsSessionResume) {
    const reason = input.data.reason;
    b.push({
      type: "SessionDetached",
      data:
        reason === undefined
          ? { attachmentGeneration: state.attachmentGeneration }
          : { attachmentGeneration: state.attachmentGeneration, reason },
    });
  } else {
    // A runner that cannot resume: the dropped socket ends the session (BEHAVIOUR.md, "Resume").
    cancelResponse(b, input.at, "session_closed");
    b.push({ type: "SessionClosed", data: { reason: "disconnect" } });
  }
  return b.decision();
};

/** `SessionRecovered`: a restart or failed append, a disconnect for the client that loses nothing committed. */
const decideRecovered = (state: SessionState, input: Extract<Input, { type: "SessionRecovered" }>): Decision => {
  // A restart is a disconnect for every client (BEHAVIOUR.md, "Resume", ours), and so is a failed append: the
  // runner lost its work, so an active response ends cancelled and the session waits for a resume within the
  // grace lease.
  if (state.phase !== "open") return decisionOf(state, []);
  const b = decisionBuilder(state);
  cancelResponse(b, input.at, input.data.reason);
  // Committed turns are not lost with the process: the next deferred response starts, and runs while the
  // session waits for its client (BEHAVIOUR.md, "Turn-taking": deferred, not dropped).
  startDeferredResponse(b, input.at);
  // Nor is an utterance of the model-native lane that the model had heard end but not answered: the new runner
  // never heard it, so its logged audio goes to it again, and the model answers as after a dropped socket.
  const unanswered = b.state.input.unanswered;
  // Sessions recorded before 1e19abe gave the new runner nothing again (EarlierRules).
  if (unanswered != null && laneOf(b.state) === "native" && state.rules?.noUtteranceResubmitted !== true) {
    b.push({ type: "UtteranceResubmitted", data: { ...unanswered } });
  }
  // Nor is an utterance in progress, in either lane (BEHAVIOUR.md, "Moves lose nothing"): its speech started
  // before the move and goes on after it, and the new runner never heard its beginning. Its logged audio so far
  // goes to it now, the rest follows live, and the endpointer (in the state) goes on where it was: one utterance.
  const speaking = speechInProgress(b.state);
  // Sessions recorded before issue 33, part 2 gave the new runner only what followed the move (EarlierRules).
  if (speaking !== null && state.rules?.noUtteranceCarriedOver !== true) {
    b.push({ type: "UtteranceResubmitted", data: { ...speaking, inProgress: true } });
  }
  b.push({ type: "SessionDetached", data: { attachmentGeneration: state.attachmentGeneration } });
  return b.decision();
};

/** Decides what an input means for the session. Pure. */
export const decide = (state: SessionState, input: Input): DomainEvent[] => [...decision(state, input).events];

/**
 * Decides what an input means for the session, with the states its events lead to (src/domain/builder.ts,
 * `Decision`): the one step's decide, so `evolve` runs once per event. Pure.
 */
export const decision = (state: SessionState, input: Input): Decision => {
  switch (input.type) {
    case "SessionOpened":
      return decideSessionOpened(state, input);
    case "CommandReceived":
      return decideCommand(state, input.data.command, input.at);
    case "StageOutputReceived": {
      const b = decisionBuilder(state);
      applyStageOutput(b, input.at, input.data.output, input.data.delivered ?? null);
      return b.decision();
    }
    case "TimerFired": {
      if (state.phase !== "open") return decisionOf(state, []);
      const b = decisionBuilder(state);
      if (input.data.timer === "response_timeout") {
        // A response that moved on since the timer was armed is not stalled.
        if (responseProgressOf(state) === input.data.progress) timeOutResponse(b, input.at);
        return b.decision();
      }
      cancelResponse(b, input.at, "session_closed");
      b.push({ type: "SessionClosed", data: { reason: EXPIRY_REASONS[input.data.timer] } });
      return b.decision();
    }
    case "AttachmentChanged":
      return decideAttachmentChanged(state, input);
    case "RunnerFaulted": {
      // The runner failed outside the contract of its port (it threw, rejected or emitted garbage): its state is
      // unknown, so the session ends with a coded error; the process and every other session go on.
      if (state.phase !== "open") return decisionOf(state, []);
      const b = decisionBuilder(state);
      const message = `the model runner failed in ${input.data.operation}: ${input.data.message}`;
      endSession(b, input.at, input.data.operation, "runtime_data_plane_stream_failed", message);
      return b.decision();
    }
    case "ResourceExhausted": {
      // Ended while its log can still be written (issue 32, part 2): what was heard is kept, the client is told why.
      if (state.phase !== "open") return decisionOf(state, []);
      const b = decisionBuilder(state);
      cancelResponse(b, input.at, "session_closed");
      b.push(...settleEstimatedItems(b.state, input.at));
      b.push({
        type: "RequestRejected",
        data: {
          code: "resource_exhausted",
          message: input.data.message,
          param: null,
          clientEventId: null,
          commandType: null,
        },
      });
      b.push({ type: "SessionClosed", data: { reason: "resource_exhausted" } });
      return b.decision();
    }
    case "SessionOwned":
      // A takeover by another node is a restart of the session there: decided as one.
      return decision(state, { type: "SessionRecovered", at: input.at, data: { reason: "server_restart" } });
    case "SessionRecovered":
      return decideRecovered(state, input);
    default: {
      const unhandled: never = input;
      throw new Error(`decide: unhandled input ${JSON.stringify(unhandled)}`);
    }
  }
};

/** The session decider as one object (STYLE.md, "The decider is a plain object"). */
export const sessionDecider: Decider<SessionState, Input, DomainEvent> = { initialState, decide, evolve };
