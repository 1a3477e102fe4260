import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  defaultSessionConfig,
  type ItemId,
  type ResponseId,
  type RunnerUnit,
  SERVER_VAD_DEFAULTS,
  type SessionConfig,
  type SessionId,
  type StageOutput,
} from "../../src/domain/index.ts";
import { pcm16FromBytes, rms } from "../../src/infra/audio/index.ts";
import { loadScript, parseScript, type Script, ScriptError } from "../../src/infra/runners/script.ts";
import { createScriptedRunner, type ScriptedRunnerOptions } from "../../src/infra/runners/scripted.ts";

const SESSION_ID = "sess_0123456789abcdef0123456789abcdef" as SessionId;
const deployScript = (name: string) => new URL(`../../deploy/scripts/${name}`, import.meta.url).pathname;

/** Opens a session of a runner built from `yaml`; `out` collects everything it emits. */
function setup(yaml: string, options: ScriptedRunnerOptions = {}, patch: Partial<SessionConfig> = {}) {
  const runner = createScriptedRunner(parseScript(yaml, "test.yaml"), options);
  const config: SessionConfig = { ...defaultSessionConfig("scripted", runner.capabilities), ...patch };
  const out: StageOutput[] = [];
  const session = runner.open({ sessionId: SESSION_ID, config }, (output) => out.push(output));
  return { runner, session, out, config };
}

/** A `respond` unit of the session's conversation with the session's options. */
const respondUnit = (epoch: number, modalities: readonly ("audio" | "text")[]): RunnerUnit => ({
  kind: "respond",
  epoch,
  responseId: "resp_01234567_1" as ResponseId,
  instructions: null,
  modalities,
  conversation: "auto",
  input: null,
  metadata: null,
  tools: [],
  toolChoice: "auto",
  temperature: null,
  maxOutputTokens: "inf",
});
const respond = (epoch: number): RunnerUnit => respondUnit(epoch, ["audio"]);
const append = (epoch: number, speechStoppedAtMs: number | null): RunnerUnit => ({
  kind: "append",
  epoch,
  audio: new Uint8Array(320),
  startMs: 0,
  vad: { speechStartedAtMs: null, speechStoppedAtMs, speechActive: false },
});

