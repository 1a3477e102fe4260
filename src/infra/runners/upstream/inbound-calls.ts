/**
 * The upstream's function calls as `tool_call` outputs: a call is put together from every event that carries a part
 * of it (`response.output_item.added` with its name and call id, the argument deltas,
 * `response.function_call_arguments.done`, `output_item.done`, and `response.done.output`): both dialects name the
 * function in the item only, in the wild. Each call is emitted once, in the order the upstream announced them.
 */
import type { StageOutput } from "../../../domain/index.ts";
import { type Json, str } from "./wire-json.ts";

/** A function call as the upstream tells it, put together from every event that carries a part of it. */
interface CallParts {
  itemId: string | null;
  callId: string | null;
  name: string | null;
  arguments: string;
  /** The `.done` of its arguments came (or the item's `output_item.done`). */
  done: boolean;
  /** It went out as a `tool_call` output: later parts of it change nothing. */
  emitted: boolean;
}

/** The function calls of the response being answered. */
export interface InboundCalls {
  /** The parts of a function_call item (`output_item.added` / `.done` (`done`), `response.done.output`). */
  item(item: Json, done: boolean): void;
  /** `response.function_call_arguments.delta`. */
  argumentsDelta(event: Json): void;
  /** `response.function_call_arguments.done`; false when its call was emitted already (it changes nothing). */
  argumentsDone(event: Json): boolean;
  /**
   * Emits, stamped `epoch`, the calls whose arguments are done and whose name and call id are known, up to the first
   * that is not (a later call that finished first waits for it); at the end of the response (`all`), every call not
   * emitted yet, whatever it has (a call that never got its name is the malformed-call fallback).
   */
  emit(epoch: number, all: boolean): void;
  /** A new response: the calls of the last one are forgotten. */
  reset(): void;
}

/** The function calls of one session's responses, emitted to `emit`. */
export const createInboundCalls = (emit: (output: StageOutput) => void): InboundCalls => {
  /** The function calls of the response being answered, in the order the upstream announced them. */
  let calls: CallParts[] = [];

  const callFor = (parts: { itemId: string | null; callId: string | null }): CallParts => {
    const known = calls.find(
      (c) =>
        (parts.itemId !== null && c.itemId === parts.itemId) || (parts.callId !== null && c.callId === parts.callId),
    );
    if (known !== undefined) {
      known.itemId ??= parts.itemId;
      known.callId ??= parts.callId;
      return known;
    }
    const call: CallParts = { ...parts, name: null, arguments: "", done: false, emitted: false };
    calls.push(call);
    return call;
  };

  return {
    item(item, done) {
      const call = callFor({ itemId: str(item.id), callId: str(item.call_id) });
      if (call.emitted) return;
      call.name ??= str(item.name);
      const args = str(item.arguments);
      if (args !== null && args !== "") call.arguments = args;
      if (done) call.done = true;
    },
    argumentsDelta(event) {
      const call = callFor({ itemId: str(event.item_id), callId: str(event.call_id) });
      if (!call.done && !call.emitted) call.arguments += str(event.delta) ?? "";
    },
    argumentsDone(event) {
      const call = callFor({ itemId: str(event.item_id), callId: str(event.call_id) });
      if (call.emitted) return false;
      call.name ??= str(event.name);
      const args = str(event.arguments);
      if (args !== null) call.arguments = args;
      call.done = true;
      return true;
    },
    emit(epoch, all) {
      for (const call of calls) {
        if (call.emitted) continue;
        const ready = call.done && call.name !== null && call.callId !== null;
        if (!ready && !all) break;
        call.emitted = true;
        emit({ kind: "tool_call", epoch, callId: call.callId, name: call.name, arguments: call.arguments });
      }
    },
    reset() {
      calls = [];
    },
  };
};
