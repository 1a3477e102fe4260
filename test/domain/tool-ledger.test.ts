import { describe, expect, it } from "vitest";
import {
  type Capabilities,
  type Command,
  type ItemId,
  type SessionState,
  toolCallOf,
  toolCallStatus,
} from "../../src/domain/index.ts";
import { cancel, command, create, ECHO_CAPABILITIES, given, opened, stage } from "./decider-spec.ts";

/** The session tool ledger (tool-ledger.ts; the reference's newest revision, "Duplex session tool contract"). */
const TOOLS: Capabilities = { ...ECHO_CAPABILITIES, supportsToolCalls: true };

const callItem = (callId: string, eventId: string | null = null, itemId: string | null = null): Command => ({
  type: "conversation.item.create",
  eventId,
  previousItemId: null,
  itemId: itemId as ItemId | null,
  item: { type: "function_call", callId, name: "get_weather", arguments: "{}" },
});

const output = (callId: string, eventId: string | null = null): Command => ({
  type: "conversation.item.create",
  eventId,
  previousItemId: null,
  itemId: null,
  item: { type: "function_call_output", callId, output: '{"temp_c":18}' },
});

const deleteItem = (itemId: string): Command => ({
  type: "conversation.item.delete",
  eventId: null,
  itemId: itemId as ItemId,
});

const modelCall = (callId: string, name = "get_weather") =>
  stage({ kind: "tool_call", epoch: 0, callId, name, arguments: '{"city":"Paris"}' });

const statusOf = (state: SessionState, callId: string) => {
  const row = toolCallOf(state, callId);
  return row === undefined ? undefined : toolCallStatus(state, row);
};