/** Kinds of outputs, with the epoch: `speak@1`. */
const kinds = (out: readonly StageOutput[]) => out.map((o) => `${o.kind}@${o.epoch}`);
const audioOf = (out: readonly StageOutput[]) => out.flatMap((o) => (o.kind === "audio" ? [o] : []));
const concatAudio = (out: readonly StageOutput[]): Int16Array => {
  const chunks = audioOf(out).map((o) => pcm16FromBytes(o.audio));
  const all = new Int16Array(chunks.reduce((n, c) => n + c.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    all.set(chunk, offset);
    offset += chunk.length;
  }
  return all;
};

const SENTENCE = "Hello there, this is a scripted model speaking."; // 47 characters

describe("scripted runner", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("is named after its script and declares echo-like capabilities unless the script overrides them", () => {
    const plain = createScriptedRunner(parseScript("name: plain\nturns: []\n"));
    expect(plain.name).toBe("scripted:plain");
    expect(plain.capabilities).toEqual({
      implementationLevel: "model_native_duplex",
      chunkPeriodMs: 200,
      supportsBargeIn: true,
      supportsSessionResume: true,
      supportsAudioTruncate: true,
      supportsToolCalls: false,
      supportsVideo: false,
      inputSampleRateHz: 16000,
      outputSampleRateHz: 24000,
    });
    const custom = createScriptedRunner(
      parseScript(
        "name: custom\ncapabilities: { chunk_period_ms: 80, supports_barge_in: false, supports_tool_calls: true }\nturns: []\n",
      ),
    );
    expect(custom.capabilities.chunkPeriodMs).toBe(80);
    expect(custom.capabilities.supportsBargeIn).toBe(false);
    expect(custom.capabilities.supportsToolCalls).toBe(true);
    expect(custom.capabilities.supportsSessionResume).toBe(true);
  });

  it("speaks text as speak, then chunk_period_ms audio chunks carrying the transcript, with the unit's epoch", () => {
    const { session, out } = setup(
      `name: t\nturns:\n  - on: respond\n    actions:\n      - speak: "${SENTENCE}"\n      - end_turn\n`,
    );
    session.submit(respond(3));
    expect(out).toEqual([]); // nothing in the submitting tick
    vi.runAllTimers();
    // 47 characters x 60 ms = 2820 ms = 67680 samples at 24 kHz; 200 ms chunks of 4800 samples -> 15 chunks.
    const audio = audioOf(out);
    expect(kinds(out)).toEqual(["speak@3", ...Array.from({ length: 15 }, () => "audio@3"), "end_of_turn@3"]);
    const sizes = audio.map((o) => o.audio.length / 2);
    expect(sizes.slice(0, 14)).toEqual(Array.from({ length: 14 }, () => 4800));
    expect(sizes[14]).toBe(67680 - 14 * 4800);
    expect(concatAudio(out).length).toBe(SENTENCE.length * 60 * 24);
    expect(audio.map((o) => o.transcript).join("")).toBe(SENTENCE);
    // Each chunk carries its share: 200 ms of audio is 3.33 characters.
    for (const chunk of audio.slice(0, 14)) expect([3, 4]).toContain(chunk.transcript.length);
  });

  it("makes audio that is not silent, varies like speech, and is the same bytes every time", () => {
    const yaml = `name: t\nturns:\n  - on: respond\n    actions:\n      - speak: "${SENTENCE}"\n`;
    const first = setup(yaml);
    const second = setup(yaml);
    first.session.submit(respond(0));
    second.session.submit(respond(0));
    vi.runAllTimers();
    const a = concatAudio(first.out);
    const b = concatAudio(second.out);
    expect(rms(a)).toBeGreaterThan(0.05);
    expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
    const levels = audioOf(first.out).map((o) => rms(pcm16FromBytes(o.audio)));
    expect(Math.min(...levels)).toBeGreaterThan(0.01);
    expect(Math.max(...levels) - Math.min(...levels)).toBeGreaterThan(0.01);
  });

  it("emits text deltas word by word, tool calls, input transcripts, listen, failure and end of turn in order", () => {
    const { session, out } = setup(`
name: kinds
turns:
  - on: respond
    actions:
      - input_transcript: "what is the weather"
      - text: "It is sunny today."
      - tool_call: { name: get_weather, call_id: call_1, arguments: { city: Paris } }
      - tool_call: { name: raw, call_id: call_2, arguments: '{"a":1' }
      - tool_call: { malformed: true, arguments: "{oops" }
      - listen: user_turn
      - fail: "model crashed"
      - end_turn
`);
    session.submit(respond(2));
    vi.runAllTimers();
    expect(out).toEqual([
      { kind: "input_transcript", epoch: 2, transcript: "what is the weather" },
      { kind: "text", epoch: 2, text: "It " },
      { kind: "text", epoch: 2, text: "is " },
      { kind: "text", epoch: 2, text: "sunny " },
      { kind: "text", epoch: 2, text: "today." },
      { kind: "tool_call", epoch: 2, callId: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
      { kind: "tool_call", epoch: 2, callId: "call_2", name: "raw", arguments: '{"a":1' },
      { kind: "tool_call", epoch: 2, callId: null, name: null, arguments: "{oops" },
      { kind: "listen", epoch: 2, reason: "user_turn" },
      { kind: "failure", epoch: 2, message: "model crashed" },
      { kind: "end_of_turn", epoch: 2 },
    ]);
  });

  it("holds the next action for wait_ms and paces chunks at chunk_period_ms / speed_factor", () => {
    const { session, out } = setup(
      `name: t\nspeed_factor: 2\nturns:\n  - on: respond\n    actions:\n      - wait_ms: 300\n      - speak: "abcdefghij"\n      - end_turn\n`,
    );
    session.submit(respond(0));
    vi.advanceTimersByTime(299);
    expect(out).toEqual([]);
    vi.advanceTimersByTime(2); // the wait is over: speak and the first chunk, together
    expect(kinds(out)).toEqual(["speak@0", "audio@0"]);
    vi.advanceTimersByTime(99);
    expect(out).toHaveLength(2);
    vi.advanceTimersByTime(1); // 200 ms / 2 later
    expect(kinds(out)).toEqual(["speak@0", "audio@0", "audio@0"]);
    vi.runAllTimers();
    // 10 characters = 600 ms = 3 chunks.
    expect(kinds(out)).toEqual(["speak@0", "audio@0", "audio@0", "audio@0", "end_of_turn@0"]);
  });

  it("stops everything of older epochs at once on abort, and plays the next epoch's turns", () => {
    const { session, out } = setup(
      `name: t\nspeed_factor: 1\nturns:\n  - on: respond\n    actions:\n      - speak: "${SENTENCE}"\n      - end_turn\n  - on: respond\n    actions:\n      - text: "after"\n      - end_turn\n`,
    );
    session.submit(respond(1));
    vi.advanceTimersByTime(450); // speak, chunk 0 at 0 ms, 1 at 200 ms, 2 at 400 ms
    expect(kinds(out)).toEqual(["speak@1", "audio@1", "audio@1", "audio@1"]);
    session.abort(2);
    expect(vi.getTimerCount()).toBe(0);
    vi.runAllTimers();
    expect(out).toHaveLength(4);
    session.submit(respond(1)); // a unit of the old epoch is ignored
    session.submit(respond(2));
    vi.runAllTimers();
    expect(kinds(out).slice(4)).toEqual(["text@2", "end_of_turn@2"]);
    expect(out.slice(4).some((o) => o.epoch === 1)).toBe(false);
  });

  it("drops an older epoch's turn when a unit of a newer epoch arrives", () => {
    const { session, out } = setup(
      `name: t\nspeed_factor: 1\nwhen_exhausted: repeat_last\nturns:\n  - on: respond\n    actions:\n      - speak: "${SENTENCE}"\n      - end_turn\n`,
    );
    session.submit(respond(0));
    vi.advanceTimersByTime(250);
    session.submit(respond(1));
    vi.runAllTimers();
    const firstNew = out.findIndex((o) => o.epoch === 1);
    expect(kinds(out).slice(0, firstNew)).toEqual(["speak@0", "audio@0", "audio@0"]);
    expect(out.slice(firstNew).every((o) => o.epoch === 1)).toBe(true);
    expect(kinds(out).at(-1)).toBe("end_of_turn@1");
  });

  it("queues a turn triggered while one plays, and drops the queue on abort", () => {
    const yaml = `name: t\nspeed_factor: 1\nturns:\n  - on: respond\n    actions:\n      - speak: "one two"\n      - end_turn\n  - on: commit\n    actions:\n      - text: "second"\n      - end_turn\n  - on: respond\n    actions:\n      - text: "third"\n      - end_turn\n`;
    const played = setup(yaml);
    played.session.submit(respond(0));
    played.session.submit({ kind: "commit", epoch: 0 });
    played.session.submit(respond(0));
    vi.runAllTimers();
    expect(kinds(played.out)).toEqual([
      "speak@0",
      "audio@0",
      "audio@0",
      "audio@0",
      "end_of_turn@0",
      "text@0",
      "end_of_turn@0",
      "text@0",
      "end_of_turn@0",
    ]);
    expect(played.out.filter((o) => o.kind === "text").map((o) => (o.kind === "text" ? o.text : ""))).toEqual([
      "second",
      "third",
    ]);

    const aborted = setup(yaml);
    aborted.session.submit(respond(0));
    aborted.session.submit({ kind: "commit", epoch: 0 });
    vi.advanceTimersByTime(1);
    aborted.session.abort(1);
    vi.runAllTimers();
    expect(kinds(aborted.out)).toEqual(["speak@0", "audio@0"]);
  });

  it("fires speech_stopped only in the model-native lane, and open only on the first configure", () => {
    const yaml = `name: t\nturns:\n  - on: speech_stopped\n    actions:\n      - text: "heard"\n  - on: open\n    actions:\n      - text: "hi"\n  - on: text\n    actions:\n      - text: "read"\n`;
    const native = setup(yaml);
    native.session.submit(append(0, null));
    native.session.submit({ kind: "clear", epoch: 0 });
    vi.runAllTimers();
    expect(native.out).toEqual([]);
    native.session.submit(append(0, 1200));
    vi.runAllTimers();
    expect(native.out).toEqual([{ kind: "text", epoch: 0, text: "heard" }]);
    native.session.configure(native.config, null);
    native.session.configure(native.config, null);
    native.session.submit({ kind: "text", epoch: 0, text: "hello" });
    vi.runAllTimers();
    expect(native.out.slice(1)).toEqual([
      { kind: "text", epoch: 0, text: "hi" },
      { kind: "text", epoch: 0, text: "read" },
    ]);

    const serverVad = setup(yaml, {}, { turnDetection: SERVER_VAD_DEFAULTS });
    serverVad.session.submit(append(0, 1200));
    const turnLane = setup(yaml, {}, { autoResponse: false });
    turnLane.session.submit(append(0, 1200));
    vi.runAllTimers();
    expect(serverVad.out).toEqual([]);
    expect(turnLane.out).toEqual([]);
  });

  it("plays a turn with match whenever a unit fits it, without moving the trigger's cursor", () => {
    const { session, out } = setup(`
name: match
turns:
  - on: respond
    actions: [{ text: "first" }]
  - on: respond
    match: { modalities: [text] }
    actions: [{ text: "in text" }]
  - on: respond
    actions: [{ text: "second" }]
  - on: text
    match: { text: "Weather" }
    actions: [{ text: "tool" }]
  - on: text
    match: { text: "listen" }
    actions: [{ listen: model_listen }]
`);
    const respondWith = (modalities: ("audio" | "text")[]): RunnerUnit => respondUnit(0, modalities);
    session.submit(respondWith(["text"]));
    session.submit(respondWith(["audio", "text"]));
    session.submit(respondWith(["text"]));
    session.submit(respondWith(["text", "audio"]));
    session.submit({ kind: "text", epoch: 0, text: "what is the WEATHER like?" });
    session.submit({ kind: "text", epoch: 0, text: "nothing fits this one" });
    session.submit({ kind: "text", epoch: 0, text: "please just listen" });
    session.submit(respondWith(["audio"]));
    vi.runAllTimers();
    expect(out.map((o) => (o.kind === "text" ? o.text : o.kind))).toEqual([
      "in ",
      "text",
      "first",
      "in ",
      "text",
      "second",
      "tool",
      "listen",
    ]);
  });

  it("in the turn lane answers text only when asked: a respond turn matching the text, then one matching a tool's output", () => {
    const { session, out } = setup(
      `
name: turn
turns:
  - on: text
    match: { text: "weather" }
    actions: [{ text: "said by itself" }]
  - on: respond
    match: { tool_output: true }
    actions: [{ text: "output: {{function_call_output}}" }]
  - on: respond
    match: { text: "weather" }
    actions: [{ text: "tool" }]
  - on: respond
    actions: [{ text: "plain" }]
`,
      {},
      { autoResponse: false },
    );
    session.submit({ kind: "text", epoch: 0, text: "what is the weather?" });
    vi.runAllTimers();
    expect(out).toEqual([]);
    session.submit(respondUnit(0, ["text"]));
    session.submit(respondUnit(0, ["text"]));
    session.submit({ kind: "function_call_output", epoch: 0, itemId: "item_o" as ItemId, callId: "c", output: "24" });
    session.submit(respondUnit(0, ["text"]));
    vi.runAllTimers();
    expect(out.map((o) => (o.kind === "text" ? o.text : o.kind))).toEqual(["tool", "plain", "output: ", "24"]);
  });

  it("makes speech of duration_ms when a speak gives one, with the transcript spread over its chunks", () => {
    const { session, out } = setup(
      `name: t\nturns:\n  - on: respond\n    actions:\n      - speak: { text: "hello", duration_ms: 1000 }\n      - end_turn\n`,
    );
    session.submit(respond(0));
    vi.runAllTimers();
    const audio = audioOf(out);
    expect(concatAudio(out).length).toBe(24000);
    expect(audio.map((o) => o.audio.length / 2)).toEqual([4800, 4800, 4800, 4800, 4800]);
    expect(audio.map((o) => o.transcript)).toEqual(["h", "e", "l", "l", "o"]);
  });

  it("ignores, repeats the last turn or cycles when a trigger has no turn left", () => {
    const texts = (whenExhausted: string): string[] => {
      const { session, out } = setup(
        `name: t\nwhen_exhausted: ${whenExhausted}\nturns:\n  - on: respond\n    actions: [{ text: a }]\n  - on: commit\n    actions: [{ text: c }]\n  - on: respond\n    actions: [{ text: b }]\n`,
      );
      for (let i = 0; i < 5; i++) session.submit(respond(0));
      vi.runAllTimers();
      return out.map((o) => (o.kind === "text" ? o.text : o.kind));
    };
    expect(texts("ignore")).toEqual(["a", "b"]);
    expect(texts("repeat_last")).toEqual(["a", "b", "b", "b", "b"]);
    expect(texts("cycle")).toEqual(["a", "b", "a", "b", "a"]);
  });

  it("stops at once when the emit callback itself aborts the epoch", () => {
    const runner = createScriptedRunner(
      parseScript(`name: t\nturns:\n  - on: respond\n    actions:\n      - speak: "${SENTENCE}"\n      - end_turn\n`),
    );
    const out: StageOutput[] = [];
    const session = runner.open(
      { sessionId: SESSION_ID, config: defaultSessionConfig("scripted", runner.capabilities) },
      (output) => {
        out.push(output);
        if (output.kind === "speak") session.abort(output.epoch + 1);
      },
    );
    session.submit(respond(0));
    vi.runAllTimers();
    expect(kinds(out)).toEqual(["speak@0"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("stops emitting when closed", async () => {
    const { runner, session, out } = setup(
      `name: t\nspeed_factor: 1\nturns:\n  - on: respond\n    actions:\n      - speak: "${SENTENCE}"\n`,
    );
    session.submit(respond(0));
    vi.advanceTimersByTime(50);
    await runner.close();
    vi.runAllTimers();
    expect(kinds(out)).toEqual(["speak@0", "audio@0"]);
    session.submit(respond(0));
    vi.runAllTimers();
    expect(out).toHaveLength(2);
  });
});

describe("scripted runner with real timers", () => {
  it("stops a back-to-back turn on abort: nothing of the old epoch afterwards", async () => {
    const { session, out } = setup(`name: t\nturns:\n  - on: respond\n    actions:\n      - speak: "${SENTENCE}"\n`);
    session.submit(respond(0));
    await new Promise((resolve) => setTimeout(resolve, 0));
    session.abort(1);
    const atAbort = out.length;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(out).toHaveLength(atAbort);
    expect(atAbort).toBeLessThan(16);
  });
});

describe("script files", () => {
  const invalid = (yaml: string): ScriptError => {
    try {
      parseScript(yaml, "bad.yaml");
    } catch (error) {
      expect(error).toBeInstanceOf(ScriptError);
      expect((error as ScriptError).code).toBe("script_invalid");
      return error as ScriptError;
    }
    throw new Error("the script was accepted");
  };

  it("reads a script into its own spelling, with defaults", () => {
    const script: Script = parseScript(
      "name: s\nturns:\n  - on: open\n    actions:\n      - end_turn\n      - end_turn:\n      - wait_ms: 5\n",
    );
    expect(script).toEqual({
      name: "s",
      description: null,
      capabilities: {},
      speedFactor: Number.POSITIVE_INFINITY,
      whenExhausted: "ignore",
      turns: [{ on: "open", actions: [{ kind: "end_turn" }, { kind: "end_turn" }, { kind: "wait", ms: 5 }] }],
    });
    expect(parseScript("name: s\nspeed_factor: .inf\nturns: []\n").speedFactor).toBe(Number.POSITIVE_INFINITY);
    expect(parseScript("name: s\nspeed_factor: 3\nturns: []\n").speedFactor).toBe(3);
  });

  it("rejects a script with a message naming the bad key", () => {
    expect(invalid("name: s\nturns:\n  - on: respond\n    actions:\n      - speek: hi\n").message).toContain(
      "turns[0].actions[0].speek: unknown key",
    );
    expect(invalid("name: s\nturns:\n  - on: respond\n    actions:\n      - end_trun\n").message).toContain(
      "turns[0].actions[0].end_trun: unknown key",
    );
    expect(invalid("name: s\nturns:\n  - on: hello\n    actions: [end_turn]\n").message).toContain("turns[0].on:");
    expect(invalid("name: s\nloop: true\nturns: []\n").message).toContain("loop: unknown key");
    expect(invalid("name: s\ncapabilities: { chunk_ms: 1 }\nturns: []\n").message).toContain(
      "capabilities.chunk_ms: unknown key",
    );
    expect(
      invalid("name: s\nturns:\n  - on: respond\n    actions:\n      - tool_call: { name: f }\n").message,
    ).toContain("turns[0].actions[0].tool_call.call_id:");
    expect(
      invalid("name: s\nturns:\n  - on: respond\n    actions:\n      - { speak: hi, end_turn: true }\n").message,
    ).toContain("turns[0].actions[0]: an action has exactly one key");
    expect(invalid("name: s\nspeed_factor: 0\nturns: []\n").message).toContain("speed_factor:");
    expect(
      invalid("name: s\nturns:\n  - on: open\n    match: { text: hi }\n    actions: [end_turn]\n").message,
    ).toContain("turns[0].match.text: only a text, respond or commit turn can match text, not open");
    expect(invalid("name: s\nturns:\n  - on: respond\n    actions:\n      - incomplete: too_long\n").message).toContain(
      "turns[0].actions[0].incomplete:",
    );
    expect(
      invalid("name: s\nturns:\n  - on: text\n    match: { tool_output: true }\n    actions: [end_turn]\n").message,
    ).toContain("turns[0].match.tool_output: only a respond turn can match tool_output, not text");
    expect(
      invalid("name: s\nturns:\n  - on: text\n    match: { modalities: [text] }\n    actions: [end_turn]\n").message,
    ).toContain("turns[0].match.modalities: only a respond turn can match modalities, not text");
    expect(invalid("name: s\nturns:\n  - on: text\n    match: {}\n    actions: [end_turn]\n").message).toContain(
      "turns[0].match: needs modalities, text or tool_output",
    );
    expect(
      invalid("name: s\nturns:\n  - on: text\n    match: { txt: a }\n    actions: [end_turn]\n").message,
    ).toContain("turns[0].match.txt: unknown key");
    expect(
      invalid("name: s\nturns:\n  - on: respond\n    actions:\n      - speak: { text: hi, duration_ms: 0 }\n").message,
    ).toContain("turns[0].actions[0].speak");

    expect(invalid("turns: []\n").message).toContain("name:");
    expect(invalid("name: s\nturns: [\n").message).toContain("bad.yaml is not valid YAML");
  });

  it("rejects a file that cannot be read", async () => {
    await expect(loadScript("/nonexistent/script.yaml")).rejects.toMatchObject({ code: "script_invalid" });
  });

  it("loads the example scripts of deploy/scripts", async () => {
    const greeting = await loadScript(deployScript("greeting.yaml"));
    expect(greeting.name).toBe("greeting");
    expect(greeting.turns.map((t) => t.on)).toEqual(["speech_stopped", "respond"]);
    const tools = await loadScript(deployScript("tools.yaml"));
    expect(tools.capabilities.supportsToolCalls).toBe(true);
    expect(tools.turns.map((t) => t.actions.map((a) => a.kind))).toEqual([
      ["tool_call", "end_turn"],
      ["speak", "end_turn"],
    ]);
    const failure = await loadScript(deployScript("failure.yaml"));
    expect(failure.turns[0]?.actions.map((a) => a.kind)).toEqual(["speak", "fail"]);
  });

  it("plays the tools example: a tool call first, then an answer spoken from the tool's output", async () => {
    const runner = createScriptedRunner(await loadScript(deployScript("tools.yaml")));
    const out: StageOutput[] = [];
    const session = runner.open(
      { sessionId: SESSION_ID, config: defaultSessionConfig("scripted", runner.capabilities) },
      (output) => out.push(output),
    );
    session.submit(respond(0));
    await vi.waitFor(() => expect(out).toHaveLength(2));
    expect(out).toEqual([
      {
        kind: "tool_call",
        epoch: 0,
        callId: "call_weather_1",
        name: "get_weather",
        arguments: '{"city":"Paris","unit":"celsius"}',
      },
      { kind: "end_of_turn", epoch: 0 },
    ]);
    session.submit({
      kind: "function_call_output",
      epoch: 0,
      itemId: "item_01234567_u1" as ItemId,
      callId: "call_weather_1",
      output: '{"temperature_c":24,"sky":"clear"}',
    });
    session.submit(respond(0));
    await vi.waitFor(() => expect(kinds(out.slice(2)).at(-1)).toBe("end_of_turn@0"));
    expect(kinds(out.slice(2))[0]).toBe("speak@0");
    expect(kinds(out).at(-1)).toBe("end_of_turn@0");
    expect(
      audioOf(out)
        .map((o) => o.transcript)
        .join(""),
    ).toBe('The weather service says: {"temperature_c":24,"sky":"clear"}');
    await runner.close();
  });

  it("answers from whichever output the client sent: another output, another answer", async () => {
    const runner = createScriptedRunner(await loadScript(deployScript("tools.yaml")));
    const out: StageOutput[] = [];
    const session = runner.open(
      { sessionId: SESSION_ID, config: defaultSessionConfig("scripted", runner.capabilities) },
      (output) => out.push(output),
    );
    session.submit(respond(0));
    await vi.waitFor(() => expect(out).toHaveLength(2));
    session.submit({
      kind: "function_call_output",
      epoch: 0,
      itemId: "item_01234567_u1" as ItemId,
      callId: "call_weather_1",
      output: "snow, -3 degrees",
    });
    session.submit(respond(0));
    await vi.waitFor(() => expect(kinds(out.slice(2)).at(-1)).toBe("end_of_turn@0"));
    expect(
      audioOf(out)
        .map((o) => o.transcript)
        .join(""),
    ).toBe("The weather service says: snow, -3 degrees");
    await runner.close();
  });
});
