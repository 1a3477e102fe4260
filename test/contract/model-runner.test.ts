import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  defaultSessionConfig,
  type ResponseId,
  type RunnerUnit,
  type SessionConfig,
  type SessionId,
  type StageOutput,
  stageOutputProblem,
} from "../../src/domain/index.ts";
import type { ModelRunner, RunnerSession } from "../../src/engine/ports/index.ts";
import { createEchoRunner } from "../../src/infra/runners/echo.ts";
import { parseScript } from "../../src/infra/runners/script.ts";
import { createScriptedRunner } from "../../src/infra/runners/scripted.ts";
import { createUpstreamRunner } from "../../src/infra/runners/upstream/index.ts";
import { type ModelServerStub, startModelServerStub } from "../support/model-server-stub.ts";

/**
 * The model-runner contract (issue 34, part 6; DESIGN.md, "Ports": ModelRunner; src/engine/ports/runner.ts): what
 * every `ModelRunner` does as the engine's runner binding calls it (src/engine/runner-binding.ts: open, configure
 * before the first unit and after every session.update, submit, abort, close), run against the echo runner, the
 * scripted runner and the upstream runner in front of test/support's model-server stub (duplex dialect). The rules:
 * - every value emitted is a `StageOutput` (`stageOutputProblem` finds nothing);
 * - a `respond` unit is answered with outputs stamped with its epoch: `speak`, then audio (PCM16, with a transcript),
 *   then `end_of_turn`, and nothing of that response after its `end_of_turn`;
 * - a unit of an epoch older than the session's (after `abort(n)` or a unit of epoch n) is answered by nothing;
 * - `abort(n)` or a unit of a newer epoch ends the older epochs' work: nothing of an older epoch comes after the
 *   first output of the new one, and the new epoch is answered in it; a runner in this process stops at once (nothing
 *   of the older epoch after `abort` returns), the upstream runner asks its model server to cancel (the late events
 *   keep their old epoch, and the decider drops them: src/domain/stage.ts);
 * - `configure` answers nothing by itself, and a session configured again keeps answering;
 * - sessions are apart: a session's outputs go to its own `emit`;
 * - after a session's `close` (or the runner's) resolves, nothing more is emitted, and units submitted then are
 *   taken without a throw and answered by nothing.
 * Waits are for an output to come (bounded by the test's timeout); an absence is checked after a quiet period.
 */

const SESSION_A = "sess_0123456789abcdef0123456789abcdef" as SessionId;
const SESSION_B = "sess_fedcba9876543210fedcba9876543210" as SessionId;

/** How long a test waits to be sure nothing more arrives (ms): not a bound anything is held to. */
const QUIET_MS = 100;
const quiet = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, QUIET_MS));

/** The outputs that belong to a response (the rest are recorded for the log or are about the user's items). */
const RESPONSE_KINDS: ReadonlySet<StageOutput["kind"]> = new Set([
  "speak",
  "listen",
  "audio",
  "text",
  "tool_call",
  "end_of_turn",
  "incomplete",
  "cancelled",
  "failure",
]);

/** One runner under the contract: how to make it, and how to let go of what it needed. */
interface RunnerUnderTest {
  readonly name: string;
  make(): Promise<ModelRunner>;
  teardown(): Promise<void>;
  /**
   * How the runner ends an aborted epoch: `at_once` (a runner in this process: nothing of the older epoch is emitted
   * after `abort` returns), or `upstream` (its model server is asked to cancel, and the late events it sends before
   * it stops keep their old epoch, for the decider to drop): then `cancelsSent` lists the ids of the responses the
   * model server was asked to cancel (`response.cancel`).
   */
  readonly aborts: { readonly kind: "at_once" } | { readonly kind: "upstream"; cancelsSent(): string[] };
}

/** What one session emitted, in order, and a wait for an output to come. */
interface Emitted {
  readonly outputs: StageOutput[];
  readonly emit: (output: StageOutput) => void;
  /** Resolves with the first output (at or after index `from`) that `matches`. */
  until(matches: (output: StageOutput) => boolean, from?: number): Promise<StageOutput>;
}

const emitted = (): Emitted => {
  const outputs: StageOutput[] = [];
  let waiters: { matches: (o: StageOutput) => boolean; from: number; resolve: (o: StageOutput) => void }[] = [];
  return {
    outputs,
    emit(output) {
      outputs.push(output);
      const index = outputs.length - 1;
      const due = waiters.filter((w) => index >= w.from && w.matches(output));
      waiters = waiters.filter((w) => !due.includes(w));
      for (const w of due) w.resolve(output);
    },
    until(matches, from = 0) {
      const found = outputs.slice(from).find(matches);
      if (found !== undefined) return Promise.resolve(found);
      return new Promise((resolve) => waiters.push({ matches, from, resolve }));
    },
  };
};

