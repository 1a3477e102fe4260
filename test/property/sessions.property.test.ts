import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient, type ServerEvent } from "../../src/client/index.ts";
import { foldLog, streamOf } from "../../src/engine/index.ts";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { type ModelServerStub, startModelServerStub } from "../support/model-server-stub.ts";
import { redriveThroughOwnRecording } from "../support/recorded-redrive.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * Property tests that replay recorded sessions (DESIGN.md, "Known hard parts"; issue: "Property tests that replay
 * recorded sessions against a runner"): fast-check generates client command sequences (real speech slices,
 * commits, responses, cancels, barge-ins, acks, updates, socket drops and resumes), runs each against a live server
 * with the echo, the scripted and an upstream-chain runner, and then checks that the session replays offline byte
 * for byte and that the contract's invariants hold on what the client received.
 *
 * `DUPLEX_PROPERTY_RUNS` sets the runs per runner (CI: 4; `npm run test:property` runs 25).
 */
const RUNS = Number(process.env.DUPLEX_PROPERTY_RUNS ?? 4);
const FILES = ["question_16k.wav", "jfk_16k.wav", "interrupt_16k.wav"] as const;

type Step =
  | { readonly kind: "speech"; readonly file: number; readonly fromMs: number; readonly ms: number }
  | { readonly kind: "silence"; readonly ms: number }
  | { readonly kind: "commit"; readonly respond: boolean }
  | { readonly kind: "create"; readonly text: boolean }
  | { readonly kind: "cancel" }
  | { readonly kind: "barge_in" }
  | { readonly kind: "ack" }
  | { readonly kind: "server_vad"; readonly on: boolean; readonly interrupt: boolean }
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "drop_and_resume" }
  | { readonly kind: "wait"; readonly ms: number }
  /** Faults of the model server behind an upstream runner (the stub's): a drop and a short outage, then back. */
  | { readonly kind: "model_outage"; readonly ms: number }
  | { readonly kind: "model_incomplete"; readonly on: boolean }
  | { readonly kind: "model_refuses_commits"; readonly on: boolean };

// Weighted towards what makes turns overlap (speech, commits, responses), so deferred commits and cancels are common.
const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("speech" as const),
      file: fc.integer({ min: 0, max: FILES.length - 1 }),
      fromMs: fc.integer({ min: 0, max: 4000 }),
      ms: fc.integer({ min: 300, max: 2500 }),
    }),
  },
  fc.record({ kind: fc.constant("silence" as const), ms: fc.integer({ min: 100, max: 1200 }) }),
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("commit" as const), respond: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("create" as const), text: fc.boolean() }) },
  fc.constant({ kind: "cancel" as const }),
  fc.constant({ kind: "barge_in" as const }),
  fc.constant({ kind: "ack" as const }),
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("server_vad" as const), on: fc.boolean(), interrupt: fc.boolean() }),
  },
  fc.record({ kind: fc.constant("text" as const), text: fc.constantFrom("hello", "tell me more", "thanks") }),
  fc.constant({ kind: "drop_and_resume" as const }),
  fc.record({ kind: fc.constant("wait" as const), ms: fc.integer({ min: 20, max: 300 }) }),
);

