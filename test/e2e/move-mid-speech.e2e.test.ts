import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  createEngine,
  EARLIER_CHANGES,
  type Engine,
  type EventStore,
  foldLog,
  type SessionHost,
  schemaOf,
  streamOf,
} from "../../src/engine/index.ts";
import type { NodeLeases, VadModel } from "../../src/engine/ports/index.ts";
import { createResampler } from "../../src/infra/audio/index.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/sqlite.ts";
import { createEchoRunner } from "../../src/infra/runners/echo.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { frame, leasesAlwaysHeld, type Sent, sinkInto, until } from "../support/engine-session.ts";

/**
 * Issue 33, part 2 (BEHAVIOUR.md, "Moves lose nothing"): speech that begins before a session moves (a restart of its
 * server: two engines over one store, the first one dropped as a killed process is; or a takeover by another node on
 * the client's resume) and ends after it is one
 * utterance, answered once like any other, in the model-native lane and in the turn lane (server VAD). The echo
 * runner speaks back what it heard: the answer's length says that the new runner heard the utterance from its
 * start, not only the part after the move. The VAD is a deterministic energy gate (Silero's own run is the SIGKILL
 * test's, test/e2e/restart-mid-speech.e2e.test.ts).
 */

const RATE = 16_000;
const FRAME = 512;

/** Speech probability from a frame's energy: 0.95 for the tone, 0.02 for silence. */
const energyVad: VadModel = {
  sampleRate: RATE,
  frameSamples: FRAME,
  close: async () => undefined,
  createStream() {
    let left = new Int16Array(0);
    return {
      async process(samples) {
        const all = new Int16Array(left.length + samples.length);
        all.set(left);
        all.set(samples, left.length);
        const out: number[] = [];
        let at = 0;
        for (; at + FRAME <= all.length; at += FRAME) {
          let sum = 0;
          for (let i = at; i < at + FRAME; i += 1) sum += (all[i] as number) ** 2;
          out.push(Math.sqrt(sum / FRAME) > 500 ? 0.95 : 0.02);
        }
        left = all.slice(at);
        return out;
      },
      reset() {
        left = new Int16Array(0);
      },
      close: () => undefined,
    };
  },
};

/** `ms` of a 220 Hz tone (speech to the VAD) or of silence, PCM16 at 16 kHz. */
const audio = (ms: number, tone: boolean): Int16Array => {
  const out = new Int16Array((ms * RATE) / 1000);
  if (tone)
    for (let i = 0; i < out.length; i += 1) out[i] = Math.round(8000 * Math.sin((2 * Math.PI * 220 * i) / RATE));
  return out;
};