const respond = (epoch: number, n = 1): RunnerUnit => ({
  kind: "respond",
  epoch,
  responseId: `resp_contract_${n}` as ResponseId,
  instructions: null,
  modalities: ["audio"],
  conversation: "auto",
  input: null,
  metadata: null,
  tools: [],
  toolChoice: "auto",
  temperature: null,
  maxOutputTokens: "inf",
  inReplyTo: null,
});

const isEnd = (epoch: number) => (o: StageOutput) => o.kind === "end_of_turn" && o.epoch === epoch;
/** `speak@1`, `audio@1`, ... for the outputs of a response. */
const shape = (outputs: readonly StageOutput[]): string[] =>
  outputs.filter((o) => RESPONSE_KINDS.has(o.kind)).map((o) => `${o.kind}@${o.epoch}`);

/** Checks one response's outputs: `speak`, at least one audio chunk with text, `end_of_turn`, all of `epoch`. */
const expectSpokenResponse = (outputs: readonly StageOutput[], epoch: number): void => {
  const response = outputs.filter((o) => RESPONSE_KINDS.has(o.kind));
  expect(response.length).toBeGreaterThanOrEqual(3);
  expect(response.every((o) => o.epoch === epoch)).toBe(true);
  expect(response[0]?.kind).toBe("speak");
  expect(response.at(-1)?.kind).toBe("end_of_turn");
  const middle = response.slice(1, -1);
  expect(middle.length).toBeGreaterThan(0);
  expect(middle.every((o) => o.kind === "audio")).toBe(true);
  const audio = middle.flatMap((o) => (o.kind === "audio" ? [o] : []));
  expect(audio.reduce((n, o) => n + o.audio.byteLength, 0)).toBeGreaterThan(0);
  expect(audio.map((o) => o.transcript).join("")).not.toBe("");
};

