/**
 * The decider of client commands (BEHAVIOUR.md, "Client events"): what a decoded command means for the session.
 * A refused command decides one `RequestRejected` (with the client's event id and the command's type) and
 * changes nothing else; a command on a session that is not open is refused `session_closed`.
 */
import { type Decision, type DecisionBuilder, decisionBuilder, decisionOf } from "./builder.ts";
import type { Command } from "./commands.ts";
import { applySessionPatch } from "./config-patch.ts";
import { type Rejection, reject } from "./errors.ts";
import type { DomainEvent, SessionSnapshot } from "./events.ts";
import { settleEstimatedItems } from "./history.ts";
import { appendAudio, commitInput, responseWanted } from "./input-flow.ts";
import { createItem, findItem } from "./item-flow.ts";
import { emptyLedger } from "./playback.ts";
import { acknowledgePlayback, truncateItem } from "./playback-flow.ts";
import { cancelResponse, dropDeferredResponses, startDeferredResponse, startResponse } from "./response-flow.ts";
import { responseCreateRefusal } from "./response-options.ts";
import type { SessionState } from "./state.ts";

const rejected = (command: Command, rejection: Rejection): DomainEvent => ({
  type: "RequestRejected",
  data: {
    code: rejection.code,
    message: rejection.message,
    param: rejection.param ?? null,
    clientEventId: command.eventId,
    commandType: command.type === "invalid" ? command.eventType : command.type,
  },
});

/** `session.update`: the patched configuration and the session's state as `session.updated` shows it. */
const decideSessionUpdate = (
  state: SessionState,
  command: Extract<Command, { type: "session.update" }>,
  refuse: (rejection: Rejection) => Decision,
): Decision => {
  const refAudio = command.patch.refAudio;
  const started = state.input.clockMs > 0 || state.responseCount > 0;
  if (refAudio !== undefined && started && (refAudio?.sha256 ?? null) !== (state.config.refAudio?.sha256 ?? null)) {
    return refuse(
      reject(
        "ref_audio_update_unsupported",
        "ref_audio cannot change once the session has audio or responses; open a new session for another voice",
        "session.ref_audio",
      ),
    );
  }
  const initialText = command.patch.initialUserText;
  if (initialText !== undefined && (started || state.history.length > 0 || state.input.bufferedBytes > 0)) {
    return refuse(
      reject(
        "bad_event",
        "extra_body.duplex_initial_user_text is taken only before any input; send conversation.item.create instead",
        "session.extra_body.duplex_initial_user_text",
      ),
    );
  }
  const config = applySessionPatch(state.config, command.patch, state.capabilities);
  if ("code" in config) return refuse(config);
  const b = decisionBuilder(state);
  b.push({ type: "SessionConfigured", data: { config, view: sessionSnapshotOf(state) } });
  // The initial user text is a user item of its own, after the configuration it came with (reference, "extra_body").
  if (initialText !== undefined) {
    const content = [{ type: "input_text" as const, text: initialText }];
    const item = { type: "message" as const, role: "user" as const, content };
    createItem(b, {
      type: "conversation.item.create",
      eventId: command.eventId,
      previousItemId: null,
      itemId: null,
      item,
    });
  }
  return b.decision();
};

/**
 * What the session object shows of `state` (`session.updated`, `session.resumed`): its turn state, the active
 * response and the playback ledger of the active (else the last) response.
 */
export const sessionSnapshotOf = (state: SessionState): SessionSnapshot => {
  const last = Object.values(state.audio).at(-1);
  return {
    turnState: state.turnState,
    activeResponseId: state.response?.id ?? null,
    activeResponseTurnId: state.response?.turnId ?? null,
    playback: (state.response === null ? last : state.audio[state.response.itemId])?.ledger ?? emptyLedger,
  };
};

/** `response.cancel`: ends the active response (named or not), then the next deferred one starts. */
const decideResponseCancel = (
  state: SessionState,
  b: DecisionBuilder,
  at: number,
  command: Extract<Command, { type: "response.cancel" }>,
  refuse: (rejection: Rejection) => Decision,
): Decision => {
  if (state.response === null) {
    return refuse(reject("response_not_active", "response.cancel: no response is active"));
  }
  if (command.responseId !== null && command.responseId !== state.response.id) {
    return refuse(
      reject(
        "response_not_active",
        `response ${command.responseId} is not the active one (${state.response.id})`,
        "response_id",
      ),
    );
  }
  cancelResponse(b, at, "client_cancelled");
  startDeferredResponse(b, at);
  return b.decision();
};