describe("an utterance in progress when the session moves", () => {
  const engines: Engine[] = [];
  let store: EventStore;
  afterEach(async () => {
    for (const engine of engines.splice(0)) await engine.close();
    await store.close();
  });

  /** Two nodes on one store, both alive (a takeover on a resume), or none (a store of one node). */
  const leasesOf = (node: string | null): NodeLeases | null => (node === null ? null : leasesAlwaysHeld(node));

  const engine = (clock: { now: number }, node: string | null): Engine => {
    const e = createEngine({
      store,
      runner: createEchoRunner({ speedFactor: Number.POSITIVE_INFINITY }),
      vad: energyVad,
      createResampler,
      now: () => clock.now,
      leases: leasesOf(node),
    });
    engines.push(e);
    return e;
  };

  /** Appends `samples` in 100 ms appends, the clock moving with them. */
  const stream = async (host: SessionHost, clock: { now: number }, samples: Int16Array): Promise<void> => {
    const step = RATE / 10;
    for (let at = 0; at < samples.length; at += step) {
      const part = samples.subarray(at, at + step);
      const b64 = Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString("base64");
      clock.now += 100;
      void host.submit(frame({ type: "input_audio_buffer.append", audio: b64 }), {
        bytes: b64.length,
        turn: false,
        sniffed: "append",
      });
    }
    await host.settled();
  };

  const responses = (sent: readonly Sent[]) => sent.filter((e) => e.type === "response.done");
  /** ms of PCM16 at 24 kHz in the response's audio deltas. */
  const deliveredMs = (sent: readonly Sent[], responseId: string): number =>
    sent
      .filter((e) => e.type === "response.output_audio.delta" && e.response_id === responseId)
      .reduce((ms, e) => ms + (Buffer.from(String(e.delta), "base64").length / 2 / 24_000) * 1000, 0);

  const run = async (lane: "native" | "turn", move: "restart" | "takeover") => {
    store = createSqliteEventStore({ path: ":memory:" });
    const clock = { now: 1_700_000_000_000 };
    const first = engine(clock, move === "takeover" ? "node-a" : null);
    const sentBefore: Sent[] = [];
    const sinkBefore = sinkInto(sentBefore);
    const host = first.open();
    if ("code" in host) throw new Error(host.message);
    host.attach(sinkBefore);
    await host.settled();
    await host.submit(
      frame({
        type: "session.update",
        session: {
          input_audio_format: "pcm16",
          input_sample_rate_hz: RATE,
          ...(lane === "turn" ? { turn_detection: { type: "server_vad" } } : {}),
        },
      }),
    );
    await host.settled();
    const created = sentBefore.find((e) => e.type === "session.created") as Sent;
    const token = String(created.resume_token);
    const sessionId = host.sessionId;
    // 500 ms of silence, then 1 s of speech: the session moves while the user speaks.
    await stream(host, clock, audio(500, false));
    await stream(host, clock, audio(1_000, true));
    const logged = await store.read(streamOf(sessionId));
    expect(logged.filter((e) => e.type === "SpeechStarted")).toHaveLength(1);
    expect(logged.filter((e) => e.type === "SpeechStopped")).toHaveLength(0);
    const lastSeq = Math.max(...sentBefore.map((e) => Number(e.server_event_seq ?? 0)));

    clock.now += 2_000;
    const second = engine(clock, move === "takeover" ? "node-b" : null);
    if (move === "restart") {
      // The process dies (nothing more of it reaches the store); another one starts on the same store.
      expect(await second.recover()).toEqual([sessionId]);
    } else {
      // The socket to node a drops; the client resumes on node b, which takes the session over.
      first.detach(host, sinkBefore);
      await host.settled();
      expect(await second.recover()).toEqual([]);
      const adopted = await second.adopt(sessionId, token);
      if ("code" in adopted) throw new Error(adopted.message);
    }
    const sent: Sent[] = [];
    const resumed = second.resume(
      { type: "session.resume", eventId: null, sessionId, resumeToken: token, lastReceivedSeq: lastSeq },
      sinkInto(sent),
    );
    if ("code" in resumed) throw new Error(resumed.message);
    await until(() => sent.some((e) => e.type === "session.resumed"), "session.resumed");
    // The user goes on speaking for 600 ms, then is silent for 1 s: the utterance ends after the move.
    await stream(resumed, clock, audio(600, true));
    await stream(resumed, clock, audio(1_000, false));
    await until(() => responses(sent).length > 0, "response.done");
    // Nothing else comes: one answer.
    await new Promise((r) => setTimeout(r, 200));
    await resumed.settled();
    return { sent, sessionId, resumed };
  };

  it.each([
    ["native", "restart"],
    ["turn", "restart"],
    ["native", "takeover"],
    ["turn", "takeover"],
  ] as const)("%s lane, a %s: answered once, with the whole utterance heard", async (lane, move) => {
    const { sent, sessionId, resumed } = await run(lane, move);
    const done = responses(sent);
    expect(done).toHaveLength(1);
    const response = (done[0] as Sent).response as { id: string; status: string };
    expect(response.status).toBe("completed");
    expect(sent.filter((e) => e.type === "response.created")).toHaveLength(1);
    // In order: created, its audio, done.
    const types = sent.map((e) => e.type);
    expect(types.indexOf("response.created")).toBeLessThan(types.indexOf("response.output_audio.delta"));
    expect(types.lastIndexOf("response.output_audio.delta")).toBeLessThan(types.indexOf("response.done"));
    // The echo speaks back the utterance it heard: from its start (300 ms prefix padding before the speech) to
    // its stop (500 ms of silence after it), 300 + 1000 + 600 + ~500 ms; the part after the move alone is ~1100.
    const ms = deliveredMs(sent, response.id);
    expect(ms).toBeGreaterThan(2_200);
    expect(ms).toBeLessThan(2_600);

    await resumed.submit(frame({ type: "session.close" }));
    await resumed.settled();
    const entries = await store.read(streamOf(sessionId));
    const typesLogged = entries.map((e) => e.type);
    expect(typesLogged.filter((t) => t === "SpeechStarted")).toHaveLength(1);
    expect(typesLogged.filter((t) => t === "SpeechStopped")).toHaveLength(1);
    expect(typesLogged.filter((t) => t === "ResponseStarted")).toHaveLength(1);
    const moved = move === "restart" ? "SessionRecovered" : "SessionOwned";
    expect(typesLogged.indexOf("SpeechStarted")).toBeLessThan(typesLogged.indexOf(moved));
    expect(typesLogged.indexOf(moved)).toBeLessThan(typesLogged.indexOf("SpeechStopped"));
    expect(entries.find((e) => e.type === "UtteranceResubmitted")?.data).toMatchObject({ inProgress: true });
    const replay = replayEntries(entries);
    expect(replay.divergence).toBeNull();
    expect(replay.ok).toBe(true);
  });
});

/**
 * Logs recorded before the change (schema 2, by the release before it: the test above, run on that code, in both
 * lanes): the move gave the new runner nothing of the utterance in progress. They replay as they ran, under the rule
 * of that release (src/engine/earlier-releases.ts), which the session keeps.
 */
describe("a log recorded before the utterance in progress was carried over", () => {
  const fixture = (lane: string) =>
    join(process.cwd(), "test/fixtures/earlier-releases", `move-mid-speech-${lane}.jsonl`);

  it.each(["native", "turn"])("%s lane: replays identical, read under the rule of its release", async (lane) => {
    const { entries } = await readSessionFile(fixture(lane));
    expect(schemaOf(entries)).toBe(2);
    expect(entries.some((e) => e.type === "UtteranceResubmitted")).toBe(false);
    const replay = replayEntries(entries);
    expect(replay.divergence).toBeNull();
    expect(replay.ok).toBe(true);
    // It predates 01b8770 and, history being a line, every change after it.
    const since = EARLIER_CHANGES.findIndex((c) => c.commit === "01b8770");
    expect(replay.earlierRelease?.before).toEqual(EARLIER_CHANGES.slice(since).map((c) => c.commit));
    expect(foldLog(entries).state.rules).toEqual({
      noUtteranceCarriedOver: true,
      listenNamesNoResponse: true,
      responseWithoutInputAnswered: true,
      noTurnEvents: true,
      resumedWithoutSession: true,
      noToolLedger: true,
    });
    // The same session before its move shows nothing of it: a server of today moving it carries the utterance over.
    const beforeMove = entries.slice(
      0,
      entries.findIndex((e) => e.type === "SessionRecovered"),
    );
    expect(replayEntries(beforeMove).earlierRelease).toBeNull();
    expect(foldLog(beforeMove).state.rules).toBeUndefined();
  });
});