const describeModelRunnerContract = (subject: RunnerUnderTest): void => {
  describe(`model runner contract: ${subject.name}`, () => {
    let runner: ModelRunner;
    let config: SessionConfig;
    const sessions: Emitted[] = [];

    /** Opens a session and configures it, as the runner binding does before its first unit. */
    const open = (sessionId: SessionId = SESSION_A): { session: RunnerSession; out: Emitted } => {
      const out = emitted();
      sessions.push(out);
      const session = runner.open({ sessionId, config, history: [] }, out.emit);
      session.configure(config, null);
      return { session, out };
    };

    beforeEach(async () => {
      runner = await subject.make();
      config = defaultSessionConfig(runner.name, runner.capabilities);
      sessions.length = 0;
    });

    afterEach(async () => {
      await runner.close();
      await subject.teardown();
      // Every value any session emitted, in any case, is a stage output a decider can take.
      for (const out of sessions) for (const o of out.outputs) expect(stageOutputProblem(o)).toBeNull();
    });

    it("answers a respond unit with speak, audio and end_of_turn, all stamped with the unit's epoch", async () => {
      const { session, out } = open();
      session.submit(respond(2));
      await out.until(isEnd(2));
      await quiet();
      expectSpokenResponse(out.outputs, 2);
      // Nothing of the response after its end.
      expect(out.outputs.filter((o) => RESPONSE_KINDS.has(o.kind)).at(-1)).toMatchObject({ kind: "end_of_turn" });
    });

    it("answers nothing for a unit of an epoch older than the session's, and the next epoch's unit in its epoch", async () => {
      const { session, out } = open();
      session.abort(1);
      session.submit(respond(0, 1));
      await quiet();
      expect(shape(out.outputs)).toEqual([]);
      session.submit(respond(1, 2));
      await out.until(isEnd(1));
      await quiet();
      expect(shape(out.outputs).some((s) => s.endsWith("@0"))).toBe(false);
      expectSpokenResponse(out.outputs, 1);
    });

    it("ends the older epoch's work on abort: nothing of epoch 0 after the first output of epoch 1", async () => {
      const { session, out } = open();
      session.submit(respond(0, 1));
      await out.until((o) => o.kind === "speak" && o.epoch === 0);
      session.abort(1);
      session.submit(respond(1, 2));
      await out.until(isEnd(1));
      await quiet();
      const epochs = shape(out.outputs).map((s) => Number(s.split("@")[1]));
      const firstNew = epochs.indexOf(1);
      expect(firstNew).toBeGreaterThan(0);
      expect(epochs.slice(firstNew)).not.toContain(0);
      expectSpokenResponse(
        out.outputs.filter((o) => o.epoch === 1),
        1,
      );
    });

    if (subject.aborts.kind === "at_once") {
      it("stops the older epoch at once on abort: nothing of epoch 0 after abort returns", async () => {
        const { session, out } = open();
        session.submit(respond(0));
        await out.until((o) => o.kind === "audio" && o.epoch === 0);
        session.abort(1);
        const mark = out.outputs.length;
        await quiet();
        expect(out.outputs.slice(mark).filter((o) => o.epoch === 0)).toEqual([]);
        // The response was cut before its end.
        expect(shape(out.outputs)).not.toContain("end_of_turn@0");
      });
    }

    const aborts = subject.aborts;
    if (aborts.kind === "upstream") {
      it("asks its model server to cancel a response of an aborted epoch", async () => {
        const { session, out } = open();
        session.submit(respond(0));
        session.abort(1);
        // The model server creates the response asked in epoch 0; the runner cancels it there as it hears of it.
        await out.until((o) => o.epoch === 0 && (o.kind === "end_of_turn" || o.kind === "cancelled"));
        // The cancel is on its way to the model server: waited for a while, not forever.
        for (let i = 0; i < 20 && aborts.cancelsSent().length === 0; i++) await quiet();
        expect(aborts.cancelsSent()).toEqual(["resp_stub_1"]);
        // Whatever of it came keeps epoch 0; nothing was stamped with the new epoch.
        expect(shape(out.outputs).filter((s) => s.endsWith("@1"))).toEqual([]);
      });
    }

    it("takes a unit of a newer epoch as an abort of the older one, and answers it in the newer epoch", async () => {
      const { session, out } = open();
      session.submit(respond(0, 1));
      session.submit(respond(3, 2));
      await out.until(isEnd(3));
      await quiet();
      const epochs = shape(out.outputs).map((s) => Number(s.split("@")[1]));
      expect(epochs.slice(epochs.indexOf(3))).not.toContain(0);
      expectSpokenResponse(
        out.outputs.filter((o) => o.epoch === 3),
        3,
      );
    });

    it("answers nothing for configure alone, and keeps answering after a session.update's configure", async () => {
      const { session, out } = open();
      session.configure({ ...config, instructions: "Answer briefly." }, null);
      await quiet();
      expect(shape(out.outputs)).toEqual([]);
      session.submit(respond(0));
      await out.until(isEnd(0));
      await quiet();
      expectSpokenResponse(out.outputs, 0);
    });

    it("sends a session's outputs to its own emit only", async () => {
      const a = open(SESSION_A);
      const b = open(SESSION_B);
      a.session.submit(respond(0));
      await a.out.until(isEnd(0));
      await quiet();
      expectSpokenResponse(a.out.outputs, 0);
      expect(shape(b.out.outputs)).toEqual([]);
      await b.session.close();
    });

    it("emits nothing after its close resolves, and answers nothing submitted after it", async () => {
      const { session, out } = open();
      session.submit(respond(0, 1));
      await out.until((o) => o.kind === "speak");
      await session.close();
      const count = out.outputs.length;
      expect(() => session.submit(respond(0, 2))).not.toThrow();
      expect(() => session.abort(1)).not.toThrow();
      await quiet();
      expect(out.outputs.length).toBe(count);
    });

    it("closes every session it opened when the runner closes", async () => {
      const a = open(SESSION_A);
      const b = open(SESSION_B);
      await runner.close();
      a.session.submit(respond(0));
      b.session.submit(respond(0));
      await quiet();
      expect(shape(a.out.outputs)).toEqual([]);
      expect(shape(b.out.outputs)).toEqual([]);
    });
  });
};

/** One turn on `respond`: a sentence spoken back, as a model would say it. */
const SCRIPT = `
name: contract
when_exhausted: repeat_last
turns:
  - on: respond
    actions:
      - speak: "Hello there, this is the scripted answer to your question."
      - end_turn
`;

describeModelRunnerContract({
  name: "echo",
  // Several chunks a response, each a macrotask after the one before (abort lands mid-response).
  make: async () => createEchoRunner({ chunkPeriodMs: 100, speedFactor: Number.POSITIVE_INFINITY }),
  teardown: async () => {},
  aborts: { kind: "at_once" },
});

describeModelRunnerContract({
  name: "scripted",
  make: async () =>
    createScriptedRunner(parseScript(SCRIPT, "contract.yaml"), { speedFactor: Number.POSITIVE_INFINITY }),
  teardown: async () => {},
  aborts: { kind: "at_once" },
});

let stub: ModelServerStub | null = null;
describeModelRunnerContract({
  name: "upstream (duplex, model-server stub)",
  make: async () => {
    stub = await startModelServerStub({ dialect: "duplex" });
    return createUpstreamRunner({ url: stub.url, dialect: "duplex", connectTimeoutMs: 5000 });
  },
  teardown: async () => {
    await stub?.close();
    stub = null;
  },
  aborts: {
    kind: "upstream",
    cancelsSent: () =>
      (stub?.sessions ?? []).flatMap((s) =>
        s.frames.flatMap((f) => (f.type === "response.cancel" ? [String(f.response_id)] : [])),
      ),
  },
});