/** `barge_in` and `turn.signal`: the client says the user barged in (a turn.signal of any other event is reported unsupported). */
const decideBargeIn = (
  state: SessionState,
  b: DecisionBuilder,
  at: number,
  command: Extract<Command, { type: "barge_in" | "turn.signal" }>,
  refuse: (rejection: Rejection) => Decision,
): Decision => {
  if (command.type === "turn.signal" && command.event !== "barge_in") {
    return decisionOf(state, [
      {
        type: "RuntimeControlReported",
        data: {
          signal: command.event,
          supported: false,
          detail: `turn.signal event "${command.event}" is not supported; only "barge_in" is`,
        },
      },
    ]);
  }
  if (!state.capabilities.supportsBargeIn) {
    return refuse(
      reject("barge_in_unsupported", "this model does not support barge-in (capabilities.supports_barge_in is false)"),
    );
  }
  if (state.response !== null) cancelResponse(b, at, "barge_in");
  else b.push({ type: "EpochAdvanced", data: { epoch: state.epoch + 1, reason: "barge_in" } });
  dropDeferredResponses(b, "barge_in");
  // Sessions recorded before issue 35, part 1 told the client nothing of the signal itself (EarlierRules).
  if (state.rules?.noTurnEvents !== true) {
    b.push({ type: "TurnSignalled", data: { event: "barge_in", source: command.type, turnState: b.state.turnState } });
  }
  return b.decision();
};

/** `input_audio_buffer.commit`: the buffer becomes a user item (refused when empty, or when too many turns wait). */
const decideCommit = (
  state: SessionState,
  b: DecisionBuilder,
  at: number,
  command: Extract<Command, { type: "input_audio_buffer.commit" }>,
  refuse: (rejection: Rejection) => Decision,
): Decision => {
  if (command.declaredSilence === true) {
    // Nothing reaches the model: what was buffered is dropped, and the model keeps listening (no user item).
    if (state.input.bufferedBytes > 0 || state.input.text !== "")
      b.push({ type: "InputCleared", data: { clockMs: state.input.clockMs } });
    b.push({ type: "ModelListened", data: { reason: "client_declared_silence", responseId: null } });
    return b.decision();
  }
  if (state.input.bufferedBytes === 0 && state.input.text === "") {
    return refuse(
      reject("input_audio_buffer_empty", "input_audio_buffer.commit needs buffered audio; the buffer is empty"),
    );
  }
  if (responseWanted(state, command.createResponse) === "refused") {
    return refuse(
      reject(
        "input_backpressure",
        `${state.maxPendingTurns} responses are already waiting for the active one to end (max_pending_turns_per_session); commit again when one has started`,
      ),
    );
  }
  commitInput(b, at, command.createResponse, "client");
  return b.decision();
};

/** `conversation.item.delete`: the item leaves history (refused when unknown or the active response's). */
const decideItemDelete = (
  state: SessionState,
  b: DecisionBuilder,
  command: Extract<Command, { type: "conversation.item.delete" }>,
  refuse: (rejection: Rejection) => Decision,
): Decision => {
  const item = findItem(b, command.itemId);
  if ("code" in item) return refuse(item);
  if (state.response?.itemId === item.id) {
    return refuse(reject("bad_event", `item ${item.id} belongs to the active response; cancel it first`, "item_id"));
  }
  return decisionOf(state, [{ type: "ItemDeleted", data: { itemId: item.id } }]);
};

/** `output_audio_buffer.clear`: the active response is cut, and the client is told the buffer is cleared. */
const decideOutputAudioClear = (state: SessionState, b: DecisionBuilder, at: number): Decision => {
  const active = state.response;
  const sent = active !== null && (state.audio[active.itemId]?.ledger.sentMs ?? 0) > 0;
  cancelResponse(b, at, "client_cancelled");
  // A cancel that had sent audio already answers with output_audio_buffer.cleared.
  if (!sent) b.push({ type: "OutputAudioCleared", data: { responseId: active?.id ?? null } });
  startDeferredResponse(b, at);
  return b.decision();
};