describe("the session tool ledger", () => {
  it("opens a model's call at the epoch it was made in, and completes it with its output", () => {
    const made = given(opened(TOOLS), command(create()), modelCall("call_1")).state;
    expect(toolCallOf(made, "call_1")).toMatchObject({
      callId: "call_1",
      name: "get_weather",
      epoch: 0,
      status: "open",
    });
    const answered = given(opened(TOOLS), command(create()), modelCall("call_1")).when(command(output("call_1")));
    expect(answered.events.map((e) => e.type)).toEqual(["ItemCreated"]);
    expect(statusOf(answered.after, "call_1")).toBe("completed");
  });

  it("opens a call the client creates (its replayed chat context) and takes its output", () => {
    const spec = given(opened(ECHO_CAPABILITIES), command(callItem("call_ctx")));
    expect(statusOf(spec.state, "call_ctx")).toBe("open");
    expect(spec.when(command(output("call_ctx"))).events.map((e) => e.type)).toEqual(["ItemCreated"]);
  });

  it("refuses an output that answers no call of the session: unknown_function_call, nothing in history", () => {
    given(opened(TOOLS))
      .when(command(output("call_never_made", "evt_o")))
      .thenRejects("unknown_function_call", "evt_o");
  });

  it("refuses a second output for an answered call: duplicate_function_call_output, the call stays completed", () => {
    const spec = given(opened(TOOLS), command(callItem("call_1")), command(output("call_1")));
    spec.when(command(output("call_1", "evt_again"))).thenRejects("duplicate_function_call_output", "evt_again");
    expect(statusOf(spec.state, "call_1")).toBe("completed");
  });

  it("cancels a call whose item is deleted; its output is late_function_call_output", () => {
    const spec = given(opened(TOOLS), command(callItem("call_1", null, "item_call")), command(deleteItem("item_call")));
    expect(statusOf(spec.state, "call_1")).toBe("cancelled");
    spec.when(command(output("call_1", "evt_late"))).thenRejects("late_function_call_output", "evt_late");
  });

  it("retires a call still open when the epoch advances (a barge-in): its output is stale_function_call_output", () => {
    const spec = given(
      opened(TOOLS),
      command(create()),
      modelCall("call_1"),
      command({ type: "barge_in", eventId: null }),
    );
    expect(spec.state.epoch).toBeGreaterThan(0);
    expect(statusOf(spec.state, "call_1")).toBe("stale");
    spec.when(command(output("call_1", "evt_stale"))).thenRejects("stale_function_call_output", "evt_stale");
  });

  it("leaves answered and cancelled calls as they were when the epoch advances", () => {
    const spec = given(
      opened(TOOLS),
      command(callItem("call_done")),
      command(output("call_done")),
      command(callItem("call_gone", null, "item_gone")),
      command(deleteItem("item_gone")),
      command(create()),
      command(cancel()),
    );
    expect(spec.state.epoch).toBeGreaterThan(0);
    expect(statusOf(spec.state, "call_done")).toBe("completed");
    expect(statusOf(spec.state, "call_gone")).toBe("cancelled");
  });

  it("lets the client place a call again once it deleted its item, and refuses a blank call id or name", () => {
    const spec = given(opened(TOOLS), command(callItem("call_1", null, "item_call")), command(deleteItem("item_call")));
    const placed = spec.when(command(callItem("call_1", null, "item_call_2")));
    expect(placed.events.map((e) => e.type)).toEqual(["ItemCreated"]);
    expect(statusOf(placed.after, "call_1")).toBe("open");
    for (const callId of ["", " ", "\t\n"]) {
      given(opened(TOOLS))
        .when(command(callItem(callId, "evt_blank")))
        .thenRejects("bad_event", "evt_blank");
    }
  });

  it("retires open calls on an input.cancel too: the epoch advanced", () => {
    const spec = given(opened(TOOLS), command(callItem("call_1")), command({ type: "input.cancel", eventId: null }));
    expect(statusOf(spec.state, "call_1")).toBe("stale");
  });

  it("names a long call id in its refusal by its first 64 characters", () => {
    const long = `call_${"x".repeat(10_000)}`;
    const w = given(opened(TOOLS)).when(command(output(long)));
    const message = String((w.events[0]?.data as { message?: string } | undefined)?.message);
    expect(message).toContain(`${long.slice(0, 64)}...`);
    expect(message.length).toBeLessThan(200);
  });

  it("refuses a client's function_call item whose call id is already a call: duplicate_function_call", () => {
    given(opened(TOOLS), command(callItem("call_1")))
      .when(command(callItem("call_1", "evt_dup")))
      .thenRejects("duplicate_function_call", "evt_dup");
  });

  it("tells the client of a model's call it cannot open, and delivers none of it", () => {
    const again = given(opened(TOOLS), command(create()), modelCall("call_1")).when(modelCall("call_1"));
    expect(again.events).toHaveLength(1);
    expect(again.events[0]).toMatchObject({
      type: "RequestRejected",
      data: { code: "duplicate_function_call", param: "call_id", clientEventId: null },
    });
    expect(again.after.response?.functionCalls).toHaveLength(1);
    for (const [callId, name] of [
      ["", "get_weather"],
      ["call_2", " "],
    ] as const) {
      const invalid = given(opened(TOOLS), command(create())).when(modelCall(callId, name));
      expect(invalid.events.map((e) => [e.type, (e.data as { code?: string }).code])).toEqual([
        ["RequestRejected", "invalid_function_call"],
      ]);
      expect(toolCallOf(invalid.after, callId)).toBeUndefined();
    }
  });

  it("takes any function item under the rules of a session recorded before the ledger", () => {
    const earlier = { ...opened(TOOLS) };
    const withRule = {
      ...earlier,
      data: { ...(earlier.data as object), rules: { noToolLedger: true } },
    } as typeof earlier;
    const spec = given(withRule, command(callItem("call_1")), command(output("call_1")));
    expect(spec.when(command(output("call_1"))).events.map((e) => e.type)).toEqual(["ItemCreated"]);
    expect(spec.when(command(output("call_unknown"))).events.map((e) => e.type)).toEqual(["ItemCreated"]);
    expect(spec.when(command(callItem("call_1"))).events.map((e) => e.type)).toEqual(["ItemCreated"]);
  });
});
