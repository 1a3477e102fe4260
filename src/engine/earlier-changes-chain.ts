import {
  type ItemCreate,
  itemLedgerRefusal,
  modelCallRefusal,
  nothingToRespondTo,
  type ResponseCreate,
  type SessionState,
  type StageOutput,
} from "../domain/index.ts";
import type { EarlierChange, Json } from "./earlier-change.ts";
import { commandOf, foldSteps, isInput, speechInProgressBefore, withoutKey, withRule } from "./earlier-log-edits.ts";
import type { RecordedEntry } from "./ports/index.ts";

/**
 * The changes made since the hash chain came in (log schema 2), oldest first: each `sinceSchema: 2`, so that a log
 * of schema 2 is looked at for them too (see earlier-releases.ts). The tail of `EARLIER_CHANGES`.
 */
export const CHAIN_ERA_CHANGES: readonly EarlierChange[] = [
  {
    // Made after 01b8770 (issue 33, part 2), in the schema-2 era: a log of schema 2 may predate it too.
    commit: "01b8770",
    summary:
      "a restart or takeover gives the new runner the utterance in progress from its start (UtteranceResubmitted{inProgress})",
    sinceSchema: 2,
    // On every read of a schema-2 log (resume, recovery, rebuild): a scan, never a fold (issue 33, part 1's review).
    before: (entries) => {
      for (let i = 0; i < entries.length; i += 1) {
        const type = (entries[i] as RecordedEntry).type;
        if (type !== "SessionRecovered" && type !== "SessionOwned") continue;
        for (let k = i + 1; k < entries.length && !isInput((entries[k] as RecordedEntry).type); k += 1) {
          const d = entries[k] as RecordedEntry;
          if (d.type === "UtteranceResubmitted" && (d.data as { inProgress?: unknown }).inProgress === true)
            return false;
          if (d.type === "SessionDetached") {
            if (speechInProgressBefore(entries, k)) return true;
            break;
          }
        }
      }
      // Only a move shows it: a log without one, or without speech at its moves, reads alike under both rules.
      return null;
    },
    upcast: withRule("noUtteranceCarriedOver"),
  },
  {
    // Made after 8d956f0 (issue 33, part 3), in the schema-2 era.
    commit: "8d956f0",
    summary:
      "a listen that ends a precreated response names it (ModelListened.responseId, response.listen's response_id)",
    sinceSchema: 2,
    // A scan for the field the change added: every ModelListened of today's logs has it, null or not.
    before: (entries) => {
      for (const e of entries) if (e.type === "ModelListened") return !("responseId" in (e.data as Json));
      return null;
    },
    upcast: withRule("listenNamesNoResponse"),
  },
  {
    // Made after 06f0d69 (issue 35, part 4), in the schema-2 era; test/fixtures/earlier-releases/
    // response-create-without-input.jsonl is 6045fad's recording of it.
    commit: "06f0d69",
    summary: "a response.create with nothing to respond to is refused (response_create_without_input)",
    sinceSchema: 2,
    // Only a response.create shows it: a scan for one first, then a fold for the state it was decided in.
    before: (entries) =>
      !entries.some((e) => commandOf(e) === "response.create")
        ? null
        : foldSteps(entries, (input, decisions, before) => {
            // Audio heard is heard for good (the input clock never goes back): no later response.create answers
            // nothing, so the fold need go no further than the first audio.
            if (before.input.clockMs > 0) return "stop";
            if (commandOf(input) !== "response.create") return null;
            const command = (input.data as { command: ResponseCreate }).command;
            if (before.phase !== "open" || before.response !== null || !nothingToRespondTo(before, command))
              return null;
            if (decisions.some((d) => d.type === "ResponseStarted")) return true;
            return decisions.some(
              (d) =>
                d.type === "RequestRejected" && (d.data as { code?: unknown }).code === "response_create_without_input",
            )
              ? false
              : null;
          }),
    upcast: withRule("responseWithoutInputAnswered"),
  },
  {
    // Made after 2309318 (issue 35, part 1), in the schema-2 era; test/fixtures/earlier-releases/barge-in-signals.jsonl
    // is a2ef72d's recording of it.
    commit: "2309318",
    summary: "a client's barge-in signal is told back as turn.event (TurnSignalled)",
    sinceSchema: 2,
    // A scan: a barge-in signal the session took shows which rule decided it.
    before: (entries) => {
      for (let i = 0; i < entries.length; i += 1) {
        const command = (entries[i]?.data as { command?: { type?: string; event?: string } } | undefined)?.command;
        const signal =
          entries[i]?.type === "CommandReceived" &&
          (command?.type === "barge_in" || (command?.type === "turn.signal" && command.event === "barge_in"));
        if (!signal) continue;
        const decisions: RecordedEntry[] = [];
        for (let k = i + 1; k < entries.length && !isInput((entries[k] as RecordedEntry).type); k += 1)
          decisions.push(entries[k] as RecordedEntry);
        if (decisions.some((d) => d.type === "TurnSignalled")) return false;
        if (decisions.length > 0 && !decisions.some((d) => d.type === "RequestRejected")) return true;
      }
      return null;
    },
    upcast: withRule("noTurnEvents"),
  },
  {
    // Made after cab8338 (issue 35, part 1), in the schema-2 era: the wire alone, which no field of a log shows.
    commit: "cab8338",
    summary: "overlap.decision carries its details under metadata too (the reference's newest revision)",
    sinceSchema: 2,
    before: () => null,
    wire: (event) => (event.type === "overlap.decision" ? withoutKey(event, ["metadata"]) : event),
  },
  {
    // Made after 4d10185 (issue 35, part 1), in the schema-2 era.
    commit: "4d10185",
    summary: "session.resumed carries the session object (SessionResumed.config and .view)",
    sinceSchema: 2,
    // A scan for the field the change added: every SessionResumed of today's logs has it.
    before: (entries) => {
      for (const e of entries) if (e.type === "SessionResumed") return !("config" in (e.data as Json));
      return null;
    },
    upcast: withRule("resumedWithoutSession"),
  },
  {
    // Made after 925ba1d (issue 35, part 1), in the schema-2 era; test/fixtures/earlier-releases/
    // tool-ledger-unchecked.jsonl is d5d0edc's recording of it.
    commit: "925ba1d",
    summary: "the session tool ledger refuses a function call or output it cannot take (unknown_function_call, ...)",
    sinceSchema: 2,
    // Only a function call or output shows it: a scan for one first, then a fold for the ledger it was decided by.
    before: (entries) =>
      !entries.some((e) => toolEntry(e) !== null)
        ? null
        : foldSteps(entries, (input, decisions, before) => {
            const refusal = ledgerRefusalOf(input, before);
            if (refusal === null) return null;
            if (decisions.some((d) => d.type === "ItemCreated" || d.type === "FunctionCallDelivered")) return true;
            return decisions.some(
              (d) => d.type === "RequestRejected" && (d.data as { code?: unknown }).code === refusal,
            )
              ? false
              : null;
          }),
    upcast: withRule("noToolLedger"),
  },
  {
    // Made after 0508ff2 (issue 35, part 1), in the schema-2 era: the wire alone.
    commit: "0508ff2",
    summary: "session.closed carries the native event under event (session_id, epoch, reason)",
    sinceSchema: 2,
    before: () => null,
    wire: (event) => (event.type === "session.closed" ? withoutKey(event, ["event"]) : event),
  },
];

/** The client's function item, or the model's named call, that `entry` brings the session; else null. */
const toolEntry = (entry: RecordedEntry): ItemCreate["item"] | StageOutput | null => {
  if (commandOf(entry) === "conversation.item.create") {
    const item = (entry.data as { command: ItemCreate }).command.item;
    return item.type === "function_call" || item.type === "function_call_output" ? item : null;
  }
  if (entry.type !== "StageOutputReceived") return null;
  const output = (entry.data as { output: StageOutput }).output;
  return output.kind === "tool_call" && output.callId !== null && output.name !== null ? output : null;
};

/** The code today's tool ledger refuses `input` with in the state `before` it, or null when it takes it. */
const ledgerRefusalOf = (input: RecordedEntry, before: SessionState): string | null => {
  const tool = toolEntry(input);
  if (tool === null || before.phase !== "open") return null;
  if ("kind" in tool) {
    if (tool.kind !== "tool_call" || tool.callId === null || tool.name === null) return null;
    return modelCallRefusal(before, tool.callId, tool.name)?.code ?? null;
  }
  return itemLedgerRefusal(before, tool)?.code ?? null;
};
