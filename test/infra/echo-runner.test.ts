import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { defaultSessionConfig, type RunnerUnit, type SessionId, type StageOutput } from "../../src/domain/index.ts";
import { createEchoRunner } from "../../src/infra/runners/echo.ts";

/** The echo runner (DESIGN.md, "Ports": ModelRunner), with fake timers. */
const SESSION = "sess_0123456789abcdef0123456789abcdef" as SessionId;

/** An append of `ms` of 16 kHz audio at `startMs` on the input clock, with the VAD marks given. */
const append = (startMs: number, ms: number, marks: { started?: number; stopped?: number } = {}): RunnerUnit => ({
  kind: "append",
  epoch: 0,
  audio: new Uint8Array(ms * 32),
  startMs,
  vad: { speechStartedAtMs: marks.started ?? null, speechStoppedAtMs: marks.stopped ?? null, speechActive: false },
});

describe("echo runner", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("answers every utterance it hears while quiet, and of those heard while it speaks only the latest", async () => {
    const runner = createEchoRunner({ chunkPeriodMs: 200, speedFactor: 1 });
    const out: StageOutput[] = [];
    const session = runner.open(
      { sessionId: SESSION, config: defaultSessionConfig("echo", runner.capabilities) },
      (o) => out.push(o),
    );
    // One utterance: 0..1000 ms, then the runner speaks it back for about a second.
    session.submit(append(0, 1000, { started: 0 }));
    session.submit(append(1000, 100, { stopped: 1100 }));
    // Five more utterances while it speaks (each 100 ms): they coalesce into one answer, the last.
    for (let i = 0; i < 5; i += 1) {
      const at = 1100 + i * 200;
      session.submit(append(at, 100, { started: at }));
      session.submit(append(at + 100, 100, { stopped: at + 200 }));
    }
    await vi.runAllTimersAsync();
    const turns = out.filter((o) => o.kind === "end_of_turn").length;
    expect(turns).toBe(2);
    const transcripts = out
      .filter((o): o is Extract<StageOutput, { kind: "audio" }> => o.kind === "audio")
      .map((o) => o.transcript)
      .join("");
    expect(transcripts).toContain("I heard 1.1 seconds");
    expect(transcripts).toContain("I heard 0.2 seconds");
    await runner.close();
  });

  it("in the turn lane answers a commit with every utterance since the last one, and a silent commit with none", async () => {
    const runner = createEchoRunner({ chunkPeriodMs: 200, speedFactor: Number.POSITIVE_INFINITY });
    const out: StageOutput[] = [];
    const config = { ...defaultSessionConfig("echo", runner.capabilities), nativeDuplex: false };
    const session = runner.open({ sessionId: SESSION, config }, (o) => out.push(o));
    const said = async (): Promise<string> => {
      await vi.runAllTimersAsync();
      const text = out
        .filter((o): o is Extract<StageOutput, { kind: "audio" }> => o.kind === "audio")
        .map((o) => o.transcript)
        .join("");
      out.length = 0;
      return text;
    };
    const respond: RunnerUnit = {
      kind: "respond",
      epoch: 0,
      responseId: "resp_1" as never,
      instructions: null,
      modalities: ["audio", "text"],
      conversation: "auto",
      input: null,
      metadata: null,
      tools: [],
      toolChoice: "auto",
      temperature: null,
      maxOutputTokens: "inf",
    };
    // Two utterances, 0..1000 and 1000..2000 ms: the second starts in the append that ends the first.
    session.submit(append(0, 600, { started: 0 }));
    session.submit(append(600, 400, {}));
    session.submit(append(1000, 500, { stopped: 1000, started: 1000 }));
    session.submit(append(1500, 500, { stopped: 2000 }));
    session.submit({ kind: "commit", epoch: 0, itemId: "item_1" as never });
    session.submit({ ...respond, inReplyTo: "item_1" as never });
    expect(await said()).toContain("I heard 2.0 seconds");
    // Two seconds of silence, committed: nothing was said, and the turn before is not answered again.
    session.submit(append(2000, 2000, {}));
    session.submit({ kind: "commit", epoch: 0, itemId: "item_2" as never });
    session.submit({ ...respond, responseId: "resp_2" as never, inReplyTo: "item_2" as never });
    expect(await said()).toContain("I heard 0.0 seconds");
    await runner.close();
  });
});
