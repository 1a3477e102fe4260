import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, startServerProcess } from "../../src/cli/server-process.ts";
import { RealtimeClient } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { type ModelServerStub, startModelServerStub } from "../support/model-server-stub.ts";
import { startTestServer } from "../support/server.ts";

/**
 * The upstream runner against a model server that behaves as real ones do (issue 18, part 1): an outage the
 * upstream session outlives, tool calls named only in their item, responses that end incomplete, a refused commit,
 * and a restart of our server that lost the upstream session. The model server is test/support's stub, in both
 * dialects where the case applies; every session still replays byte for byte from our log.
 */
type Server = Awaited<ReturnType<typeof startTestServer>>;
type Dialect = "duplex" | "openai";

const sessionIdOf = (client: RealtimeClient): string =>
  String(
    ((client.received.find((r) => r.event.type === "session.created")?.event.session ?? {}) as { id?: string }).id,
  );

const ask = async (client: RealtimeClient, event: { type: string } & Record<string, unknown>, type: string) => {
  const since = client.received.length;
  client.send(event);
  return client.waitFor(type, { since, timeoutMs: 15_000 });
};

const userText = (text: string) => ({
  type: "conversation.item.create",
  item: { type: "message", role: "user", content: [{ type: "input_text", text }] },
});

