import type { ItemCreate } from "./commands.ts";
import { type Rejection, reject } from "./errors.ts";
import type { ItemId } from "./ids.ts";

/**
 * The session tool ledger (the reference's newest revision, vLLM-Omni's "Duplex session tool contract"): one row a
 * function call, `open -> completed | cancelled | stale`. The ledger runs no tool, starts no timer and never holds up
 * audio; it decides whether a `function_call_output` belongs to a call this session opened and that has not already
 * finished, been withdrawn or been retired.
 *
 * - A call opens when the model makes it (`FunctionCallDelivered`) or the client creates a `function_call` item (a
 *   client replaying its chat context opens the calls it then answers), at the session's epoch of that moment.
 * - `completed`: a `function_call_output` answered it. `cancelled`: its `function_call` item was deleted
 *   (`conversation.item.delete`); the client may place the call again. `stale`: still open when the epoch advanced
 *   (a barge-in, signalled or detected, a cancelled response, an `input.cancel`), so the model's intent it answers
 *   was retired; never stored, derived from the row's epoch.
 * - A call id stays taken for the session once opened (the reference's rule): a model that numbers its calls anew
 *   per response is refused its repeats as `duplicate_function_call`.
 * - Codes: `duplicate_function_call` (a call id opened again), `invalid_function_call` (a model's call with an empty
 *   id or name), `unknown_function_call`, `duplicate_function_call_output`, `late_function_call_output`,
 *   `stale_function_call_output`. A refused output enters no history and reaches no model.
 *
 * Items of `response.create{response.input}` are one response's context, not the conversation: the ledger does not
 * look at them. Logs recorded before it replay under the rule `noToolLedger` (EarlierRules).
 */
export type ToolCallStatus = "open" | "completed" | "cancelled" | "stale";

/** One function call of the session: its id and name, its `function_call` item, the epoch it opened in. */
export interface ToolCallRow {
  readonly callId: string;
  readonly name: string;
  readonly itemId: ItemId;
  readonly epoch: number;
  /** As recorded; `stale` is derived (`toolCallStatus`). */
  readonly status: "open" | "completed" | "cancelled";
}

/** What the ledger reads of a session's state (`SessionState` has both). */
export interface LedgerView {
  /** The rows, oldest first (absent in states folded before the ledger: none). */
  readonly toolCalls?: readonly ToolCallRow[];
  readonly epoch: number;
}

/** The rows of `state`, oldest first. */
export const toolCalls = (state: LedgerView): readonly ToolCallRow[] => state.toolCalls ?? [];

/** The row of `callId`, or undefined. */
export const toolCallOf = (state: LedgerView, callId: string): ToolCallRow | undefined =>
  toolCalls(state).find((row) => row.callId === callId);

/** A row's status in `state`: an open call of an earlier epoch is `stale`. */
export const toolCallStatus = (state: LedgerView, row: ToolCallRow): ToolCallStatus =>
  row.status === "open" && row.epoch < state.epoch ? "stale" : row.status;

/** `rows` with a call opened at `epoch` (replacing a row of the same id, which only an earlier release let in). */
export const withCallOpened = (
  rows: readonly ToolCallRow[],
  call: { readonly callId: string; readonly name: string; readonly itemId: ItemId },
  epoch: number,
): readonly ToolCallRow[] => [
  ...rows.filter((row) => row.callId !== call.callId),
  { callId: call.callId, name: call.name, itemId: call.itemId, epoch, status: "open" },
];

/** `rows` with the open call of `callId` completed (unchanged when there is none). */
export const withCallAnswered = (rows: readonly ToolCallRow[], callId: string): readonly ToolCallRow[] =>
  rows.map((row) => (row.callId === callId && row.status === "open" ? { ...row, status: "completed" } : row));

/** `rows` with the open call whose `function_call` item is `itemId` cancelled (unchanged when there is none). */
export const withCallWithdrawn = (rows: readonly ToolCallRow[], itemId: ItemId): readonly ToolCallRow[] =>
  rows.map((row) => (row.itemId === itemId && row.status === "open" ? { ...row, status: "cancelled" } : row));

/**
 * Why the ledger refuses the client's item, or null: a `function_call` whose id is already a call is
 * `duplicate_function_call`; a `function_call_output` must answer an open call of the current epoch.
 */
export const itemLedgerRefusal = (state: LedgerView, item: ItemCreate["item"]): Rejection | null => {
  if (item.type === "function_call") {
    if (item.callId.trim() === "" || item.name.trim() === "") {
      return reject("bad_event", "a function_call item needs a call_id and a name that are not blank", "item.call_id");
    }
    // A call whose item the client deleted may be placed again (a client re-syncing its chat context).
    const placed = toolCallOf(state, item.callId);
    return placed === undefined || placed.status === "cancelled"
      ? null
      : reject(
          "duplicate_function_call",
          `call_id ${idOf(item.callId)} is already a function call of the session`,
          "item.call_id",
        );
  }
  if (item.type !== "function_call_output") return null;
  const row = toolCallOf(state, item.callId);
  if (row === undefined) {
    return reject(
      "unknown_function_call",
      `call_id ${idOf(item.callId)} names no function call of the session (create its function_call item first)`,
      "item.call_id",
    );
  }
  switch (toolCallStatus(state, row)) {
    case "open":
      return null;
    case "completed":
      return reject(
        "duplicate_function_call_output",
        `function call ${idOf(row.callId)} is already answered`,
        "item.call_id",
      );
    case "cancelled":
      return reject(
        "late_function_call_output",
        `function call ${idOf(row.callId)} was cancelled (its item was deleted) before this output`,
        "item.call_id",
      );
    case "stale":
      return reject(
        "stale_function_call_output",
        `function call ${idOf(row.callId)} was made in epoch ${row.epoch}; the session is in epoch ${state.epoch} since a barge-in or cancel`,
        "item.call_id",
      );
  }
};

/** A call id as an error message names it: at most 64 characters of it. */
const idOf = (callId: string): string => (callId.length <= 64 ? callId : `${callId.slice(0, 64)}...`);

/** Why the ledger refuses a call the model made, or null: an empty id or name, or an id already a call. */
export const modelCallRefusal = (state: LedgerView, callId: string, name: string): Rejection | null => {
  if (callId.trim() === "" || name.trim() === "") {
    return reject("invalid_function_call", "the model made a function call with an empty call_id or name", "call_id");
  }
  return toolCallOf(state, callId) === undefined
    ? null
    : reject("duplicate_function_call", `the model made function call ${idOf(callId)} again`, "call_id");
};