/** `response.create`: a response starts (refused while one is active, or when its options are refused). */
const decideResponseCreate = (
  state: SessionState,
  b: DecisionBuilder,
  at: number,
  command: Extract<Command, { type: "response.create" }>,
  refuse: (rejection: Rejection) => Decision,
): Decision => {
  if (state.response !== null) {
    return refuse(reject("response_already_active", `response ${state.response.id} is still active`));
  }
  const refusal = responseCreateRefusal(state, command);
  if (refusal !== null) return refuse(refusal);
  startResponse(b, at, "client", command.metadata, {
    modalities: command.modalities,
    instructions: command.instructions,
    conversation: command.conversation ?? "auto",
  });
  return b.decision();
};

/** Decides what a client command means for the session. Pure. */
export const decideCommand = (state: SessionState, command: Command, at: number): Decision => {
  if (command.type === "invalid") {
    return decisionOf(state, [rejected(command, reject(command.code, command.message, command.param ?? undefined))]);
  }
  if (state.phase !== "open") {
    return decisionOf(state, [
      rejected(command, reject("session_closed", `the session is ${state.phase}; ${command.type} is refused`)),
    ]);
  }
  const b = decisionBuilder(state);
  const refuse = (rejection: Rejection | null): Decision =>
    rejection === null ? b.decision() : decisionOf(state, [rejected(command, rejection)]);
  switch (command.type) {
    case "session.update":
      return decideSessionUpdate(state, command, refuse);
    case "input_audio_buffer.append":
      appendAudio(b, at, command);
      return b.decision();
    case "input_audio_buffer.commit":
      return decideCommit(state, b, at, command, refuse);
    case "input_audio_buffer.clear":
      return decisionOf(state, [{ type: "InputCleared", data: { clockMs: state.input.clockMs } }]);
    case "response.create":
      return decideResponseCreate(state, b, at, command, refuse);
    case "response.cancel":
      return decideResponseCancel(state, b, at, command, refuse);
    case "playback.ack":
      return refuse(acknowledgePlayback(b, at, command));
    case "conversation.item.truncate":
      if (!state.capabilities.supportsAudioTruncate) {
        return refuse(
          reject(
            "audio_truncate_unsupported",
            "this model does not support audio truncation (capabilities.supports_audio_truncate is false)",
          ),
        );
      }
      return refuse(truncateItem(b, at, command));
    case "session.heartbeat":
      return decisionOf(state, [{ type: "HeartbeatAcknowledged", data: {} }]);
    case "session.close":
      cancelResponse(b, at, "session_closed");
      b.push(...settleEstimatedItems(b.state, at));
      b.push({ type: "SessionClosed", data: { reason: "session_close" } });
      return b.decision();
    case "session.event_ack":
      return command.seq > command.headSeq
        ? refuse(
            reject(
              "invalid_event_ack",
              `server_event_seq ${command.seq} is beyond the last event sent (${command.headSeq})`,
              "server_event_seq",
            ),
          )
        : decisionOf(state, [{ type: "EventsAcknowledged", data: { seq: command.seq } }]);
    case "input.cancel":
      if (state.response !== null) cancelResponse(b, at, "client_cancelled");
      else b.push({ type: "EpochAdvanced", data: { epoch: state.epoch + 1, reason: "input_cancelled" } });
      b.push({ type: "InputCleared", data: { clockMs: b.state.input.clockMs } });
      // input.cancel drops only uncommitted input: committed turns still get their responses.
      startDeferredResponse(b, at);
      return b.decision();
    case "input.text.append":
      return decisionOf(state, [{ type: "InputTextAppended", data: { text: command.text } }]);
    case "conversation.item.create":
      return refuse(createItem(b, command));
    case "conversation.item.retrieve": {
      const item = findItem(b, command.itemId);
      return "code" in item ? refuse(item) : decisionOf(state, [{ type: "ItemRetrieved", data: { item } }]);
    }
    case "conversation.item.delete":
      return decideItemDelete(state, b, command, refuse);
    case "output_audio_buffer.clear":
      return decideOutputAudioClear(state, b, at);
    case "barge_in":
    case "turn.signal":
      return decideBargeIn(state, b, at, command, refuse);
    default: {
      const unhandled: never = command;
      throw new Error(`decide: unhandled command ${JSON.stringify(unhandled)}`);
    }
  }
};
