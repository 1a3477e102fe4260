import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import type { SessionConfig, StageOutput } from "../../src/domain/index.ts";
import { type ModelRunner, type RunnerSession, streamOf } from "../../src/engine/index.ts";
import { parseScript } from "../../src/infra/runners/script.ts";
import { createScriptedRunner } from "../../src/infra/runners/scripted.ts";
import { startTestServer } from "../support/server.ts";

/**
 * A runner's fault stays in its session (issue: "A runner's fault stays in its session"): a runner that throws or
 * rejects in any method of its port, or emits something that is not a stage output, fails only the session it
 * serves, with a coded error recorded in the log; the process, the other sessions and new connections go on.
 */
const SCRIPT = parseScript(
  `
name: polite
when_exhausted: repeat_last
turns:
  - on: text
    actions: [{ speak: "Hello there." }, end_turn]
  - on: respond
    actions: [{ speak: "Sure." }, end_turn]
`,
  "polite.yaml",
);

type Operation = "open" | "configure" | "submit" | "abort" | "close" | "emit";

/**
 * Wraps the scripted runner with faults: a session whose instructions are `fault:<operation>:<throw|reject>` fails
 * there, by throwing or by returning a rejected promise (`emit`: it emits an output of an unknown kind).
 */
const faultInjecting = (inner: ModelRunner): ModelRunner => ({
  name: inner.name,
  capabilities: inner.capabilities,
  open(session, emit) {
    const planOf = (config: SessionConfig) => /^fault:(\w+):(throw|reject)$/.exec(config.instructions);
    let plan = planOf(session.config);
    const hits = (operation: Operation) => plan?.[1] === operation;
    const fail = (operation: Operation): Promise<never> => {
      const error = new Error(`injected ${operation} fault`);
      if (plan?.[2] === "reject") return Promise.reject(error);
      throw error;
    };
    if (hits("open")) fail("open");
    const runner: RunnerSession = inner.open(session, emit);
    return {
      submit(unit) {
        if (hits("submit")) return fail("submit");
        if (hits("emit")) return emit({ kind: "mumble", epoch: 0 } as unknown as StageOutput);
        runner.submit(unit);
      },
      abort(epoch) {
        if (hits("abort")) return fail("abort");
        runner.abort(epoch);
      },
      configure(config, refAudio) {
        plan = planOf(config);
        if (hits("configure")) return fail("configure");
        runner.configure(config, refAudio);
      },
      close() {
        if (!hits("close")) return runner.close();
        if (plan?.[2] === "reject") return runner.close().then(() => Promise.reject(new Error("injected close fault")));
        void runner.close();
        throw new Error("injected close fault");
      },
    };
  },
  close: () => inner.close(),
});

describe("a runner's fault stays in its session", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  beforeAll(async () => {
    server = await startTestServer(
      { duplex_session: { max_sessions: 32 } },
      { runner: faultInjecting(createScriptedRunner(SCRIPT)) },
    );
  });
  afterAll(async () => server.stop());

  const open = async (instructions = ""): Promise<{ client: RealtimeClient; id: string }> => {
    const client = await RealtimeClient.connect(server.url);
    client.send({ type: "session.update", session: { instructions } });
    const created = await client.waitFor("session.created", { since: 0 });
    return { client, id: String((created.session as { id: string }).id) };
  };

  /** A healthy session holds a conversation: its text is answered with a completed response. */
  const converse = async (client: RealtimeClient): Promise<void> => {
    const since = client.received.length;
    client.send({ type: "input.text.append", text: "hi" });
    const done = await client.waitFor("response.done", { since, timeoutMs: 10_000 });
    expect(done.response).toMatchObject({ status: "completed" });
  };

  /** What makes the faulty session call `operation` once its instructions are set. */
  const trigger = (client: RealtimeClient, operation: Operation, instructions: string): void => {
    switch (operation) {
      case "open":
        return;
      case "configure":
        client.send({ type: "session.update", session: { instructions } });
        return;
      case "submit":
      case "emit":
        client.send({ type: "input.text.append", text: "hi" });
        return;
      case "abort":
        client.send({ type: "input.cancel" });
        return;
      case "close":
        client.send({ type: "session.close" });
        return;
    }
  };

  it.each([
    ["open", "throw"],
    ["configure", "throw"],
    ["configure", "reject"],
    ["submit", "throw"],
    ["submit", "reject"],
    ["abort", "throw"],
    ["abort", "reject"],
    ["emit", "throw"],
  ] as const)(
    "%s (%s): only that session fails, with runtime_data_plane_stream_failed, and the log records it",
    async (operation, mode) => {
      const healthy = await open();
      const instructions = `fault:${operation}:${mode}`;
      // The runner opens at the session's first update: an open fault is set by it, the others once it runs.
      const victim = await RealtimeClient.connect(server.url);
      victim.send({ type: "session.update", session: { instructions: operation === "open" ? instructions : "" } });
      await victim.waitFor("session.updated", { since: 0 });
      if (operation !== "open" && operation !== "configure") {
        victim.send({ type: "session.update", session: { instructions } });
        await victim.waitFor("session.updated", { since: 2 });
      }
      trigger(victim, operation, instructions);
      const error = await victim.waitFor("error", { since: 0, timeoutMs: 10_000 });
      expect(error.error).toMatchObject({ type: "server_error", code: "runtime_data_plane_stream_failed" });
      expect(String((error.error as { message: string }).message)).toContain(`runner failed in ${operation}`);
      const closed = await victim.waitFor("session.closed", { since: 0, timeoutMs: 10_000 });
      expect(closed.reason).toBe("runner_failed");
      expect((await victim.closed).code).toBe(1011);
      const types = victim.types();
      expect(types.slice(types.indexOf("error"))).toEqual(["error", "session.closed"]);

      // The other session goes on, and a new one opens.
      await converse(healthy.client);
      const fresh = await open();
      await converse(fresh.client);

      const victimId = String(((victim.received[0]?.event.session ?? {}) as { id?: string }).id);
      const log = await server.store.read(streamOf(victimId));
      const fault = log.find((e) => e.type === "RunnerFaulted");
      expect(fault?.data).toEqual({
        operation,
        message:
          operation === "emit" ? 'malformed stage output: unknown output kind "mumble"' : `injected ${operation} fault`,
      });
      expect(log.map((e) => e.type).slice(-2)).toEqual(["RunnerFailed", "SessionClosed"]);
      await Promise.all([healthy.client.close(), fresh.client.close()]);
    },
  );

  it.each(["throw", "reject"] as const)(
    "close (%s): the session closes as asked, the fault is recorded, nothing else is touched",
    async (mode) => {
      const healthy = await open();
      const faulty = await open(`fault:close:${mode}`);
      faulty.client.send({ type: "session.close" });
      const closed = await faulty.client.waitFor("session.closed", { since: 0 });
      expect(closed.reason).toBe("session_close");
      expect((await faulty.client.closed).code).toBe(1000);
      await converse(healthy.client);
      await expect
        .poll(async () => (await server.store.read(streamOf(faulty.id))).map((e) => e.type))
        .toEqual(expect.arrayContaining(["SessionClosed", "RunnerFaulted"]));
      const log = await server.store.read(streamOf(faulty.id));
      expect(log.find((e) => e.type === "RunnerFaulted")?.data).toEqual({
        operation: "close",
        message: "injected close fault",
      });
      await healthy.client.close();
    },
  );
});