/** 100 ms of 16 kHz PCM16 whose samples say which append it is (`n`), base64. */
const chunk = (n: number): string => Buffer.alloc(3200, n % 251).toString("base64");

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("the upstream runner against a model server that behaves as real ones do", () => {
  const servers: Server[] = [];
  const stubs: ModelServerStub[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await server.stop().catch(() => undefined);
    for (const stub of stubs.splice(0)) await stub.close();
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  const stub = async (options: Parameters<typeof startModelServerStub>[0]) => {
    const s = await startModelServerStub(options);
    stubs.push(s);
    return s;
  };

  /** Server A with the upstream runner in front of `url`; a client whose session is updated with `session`. */
  const front = async (url: string, dialect: Dialect, extra: Record<string, unknown> = {}, session = {}) => {
    const a = await startTestServer({ runner: { kind: "upstream", url, dialect, ...extra } });
    servers.push(a);
    const client = await RealtimeClient.connect(a.url);
    client.send({ type: "session.update", session });
    await client.waitFor("session.updated", { since: 0 });
    return { a, client };
  };

  const replays = async (a: Server, client: RealtimeClient) =>
    replayEntries(await a.store.read(streamOf(sessionIdOf(client)))).ok;

  /** The `upstream_session` outputs in A's log: one each time the upstream session was created or resumed. */
  const upstreamSessions = async (a: Server, client: RealtimeClient) =>
    (await a.store.read(streamOf(sessionIdOf(client)))).filter(
      (e) =>
        e.type === "StageOutputReceived" && (e.data as { output: { kind: string } }).output.kind === "upstream_session",
    );

  it("a 1.5 s outage (refused, then HTTP 503) is outlived: the session resumes, every append reaches the model once", async () => {
    const model = await stub({ dialect: "duplex" });
    const { a, client } = await front(
      model.url,
      "duplex",
      { resume: { grace_ms: 8000, initial_delay_ms: 100, max_delay_ms: 400 } },
      { input_audio_format: "pcm16", input_sample_rate_hz: 16000 },
    );
    let sent = 0;
    const append = (): void => {
      client.send({ type: "input_audio_buffer.append", audio: chunk(sent) });
      sent += 1;
    };
    for (let i = 0; i < 5; i++) append();
    await expect.poll(() => model.sessions[0]?.appendedBytes).toBe(5 * 3200);
    model.drop();
    await model.refuse("connection");
    const outage = (async () => {
      await sleep(700);
      await model.refuse("http503");
      await sleep(800);
      await model.refuse(null);
    })();
    // The client goes on speaking through the outage, at 100 ms a chunk.
    for (let i = 0; i < 20; i++) {
      append();
      await sleep(100);
    }
    await outage;
    const done = await ask(client, { type: "response.create", response: { instructions: "Answer." } }, "response.done");
    expect(done.response).toMatchObject({ status: "completed" });
    expect(client.types()).not.toContain("error");
    // One upstream session, resumed, not a new one; each of the 25 appends reached it exactly once.
    expect(model.sessions).toHaveLength(1);
    expect(model.sessions[0]?.appendedBytes).toBe(sent * 3200);
    expect(model.sessions[0]?.frames.filter((f) => f.type === "response.create")).toHaveLength(1);
    expect(await upstreamSessions(a, client)).toHaveLength(2);
    await client.close();
    expect(await replays(a, client)).toBe(true);
  });

  it("an outage longer than the resume grace ends the session with upstream_unavailable, saying how long it tried", async () => {
    const model = await stub({ dialect: "duplex" });
    const { a, client } = await front(model.url, "duplex", {
      resume: { grace_ms: 1200, initial_delay_ms: 100, max_delay_ms: 300 },
    });
    await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
    model.drop();
    await model.refuse("connection");
    const error = await client.waitFor("error", { since: 0, timeoutMs: 10_000 });
    expect(error.error).toMatchObject({
      code: "upstream_unavailable",
      message: expect.stringMatching(/could not be resumed within 1200 ms \(\d+ tries\)/),
    });
    const closed = await client.waitFor("session.closed", { since: 0 });
    expect(closed).toMatchObject({ reason: "runner_failed" });
    await model.refuse(null);
    expect(await replays(a, client)).toBe(true);
  });

  it("a refusal the model server sent as the link died (only in its replay) reaches the client after the resume", async () => {
    const model = await stub({ dialect: "duplex", minCommitMs: 200 });
    const { a, client } = await front(
      model.url,
      "duplex",
      { resume: { grace_ms: 5000, initial_delay_ms: 50, max_delay_ms: 200 } },
      { input_audio_format: "pcm16", input_sample_rate_hz: 16000, extra_body: { auto_response: false } },
    );
    await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
    client.send({ type: "input_audio_buffer.append", audio: chunk(1) });
    model.cutAfter("input_audio_buffer.commit");
    const short = await ask(client, { type: "input_audio_buffer.commit" }, "input_audio_buffer.committed");
    const failed = await client.waitFor("conversation.item.input_audio_transcription.failed", {
      since: 0,
      timeoutMs: 10_000,
    });
    expect(failed).toMatchObject({ item_id: short.item_id, error: { code: "upstream_commit_refused" } });
    const done = await ask(client, { type: "response.create", response: { instructions: "Answer." } }, "response.done");
    expect(done.response).toMatchObject({ status: "completed" });
    expect(model.sessions).toHaveLength(1);
    expect(await upstreamSessions(a, client)).toHaveLength(2);
    await client.close();
    expect(await replays(a, client)).toBe(true);
  });

  it("a drop during the resume's heartbeat: the next try resumes, and the earlier try's replayed ack is no fault", async () => {
    const model = await stub({ dialect: "duplex" });
    const { a, client } = await front(model.url, "duplex", {
      resume: { grace_ms: 5000, initial_delay_ms: 50, max_delay_ms: 200 },
    });
    await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
    const before = model.sessions[0]?.frames.length ?? 0;
    model.cutAfter("session.heartbeat");
    model.drop();
    await expect.poll(async () => (await upstreamSessions(a, client)).length, { timeout: 10_000 }).toBe(2);
    const done = await ask(client, { type: "response.create", response: { instructions: "Answer." } }, "response.done");
    expect(done.response).toMatchObject({ status: "completed" });
    expect(client.types()).not.toContain("error");
    // Two markers reached the model: the one cut, and the one that ended the resume; never a made-up cancel.
    const after = model.sessions[0]?.frames.slice(before) ?? [];
    expect(after.filter((f) => f.type === "session.heartbeat").length).toBeGreaterThanOrEqual(2);
    expect(after.filter((f) => f.type === "response.cancel")).toEqual([]);
    await client.close();
    expect(await replays(a, client)).toBe(true);
  });

  it.each(["reference", "ignores", "refuses"] as const)(
    "a model server whose cancel %s: a resume mid-response succeeds, the response ends completed, no cancel is sent",
    async (cancel) => {
      // The answer comes 300 ms after its response.created: the link drops in between, and the rest of the response
      // reaches us from the model server's journal.
      const model = await stub({ dialect: "duplex", cancel, respondDelayMs: 300 });
      const { a, client } = await front(
        model.url,
        "duplex",
        { resume: { grace_ms: 5000, initial_delay_ms: 50, max_delay_ms: 200 } },
        { extra_body: { auto_response: false } },
      );
      await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
      client.send({ type: "response.create", response: { instructions: "Answer." } });
      await expect.poll(() => model.sessions[0]?.active ?? null).not.toBeNull();
      model.drop();
      const done = await client.waitFor("response.done", { since: 0, timeoutMs: 10_000 });
      expect(done.response).toMatchObject({ status: "completed" });
      expect(await upstreamSessions(a, client)).toHaveLength(2);
      const transcript = await client.waitFor("response.output_audio_transcript.done", { since: 0 });
      expect(transcript.transcript).toBe("I know 0 user texts.");
      // Resumed, not lost: one model session, one response asked, nothing cancelled, its epoch where it was.
      const session = model.sessions[0];
      expect(model.sessions).toHaveLength(1);
      expect(session?.frames.filter((f) => f.type === "response.create")).toHaveLength(1);
      expect(session?.frames.filter((f) => f.type === "response.cancel")).toEqual([]);
      expect(session?.epoch).toBe(0);
      expect(session?.frames.some((f) => f.type === "session.heartbeat")).toBe(true);
      expect(client.types()).not.toContain("error");
      // And the session goes on after the resume: a second answer.
      const again = await ask(
        client,
        { type: "response.create", response: { instructions: "Answer." } },
        "response.done",
      );
      expect(again.response).toMatchObject({ status: "completed" });
      await client.close();
      expect(await replays(a, client)).toBe(true);
    },
  );

  it.each<Dialect>(["duplex", "openai"])(
    "%s: a cancel before the model server's response.created, then a new response.create: the new response says its own answer",
    async (dialect) => {
      const model = await stub({
        dialect,
        // The model answers after 200 ms, and refuses a create while a response is active (as OpenAI's servers do):
        // the second create reaches it while the cancelled first one still runs, and is asked again after it.
        respondDelayMs: 200,
        respond: (_s, request) => [
          { type: "response.output_audio.delta", delta: Buffer.alloc(4800).toString("base64") },
          {
            type: "response.output_audio_transcript.delta",
            delta: `answer to ${String((request.response as { instructions?: string }).instructions)}`,
          },
          { type: "response.done", response: { status: "completed" } },
        ],
      });
      const { a, client } = await front(model.url, dialect, {}, { extra_body: { auto_response: false } });
      client.send({ type: "response.create", response: { instructions: "ONE" } });
      client.send({ type: "response.cancel" });
      client.send({ type: "response.create", response: { instructions: "TWO" } });
      const second = await client.waitFor(
        (e) => e.type === "response.done" && (e.response as { status: string }).status === "completed",
        { since: 0 },
      );
      const id = (second.response as { id: string }).id;
      const transcript = client.received.find(
        (r) => r.event.type === "response.output_audio_transcript.done" && r.event.response_id === id,
      )?.event;
      expect(transcript?.transcript).toBe("answer to TWO");
      const deltas = client.received.filter((r) => r.event.type === "response.output_audio_transcript.delta");
      expect(deltas.map((r) => r.event.delta)).toEqual(["answer to TWO"]);
      await client.close();
      expect(await replays(a, client)).toBe(true);
    },
  );

  it.each([
    [
      "OpenAI's order: the item, deltas, .done, the item's done and response.done.output all carry the call",
      [
        {
          type: "response.output_item.added",
          item: { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather", arguments: "" },
        },
        {
          type: "response.function_call_arguments.delta",
          item_id: "fc_1",
          call_id: "call_1",
          delta: '{"city":"Paris"}',
        },
        {
          type: "response.function_call_arguments.done",
          item_id: "fc_1",
          call_id: "call_1",
          name: "get_weather",
          arguments: '{"city":"Paris"}',
        },
        {
          type: "response.output_item.done",
          item: {
            type: "function_call",
            id: "fc_1",
            call_id: "call_1",
            name: "get_weather",
            arguments: '{"city":"Paris"}',
          },
        },
        {
          type: "response.done",
          response: {
            status: "completed",
            output: [
              {
                type: "function_call",
                id: "fc_1",
                call_id: "call_1",
                name: "get_weather",
                arguments: '{"city":"Paris"}',
              },
            ],
          },
        },
      ],
      [["call_1", "get_weather", '{"city":"Paris"}']],
    ],
    [
      "two calls interleaved, the second done first: both, in the order announced",
      [
        {
          type: "response.output_item.added",
          item: { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather" },
        },
        {
          type: "response.output_item.added",
          item: { type: "function_call", id: "fc_2", call_id: "call_2", name: "get_time" },
        },
        {
          type: "response.function_call_arguments.done",
          item_id: "fc_2",
          call_id: "call_2",
          arguments: '{"zone":"UTC"}',
        },
        {
          type: "response.function_call_arguments.done",
          item_id: "fc_1",
          call_id: "call_1",
          arguments: '{"city":"Paris"}',
        },
        { type: "response.done", response: { status: "completed" } },
      ],
      [
        ["call_1", "get_weather", '{"city":"Paris"}'],
        ["call_2", "get_time", '{"zone":"UTC"}'],
      ],
    ],
    [
      "the arguments done before the item that names the call",
      [
        {
          type: "response.function_call_arguments.done",
          item_id: "fc_1",
          call_id: "call_1",
          arguments: '{"city":"Paris"}',
        },
        {
          type: "response.output_item.added",
          item: { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather" },
        },
        { type: "response.done", response: { status: "completed" } },
      ],
      [["call_1", "get_weather", '{"city":"Paris"}']],
    ],
  ] as const)("tool call parts in any order: %s", async (_name, events, expected) => {
    const model = await stub({ dialect: "duplex", respond: () => events.map((e) => ({ ...e })) });
    const tools = ["get_weather", "get_time"].map((name) => ({
      type: "function",
      name,
      parameters: { type: "object", properties: {} },
    }));
    const { a, client } = await front(model.url, "duplex", {}, { tools });
    const done = await ask(client, { type: "response.create", response: { instructions: "Answer." } }, "response.done");
    const calls = client.received
      .filter((r) => r.event.type === "response.function_call_arguments.done")
      .map((r) => [r.event.call_id, r.event.name, r.event.arguments]);
    expect(calls).toEqual(expected);
    expect(
      (done.response as { output: { type: string }[] }).output.filter((o) => o.type === "function_call"),
    ).toHaveLength(expected.length);
    expect(client.types()).not.toContain("duplex.function_call.done");
    await client.close();
    expect(await replays(a, client)).toBe(true);
  });

  it.each<Dialect>(["duplex", "openai"])(
    "%s: a tool call named only in its response.output_item.added reaches the client whole, and in response.done",
    async (dialect) => {
      const model = await stub({
        dialect,
        respond: () => [
          {
            type: "response.output_item.added",
            item: { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather", arguments: "" },
          },
          { type: "response.function_call_arguments.delta", item_id: "fc_1", call_id: "call_1", delta: '{"city":' },
          { type: "response.function_call_arguments.delta", item_id: "fc_1", call_id: "call_1", delta: '"Paris"}' },
          {
            type: "response.function_call_arguments.done",
            item_id: "fc_1",
            call_id: "call_1",
            arguments: '{"city":"Paris"}',
          },
          { type: "response.done", response: { status: "completed", output: [] } },
        ],
      });
      const tools = [{ type: "function", name: "get_weather", parameters: { type: "object", properties: {} } }];
      const { a, client } = await front(model.url, dialect, {}, { tools });
      await ask(client, userText("weather in Paris?"), "conversation.item.done");
      const done = await ask(
        client,
        { type: "response.create", response: { instructions: "Answer." } },
        "response.done",
      );
      const args = client.received.find((r) => r.event.type === "response.function_call_arguments.done")?.event;
      expect(args).toMatchObject({ call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' });
      expect(done.response).toMatchObject({
        status: "completed",
        output: [{ type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }],
      });
      expect(client.types()).not.toContain("duplex.function_call.done");
      await client.close();
      expect(await replays(a, client)).toBe(true);
    },
  );

  it.each<Dialect>(["duplex", "openai"])(
    "%s: a response the model ends incomplete is passed through, keeps the epoch, and the deferred turn is answered",
    async (dialect) => {
      const model = await stub({
        dialect,
        respond: (s) => [
          { type: "response.output_audio.delta", delta: Buffer.alloc(4800).toString("base64") },
          { type: "response.output_audio_transcript.delta", delta: s.responses === 1 ? "It goes on and" : "Next." },
          {
            type: "response.done",
            response:
              s.responses === 1
                ? { status: "incomplete", status_details: { type: "incomplete", reason: "max_output_tokens" } }
                : { status: "completed" },
          },
        ],
      });
      const { a, client } = await front(model.url, dialect, {}, { extra_body: { auto_response: false } });
      client.send({ type: "response.create", response: { instructions: "Answer." } });
      client.send({ type: "input.text.append", text: "and then?" });
      const committed = await ask(
        client,
        { type: "input_audio_buffer.commit", response_create: true },
        "input_audio_buffer.committed",
      );
      expect(committed.event).toMatchObject({ response_create_deferred: true });
      const first = await client.waitFor((e) => e.type === "response.done", { since: 0 });
      expect(first.response).toMatchObject({
        status: "incomplete",
        status_details: { type: "incomplete", reason: "max_output_tokens" },
      });
      const second = await client.waitFor(
        (e) =>
          e.type === "response.done" && (e.response as { id: string }).id !== (first.response as { id: string }).id,
        { since: 0, timeoutMs: 10_000 },
      );
      expect(second.response).toMatchObject({ status: "completed" });
      expect(client.types()).not.toContain("output_audio_buffer.cleared");
      expect(client.received.filter((r) => r.event.epoch !== undefined).every((r) => r.event.epoch === 0)).toBe(true);
      await client.close();
      expect(await replays(a, client)).toBe(true);
    },
  );

  it("a response the model server cancels for a reason of its own cuts only that response: the deferred turn is answered", async () => {
    const model = await stub({
      dialect: "duplex",
      respond: (s) => [
        { type: "response.output_audio.delta", delta: Buffer.alloc(4800).toString("base64") },
        { type: "response.output_audio_transcript.delta", delta: s.responses === 1 ? "I was" : "Next." },
        {
          type: "response.done",
          response:
            s.responses === 1
              ? { status: "cancelled", status_details: { type: "cancelled", reason: "server_restart" } }
              : { status: "completed" },
        },
      ],
    });
    const { a, client } = await front(model.url, "duplex", {}, { extra_body: { auto_response: false } });
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    client.send({ type: "input.text.append", text: "and then?" });
    const committed = await ask(
      client,
      { type: "input_audio_buffer.commit", response_create: true },
      "input_audio_buffer.committed",
    );
    expect(committed.event).toMatchObject({ response_create_deferred: true });
    const first = await client.waitFor("response.done", { since: 0 });
    expect(first.response).toMatchObject({ status: "cancelled", status_details: { reason: "model_cancelled" } });
    const second = await client.waitFor(
      (e) => e.type === "response.done" && (e.response as { status: string }).status === "completed",
      { since: 0, timeoutMs: 10_000 },
    );
    expect(second.response).toMatchObject({ status: "completed" });
    await client.close();
    expect(await replays(a, client)).toBe(true);
  });

  it.each<Dialect>(["duplex", "openai"])(
    "%s: a commit the model server refuses is reported for its item, and the next transcript lands on its own item",
    async (dialect) => {
      const model = await stub({ dialect, minCommitMs: 200 });
      const { a, client } = await front(
        model.url,
        dialect,
        {},
        { input_audio_format: "pcm16", input_sample_rate_hz: 16000, extra_body: { auto_response: false } },
      );
      client.send({ type: "input_audio_buffer.append", audio: chunk(1) });
      const short = await ask(client, { type: "input_audio_buffer.commit" }, "input_audio_buffer.committed");
      const failed = await client.waitFor("conversation.item.input_audio_transcription.failed", { since: 0 });
      expect(failed).toMatchObject({
        item_id: short.item_id,
        error: {
          type: "server_error",
          code: "upstream_commit_refused",
          message: expect.stringContaining("input_audio_buffer_commit_empty"),
        },
      });
      for (let i = 0; i < 5; i++) client.send({ type: "input_audio_buffer.append", audio: chunk(i) });
      const long = await ask(client, { type: "input_audio_buffer.commit" }, "input_audio_buffer.committed");
      const transcript = await client.waitFor("conversation.item.input_audio_transcription.completed", { since: 0 });
      expect(transcript).toMatchObject({ item_id: long.item_id, transcript: "utterance 1" });
      const onShort = client.received.filter(
        (r) =>
          r.event.type === "conversation.item.input_audio_transcription.completed" && r.event.item_id === short.item_id,
      );
      expect(onShort).toEqual([]);
      await client.close();
      expect(await replays(a, client)).toBe(true);
    },
  );

  it.each<Dialect>(["duplex", "openai"])(
    "%s: after our server is SIGKILLed and restarted, the resumed session's new model session is given the conversation",
    async (dialect) => {
      const model = await stub({ dialect });
      const dataDir = await mkdtemp(join(tmpdir(), "duplex-upstream-restart-"));
      const config = join(dataDir, "upstream.yaml");
      await writeFile(config, `runner:\n  kind: upstream\n  url: ${model.url}\n  dialect: ${dialect}\n`);
      const port = await freePort();
      const children: ChildProcess[] = [];
      cleanups.push(async () => {
        for (const child of children) child.kill("SIGKILL");
        await rm(dataDir, { recursive: true, force: true });
      });
      const serve = async () => {
        const { child } = await startServerProcess(port, dataDir, 30_000, ["--config", config]);
        children.push(child);
        return child;
      };
      const first = await serve();
      const url = `ws://127.0.0.1:${port}/v1/realtime`;
      const client = await RealtimeClient.connect(url);
      client.send({ type: "session.update", session: { extra_body: { auto_response: false } } });
      const created = await client.waitFor("session.created", { since: 0 });
      await client.waitFor("session.updated", { since: 0 });
      /** Asks for a response and waits for its end: what it said. */
      const transcriptOf = async (c: RealtimeClient) => {
        const since = c.received.length;
        await ask(c, { type: "response.create", response: { instructions: "Answer." } }, "response.done");
        return (await c.waitFor("response.output_audio_transcript.done", { since })).transcript;
      };
      await ask(client, userText("my name is Ada"), "conversation.item.done");
      expect(await transcriptOf(client)).toBe("I know 1 user texts.");
      await ask(client, userText("I live in Lisbon"), "conversation.item.done");
      expect(await transcriptOf(client)).toBe("I know 2 user texts.");

      await new Promise<void>((resolve) => {
        first.once("exit", () => resolve());
        first.kill("SIGKILL");
      });
      await client.closed;
      await serve();
      const resumed = await RealtimeClient.connect(`${url}?autostart=0`);
      resumed.send({
        type: "session.resume",
        session_id: String((created.session as { id: string }).id),
        resume_token: String(created.resume_token),
        last_received_server_event_seq: client.lastSeq(),
      });
      await resumed.waitFor("session.resumed", { timeoutMs: 10_000 });
      // A new model session (the upstream token was in the killed process's memory), given both user texts.
      expect(await transcriptOf(resumed)).toBe("I know 2 user texts.");
      expect(model.sessions).toHaveLength(2);
      expect(model.sessions[1]?.items.map((i) => [i.role, i.text])).toEqual([
        ["user", "my name is Ada"],
        ["assistant", "I know 1 user texts."],
        ["user", "I live in Lisbon"],
        ["assistant", "I know 2 user texts."],
      ]);
      resumed.send({ type: "session.close" });
      await resumed.waitFor("session.closed", { since: 0 });
      for (const child of children) child.kill("SIGKILL");
      const store = createSqliteEventStore({ path: join(dataDir, "duplex.sqlite") });
      const entries = await store.read(streamOf(String((created.session as { id: string }).id)));
      await store.close();
      const seeded = entries.filter(
        (e) =>
          e.type === "StageOutputReceived" && (e.data as { output: { kind: string } }).output.kind === "history_seeded",
      );
      expect(seeded).toHaveLength(1);
      expect(replayEntries(entries).ok).toBe(true);
    },
    60_000,
  );

  it("a model server at its own capacity: the new session ends duplex_session_busy (retryable, 1013), the others go on", async () => {
    const model = await stub({ dialect: "duplex", maxSessions: 1 });
    const { a, client } = await front(model.url, "duplex");
    await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
    const second = await RealtimeClient.connect(a.url);
    second.send({ type: "session.update", session: {} });
    const error = await second.waitFor("error", { since: 0, timeoutMs: 10_000 });
    expect(error.error).toMatchObject({
      type: "rate_limit_error",
      code: "duplex_session_busy",
      message: expect.stringContaining("duplex session capacity reached (max_sessions=1)"),
    });
    expect(await second.closed).toMatchObject({ code: 1013 });
    expect(second.received.map((r) => r.event.type)).not.toContain("response.created");
    // The session the model server holds is served as before.
    client.send(userText("Hello"));
    const done = await ask(client, { type: "response.create" }, "response.done");
    expect(done.response).toMatchObject({ status: "completed" });
    expect(await replays(a, second)).toBe(true);
    await client.close();
    expect(await replays(a, client)).toBe(true);
  });

  it("a commit the model server aborts: the item gets commit_aborted, no transcript, and the session goes on", async () => {
    const model = await stub({ dialect: "duplex" });
    const { a, client } = await front(
      model.url,
      "duplex",
      {},
      { input_audio_format: "pcm16", input_sample_rate_hz: 16000, extra_body: { auto_response: false } },
    );
    await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
    model.behave({ commitRefusal: "commit_aborted" });
    for (let n = 0; n < 3; n += 1) client.send({ type: "input_audio_buffer.append", audio: chunk(n) });
    const committed = await ask(client, { type: "input_audio_buffer.commit" }, "input_audio_buffer.committed");
    const failed = await client.waitFor("conversation.item.input_audio_transcription.failed", {
      since: 0,
      timeoutMs: 10_000,
    });
    expect(failed).toMatchObject({
      item_id: committed.item_id,
      error: { type: "server_error", code: "commit_aborted", message: expect.stringContaining("aborted the commit") },
    });
    model.behave({ commitRefusal: null });
    for (let n = 3; n < 6; n += 1) client.send({ type: "input_audio_buffer.append", audio: chunk(n) });
    const next = await ask(
      client,
      { type: "input_audio_buffer.commit" },
      "conversation.item.input_audio_transcription.completed",
    );
    expect(next).toMatchObject({ transcript: "utterance 1" });
    await client.close();
    expect(await replays(a, client)).toBe(true);
  });
  it.each([
    ["duplex", true],
    ["openai", false],
  ] as const)("a force_listen append is forwarded to a %s model server: %s", async (dialect, told) => {
    const model = await stub({ dialect });
    const { a, client } = await front(
      model.url,
      dialect,
      {},
      { input_audio_format: "pcm16", input_sample_rate_hz: 16000, extra_body: { auto_response: false } },
    );
    await expect.poll(async () => (await upstreamSessions(a, client)).length).toBe(1);
    client.send({ type: "input_audio_buffer.append", audio: chunk(0) });
    client.send({ type: "input_audio_buffer.append", audio: chunk(1), force_listen: true });
    await ask(client, { type: "input_audio_buffer.commit" }, "input_audio_buffer.committed");
    const appends = () => (model.sessions[0]?.frames ?? []).filter((f) => f.type === "input_audio_buffer.append");
    await expect.poll(() => appends().length).toBe(2);
    // A duplex server is told on the chunk the client marked, and only there; an OpenAI one has no such field.
    expect(appends().map((f) => f.force_listen)).toEqual(told ? [undefined, true] : [undefined, undefined]);
    await client.close();
    expect(await replays(a, client)).toBe(true);
  });
});
