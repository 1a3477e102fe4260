import { afterEach, describe, expect, it } from "vitest";
import { type EngineSession, openEngineSession, type Sent } from "../support/engine-session.ts";

/**
 * What the client tells the model reaches it, in process (the session harness; issue: "Everything the client tells the model
 * reaches it"): tools echoed as in force, a tool's output generating the next answer, out-of-band responses kept
 * out of the conversation, and text responses kept in history.
 */
const userText = (text: string) => ({
  type: "conversation.item.create",
  item: { type: "message", role: "user", content: [{ type: "input_text", text }] },
});

/** Sends `event` and resolves with the first `type` received after it. */
const ask = async (client: EngineSession, event: { type: string } & Record<string, unknown>, type: string) => {
  const since = client.sent.length;
  void client.send(event);
  return client.waitFor(type, { since, ms: 10_000 });
};

const eventsSince = (client: EngineSession, since: number): Sent[] => client.sent.slice(since);

describe("model-facing fields", () => {
  let session: EngineSession | null = null;
  afterEach(async () => {
    await session?.close();
    session = null;
  });

  it("echoes tools and tool_choice required as in force, and answers after a tool call from its output", async () => {
    session = await openEngineSession({
      config: { runner: { kind: "scripted", script: "deploy/scripts/tools.yaml" } },
    });
    const client = session;
    const tool = { type: "function", name: "get_weather", parameters: { type: "object" } };
    void client.send({
      type: "session.update",
      session: { instructions: "Answer.", tools: [tool], tool_choice: "required" },
    });
    const updated = await client.waitFor("session.updated", { since: 0 });
    expect(updated.session).toMatchObject({
      tools: [{ type: "function", name: "get_weather", description: "", parameters: { type: "object" } }],
      tool_choice: "required",
    });
    const since = client.sent.length;
    const called = await ask(client, { type: "response.create" }, "response.function_call_arguments.done");
    expect(called).toMatchObject({ call_id: "call_weather_1", name: "get_weather" });
    const done = await client.waitFor("response.done", { since: 0 });
    // A response that only calls a tool carries the function_call item alone, at output 0 (issue 8, case 5).
    expect(eventsSince(client, since).map((e) => e.type)).toEqual([
      "response.created",
      "response.output_item.added",
      "conversation.item.added",
      "conversation.item.created",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "conversation.item.done",
      "response.done",
      "rate_limits.updated",
    ]);
    const output = (done.response as { output: { type: string; call_id?: string }[] }).output;
    expect(output).toEqual([expect.objectContaining({ type: "function_call", call_id: "call_weather_1" })]);
    expect(
      eventsSince(client, since)
        .filter((e) => e.output_index !== undefined)
        .map((e) => e.output_index),
    ).toEqual([0, 0, 0, 0]);
    await ask(
      client,
      {
        type: "conversation.item.create",
        item: { type: "function_call_output", call_id: "call_weather_1", output: '{"temperature_c":24}' },
      },
      "conversation.item.done",
    );
    const answer = await ask(client, { type: "response.create" }, "response.output_audio_transcript.done");
    expect(answer.transcript).toBe('The weather service says: {"temperature_c":24}');
  });

  it("keeps an out-of-band response out of the conversation: no item events, not retrievable, never a previous item", async () => {
    session = await openEngineSession();
    const client = session;
    void client.send({ type: "session.update", session: { output_modalities: ["text"] } });
    await client.waitFor("session.updated", { since: 0 });
    const user = await ask(client, userText("hello"), "conversation.item.done");
    const userId = String((user.item as { id: string }).id);
    const since = client.sent.length;
    void client.send({
      type: "response.create",
      response: {
        conversation: "none",
        metadata: { purpose: "classify" },
        input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "Is this spam?" }] }],
      },
    });
    const done = await client.waitFor("response.done", { since });
    const oob = eventsSince(client, since);
    expect(oob.map((e) => String(e.type)).filter((t) => t.startsWith("conversation.item"))).toEqual([]);
    expect(done.response).toMatchObject({
      status: "completed",
      conversation_id: null,
      metadata: { purpose: "classify" },
      output: [{ content: [{ type: "output_text", text: "You wrote: Is this spam?" }] }],
    });
    const oobItem = String(((done.response as { output: { id: string }[] }).output[0] ?? { id: "" }).id);
    const missing = await ask(client, { type: "conversation.item.retrieve", item_id: oobItem }, "error");
    expect(missing.error).toMatchObject({ code: "item_not_found" });
    // The next in-band response follows the user's item, not the out-of-band one.
    const added = await ask(client, { type: "response.create" }, "conversation.item.added");
    expect(added.previous_item_id).toBe(userId);
  });

  it("keeps a text-only response's text in history", async () => {
    session = await openEngineSession();
    const client = session;
    void client.send({ type: "session.update", session: { output_modalities: ["text"] } });
    await client.waitFor("session.updated", { since: 0 });
    await ask(client, userText("hello"), "conversation.item.done");
    const done = await ask(client, { type: "response.create" }, "response.done");
    const itemId = String(((done.response as { output: { id: string }[] }).output[0] ?? { id: "" }).id);
    const retrieved = await ask(
      client,
      { type: "conversation.item.retrieve", item_id: itemId },
      "conversation.item.retrieved",
    );
    expect(retrieved.item).toMatchObject({
      id: itemId,
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: "You wrote: hello" }],
    });
  });
});