/** Steps with the faults of a model server as real ones have them (for the runner in front of the stub). */
const faultyStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: step },
  fc.record({ kind: fc.constant("model_outage" as const), ms: fc.integer({ min: 0, max: 800 }) }),
  fc.record({ kind: fc.constant("model_incomplete" as const), on: fc.boolean() }),
  fc.record({ kind: fc.constant("model_refuses_commits" as const), on: fc.boolean() }),
);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check` holds (polled every 20 ms, at most 5 s). */
const expectEventually = async (check: () => boolean): Promise<void> => {
  const deadline = performance.now() + 5000;
  while (!check() && performance.now() < deadline) await sleep(20);
  expect(check()).toBe(true);
};

/** What one run left: the events each socket received, in arrival order, and the session's id. */
interface Run {
  readonly sessionId: string;
  readonly sockets: ServerEvent[][];
}

const speech: Int16Array[] = [];

/** Plays `steps` on a new session at `url` (`model`: the stub behind its upstream runner, for fault steps). */
const play = async (url: string, steps: readonly Step[], model: ModelServerStub | null): Promise<Run> => {
  const modelSessionsBefore = model?.sessions.length ?? 0;
  let client = await RealtimeClient.connect(url);
  const sockets: ServerEvent[][] = [];
  const track = (c: RealtimeClient) => {
    const events: ServerEvent[] = [];
    sockets.push(events);
    c.onEvent((e) => events.push(e));
  };
  track(client);
  client.send({ type: "session.update", session: { input_sample_rate_hz: 16000 } });
  const created = await client.waitFor("session.created", { since: 0 });
  sockets[0]?.unshift(created);
  const sessionId = String((created.session as { id: string }).id);
  let token = String(created.resume_token);
  for (const s of steps) {
    switch (s.kind) {
      case "speech": {
        const samples = speech[s.file] ?? new Int16Array(0);
        const from = Math.min(samples.length, s.fromMs * 16);
        client.appendSamples(samples.subarray(from, Math.min(samples.length, from + s.ms * 16)), {
          sampleRateHz: 16000,
        });
        break;
      }
      case "silence":
        client.appendSamples(new Int16Array(s.ms * 16), { sampleRateHz: 16000 });
        break;
      case "commit":
        client.send({ type: "input_audio_buffer.commit", ...(s.respond ? { response_create: true } : {}) });
        break;
      case "create":
        client.send({ type: "response.create", ...(s.text ? { response: { output_modalities: ["text"] } } : {}) });
        break;
      case "cancel":
        client.send({ type: "response.cancel" });
        break;
      case "barge_in":
        client.send({ type: "barge_in" });
        break;
      case "ack": {
        const last = [...(sockets.at(-1) ?? [])].reverse().find((e) => e.type === "response.output_audio.delta");
        const played = Number((last?.metadata as { audio_duration_ms?: number } | undefined)?.audio_duration_ms ?? 0);
        if (last !== undefined) client.send({ type: "playback.ack", response_id: last.response_id, played_ms: played });
        break;
      }
      case "server_vad":
        client.send({
          type: "session.update",
          session: { turn_detection: s.on ? { type: "server_vad", interrupt_response: s.interrupt } : null },
        });
        break;
      case "text":
        client.send({
          type: "conversation.item.create",
          item: { type: "message", role: "user", content: [{ type: "input_text", text: s.text }] },
        });
        break;
      case "drop_and_resume": {
        // A drop mid-flight, as a network failure: whatever the server sent after the last event received is
        // replayed on the new socket.
        const last = Math.max(0, ...sockets.flat().map((e) => Number(e.server_event_seq ?? 0)));
        await client.terminate();
        client = await RealtimeClient.connect(url);
        track(client);
        client.send({
          type: "session.resume",
          session_id: sessionId,
          resume_token: token,
          last_received_server_event_seq: last,
        });
        const resumed = await client.waitFor((e) => e.type === "session.resumed" || e.type === "error", {
          since: 0,
          timeoutMs: 10_000,
        });
        expect(resumed.type).toBe("session.resumed");
        token = String(resumed.resume_token);
        break;
      }
      case "wait":
        await sleep(s.ms);
        break;
      case "model_outage":
        // An outage of this session's upstream session once it exists (a first connection that fails is refused at
        // once, by design).
        await expectEventually(() => model?.sessions.slice(modelSessionsBefore).some((m) => m.socket !== null) ?? true);
        model?.drop();
        await model?.refuse("connection");
        await sleep(s.ms);
        await model?.refuse(null);
        break;
      case "model_incomplete":
        model?.behave({ incomplete: s.on });
        break;
      case "model_refuses_commits":
        model?.behave({ minCommitMs: s.on ? 60_000 : 100 });
        break;
    }
  }
  // Let what is in flight settle a little, then close: a close cancels the active response.
  await sleep(100);
  const mark = client.received.length;
  client.send({ type: "session.close" });
  await client.waitFor("session.closed", { since: mark, timeoutMs: 20_000 });
  await client.closed;
  return { sessionId, sockets };
};

/** The invariants of BEHAVIOUR.md on what the client received; returns the first one broken, or null. */
const brokenInvariant = (run: Run): string | null => {
  for (const [i, events] of run.sockets.entries()) {
    const seqs = events.map((e) => e.server_event_seq).filter((s): s is number => typeof s === "number");
    const back = seqs.findIndex((s, j) => j > 0 && s <= (seqs[j - 1] ?? 0));
    if (back >= 0) return `socket ${i}: server_event_seq ${seqs[back]} after ${seqs[back - 1]}`;
  }
  // The session as the client saw it: each socket's events after the last seq the previous socket had.
  const seen: ServerEvent[] = [];
  for (const events of run.sockets) {
    const last = Math.max(0, ...seen.map((e) => Number(e.server_event_seq ?? 0)));
    seen.push(...events.filter((e) => typeof e.server_event_seq !== "number" || e.server_event_seq > last));
  }
  let active: string | null = null;
  const created = new Set<string>();
  const cancelled = new Set<string>();
  // Commits whose responses were deferred (BEHAVIOUR.md, "Turn-taking"): the next one starts as soon as the active
  // response ends, unless a barge-in (or the session's end) answers them instead.
  let deferred = 0;
  let owed: string | null = null;
  for (const e of seen) {
    const id = String(e.response_id ?? (e.response as { id?: string } | undefined)?.id ?? "");
    if (owed !== null && (e.type === "response.done" || e.type === "input_audio_buffer.committed")) {
      return `${e.type} after ${owed} ended with ${deferred} deferred responses waiting; response.created should come first`;
    }
    if (
      e.type === "input_audio_buffer.committed" &&
      (e.event as { response_create_deferred?: boolean } | undefined)?.response_create_deferred
    ) {
      if (active === null) return `commit ${String(e.item_id)} deferred with no response active`;
      deferred += 1;
    } else if (e.type === "response.created") {
      if (active !== null) return `response ${id} created while ${active} was active`;
      active = id;
      created.add(id);
      if (owed !== null) deferred -= 1;
      owed = null;
    } else if (e.type === "response.done") {
      if (active !== id) return `response.done of ${id}, but the active response is ${active}`;
      active = null;
      const response = e.response as { status?: string; status_details?: { reason?: string } | null };
      if (response.status === "cancelled") cancelled.add(id);
      const reason = response.status_details?.reason ?? "";
      if (["barge_in", "turn_detected", "session_closed"].includes(reason)) deferred = 0;
      if (deferred > 0) owed = id;
    } else if (e.type === "response.output_audio.delta" && cancelled.has(id)) {
      return `audio of ${id} after its cancel`;
    }
  }
  if (owed !== null) return `${owed} ended with ${deferred} deferred responses waiting, and none started`;
  if (active !== null) return `response ${active} never reached a terminal event`;
  const terminated = seen.filter((e) => e.type === "response.done").length;
  if (terminated !== created.size) return `${created.size} responses created, ${terminated} done`;
  return null;
};

describe.each([
  ["echo", {}],
  ["scripted", { runner: { kind: "scripted", script: "deploy/scripts/greeting.yaml" } }],
  ["upstream chain", "chain"],
  ["upstream runner, with a model server that drops, refuses commits and ends responses incomplete,", "faults"],
] as const)("generated sessions on the %s runner", (_name, config) => {
  let servers: Awaited<ReturnType<typeof startTestServer>>[] = [];
  let model: ModelServerStub | null = null;
  let url = "";
  let store: Awaited<ReturnType<typeof startTestServer>>["store"];

  beforeAll(async () => {
    for (const file of FILES) speech.push((await readWavFile(sharedAudio(file))).samples);
    if (config === "chain") {
      const b = await startTestServer({ runner: { kind: "scripted", script: "deploy/scripts/greeting.yaml" } });
      const a = await startTestServer({ runner: { kind: "upstream", url: b.url, dialect: "duplex" } });
      servers = [a, b];
    } else if (config === "faults") {
      model = await startModelServerStub({ dialect: "duplex" });
      const resume = { grace_ms: 5000, initial_delay_ms: 50, max_delay_ms: 200 };
      servers = [await startTestServer({ runner: { kind: "upstream", url: model.url, dialect: "duplex", resume } })];
    } else {
      servers = [await startTestServer(config)];
    }
    url = servers[0]?.url ?? "";
    store = servers[0]?.store as typeof store;
  });
  afterAll(async () => {
    for (const server of servers) await server.stop();
    await model?.close();
  });

  it("every session replays byte for byte; one response at a time, no audio after its cancel, seqs increasing on each socket, every response ends, history never holds more than was heard", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(model === null ? step : faultyStep, { minLength: 2, maxLength: 10 }), async (steps) => {
        model?.behave({ incomplete: false, minCommitMs: 100 });
        const run = await play(url, steps, model);
        const entries = await store.read(streamOf(run.sessionId));
        const replay = replayEntries(entries);
        expect(replay.divergence, "the recorded session replays offline byte for byte").toBeNull();
        // Re-driven live through the recorded runner of itself (its model's outputs played back), it behaves the same.
        const redriven = (await redriveThroughOwnRecording(entries)).result;
        expect(redriven.divergence, "the session re-driven through its own recording").toBeNull();
        expect(brokenInvariant(run)).toBeNull();
        // History holds at most what was heard: each assistant item's text is a prefix of its transcript.
        const transcripts = new Map<string, string>();
        for (const e of run.sockets.flat()) {
          if (e.type === "response.output_audio_transcript.done")
            transcripts.set(String(e.item_id), String(e.transcript));
        }
        for (const item of foldLog(entries).state.history.filter((h) => h.role === "assistant" && h.audio)) {
          const heard = transcripts.get(item.id);
          if (heard !== undefined)
            expect(heard.startsWith(item.text), `${item.id}: "${item.text}" of "${heard}"`).toBe(true);
        }
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
  }, 180_000);
});
