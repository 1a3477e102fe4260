import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine, type Engine, type EventStore, type SessionHost, streamOf } from "../../src/engine/index.ts";
import { createResampler } from "../../src/infra/audio/index.ts";
import { createSqliteEventStore } from "../../src/infra/event-store/sqlite.ts";
import { createUpstreamRunner } from "../../src/infra/runners/upstream/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { frame, type Sent, sinkInto, until } from "../support/engine-session.ts";
import { type ModelServerStub, startModelServerStub } from "../support/model-server-stub.ts";

/**
 * Issue 33, part 2: after a restart of this server (two engines over one store on disk, the first dropped as a killed
 * process is), the upstream runner's new model session is given the heard conversation once: the seed holds what was
 * heard before the command that opened the runner, and that command reaches the model once, as itself. In process,
 * against the model-server stub, in both dialects.
 */

type Dialect = "duplex" | "openai";

const userText = (text: string) => ({
  type: "conversation.item.create",
  item: { type: "message", role: "user", content: [{ type: "input_text", text }] },
});

describe("the upstream runner after a restart of this server", () => {
  const engines: Engine[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const engine of engines.splice(0)) await engine.close();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  const engineOn = (store: EventStore, model: ModelServerStub, dialect: Dialect, clock: { now: number }): Engine => {
    const engine = createEngine({
      store,
      runner: createUpstreamRunner({ url: model.url, dialect }),
      vad: null,
      createResampler,
      now: () => clock.now,
    });
    engines.push(engine);
    return engine;
  };

  /** Sends `event` and waits for the `response.done` (or `type`) it leads to; returns the transcript said. */
  const ask = async (host: SessionHost, sent: Sent[], event: Record<string, unknown>, type: string) => {
    const since = sent.length;
    await host.submit(frame(event));
    await until(() => sent.slice(since).some((e) => e.type === type), type);
    return sent
      .slice(since)
      .filter((e) => e.type === "response.output_audio_transcript.done")
      .map((e) => e.transcript);
  };

  it.each<Dialect>(["duplex", "openai"])(
    "%s: each heard item reaches the new model session once, also the command that opens it",
    async (dialect) => {
      const model = await startModelServerStub({ dialect });
      cleanups.push(() => model.close());
      await mkdir("/tmp/h2", { recursive: true });
      const dir = await mkdtemp("/tmp/h2/upstream-restart-");
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      const path = join(dir, "duplex.sqlite");
      const firstStore = createSqliteEventStore({ path });

      const clock = { now: 1_700_000_000_000 };
      const first = engineOn(firstStore, model, dialect, clock);
      const sentBefore: Sent[] = [];
      const host = first.open();
      if ("code" in host) throw new Error(host.message);
      host.attach(sinkInto(sentBefore));
      await ask(
        host,
        sentBefore,
        { type: "session.update", session: { extra_body: { auto_response: false } } },
        "session.updated",
      );
      const token = String((sentBefore.find((e) => e.type === "session.created") as Sent).resume_token);
      await ask(host, sentBefore, userText("my name is Ada"), "conversation.item.done");
      expect(
        await ask(
          host,
          sentBefore,
          { type: "response.create", response: { instructions: "Answer." } },
          "response.done",
        ),
      ).toEqual(["I know 1 user texts."]);
      // The client played the answer's 100 ms out before the process died.
      const answered = sentBefore.findLast((e) => e.type === "response.done") as { response: { id: string } };
      await ask(
        host,
        sentBefore,
        { type: "playback.ack", response_id: answered.response.id, played_ms: 100 },
        "playback.acknowledged",
      );
      clock.now += 1_000;
      const lastSeq = Math.max(...sentBefore.map((e) => Number(e.server_event_seq ?? 0)));

      // The process dies (nothing more of it reaches the store); another starts on the same store on disk.
      const store = createSqliteEventStore({ path });
      cleanups.push(async () => {
        await store.close();
        await firstStore.close();
      });
      const second = engineOn(store, model, dialect, clock);
      expect(await second.recover()).toEqual([host.sessionId]);
      const sent: Sent[] = [];
      const resumed = second.resume(
        {
          type: "session.resume",
          eventId: null,
          sessionId: host.sessionId,
          resumeToken: token,
          lastReceivedSeq: lastSeq,
        },
        sinkInto(sent),
      );
      if ("code" in resumed) throw new Error(resumed.message);
      await until(() => sent.some((e) => e.type === "session.resumed"), "session.resumed");
      // The first command after the restart opens the new runner; it is a user item of its own.
      await ask(resumed, sent, userText("I live in Lisbon"), "conversation.item.done");
      expect(
        await ask(resumed, sent, { type: "response.create", response: { instructions: "Answer." } }, "response.done"),
      ).toEqual(["I know 2 user texts."]);

      // A new model session (the upstream token was in the dead process's memory), given each item once, in order
      // (the stub keeps no items of its own answers).
      expect(model.sessions).toHaveLength(2);
      const upstream = model.sessions[1];
      expect(upstream?.items.map((i) => [i.role, i.text])).toEqual([
        ["user", "my name is Ada"],
        ["assistant", "I know 1 user texts."],
        ["user", "I live in Lisbon"],
      ]);
      // The seed carries what was heard before the command, the command goes as itself: Lisbon once, not seeded.
      const carried = (upstream?.frames ?? [])
        .filter((f) => f.type === "conversation.item.create" || f.type === "input.text.append")
        .map((f) => (f.type === "input.text.append" ? `append ${String(f.text)}` : JSON.stringify(f.item)));
      expect(carried.filter((c) => c.includes("Lisbon"))).toHaveLength(1);
      expect(carried.filter((c) => c.includes("Ada"))).toHaveLength(1);

      await resumed.submit(frame({ type: "session.close" }));
      await resumed.settled();
      const entries = await store.read(streamOf(host.sessionId));
      const seeded = entries.filter(
        (e) =>
          e.type === "StageOutputReceived" && (e.data as { output: { kind: string } }).output.kind === "history_seeded",
      );
      expect(seeded).toHaveLength(1);
      // The seed names the items heard before the restart (Ada's and the answer), not the one that opened the runner.
      const heardBefore = sentBefore
        .filter((e) => e.type === "conversation.item.done")
        .map((e) => (e.item as { id: string }).id);
      expect(heardBefore).toHaveLength(2);
      expect((seeded[0]?.data as { output?: { itemIds?: string[] } } | undefined)?.output?.itemIds).toEqual(
        heardBefore,
      );
      expect(replayEntries(entries).ok).toBe(true);
    },
    20_000,
  );
});

/**
 * Issue 33, part 4: an assistant message the client places in the conversation (a chat request's earlier answer, named
 * by its audio.id, becomes one) reaches the model as its own earlier words, once, in its place: as the first command
 * (it opens the runner, and is not seeded too) and later in the session.
 */
describe("the upstream runner and the client's assistant messages", () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  const assistantText = (text: string) => ({
    type: "conversation.item.create",
    item: { type: "message", role: "assistant", content: [{ type: "output_text", text }] },
  });

  it.each<Dialect>(["duplex", "openai"])("%s: each reaches the model once, in order", async (dialect) => {
    const model = await startModelServerStub({ dialect });
    cleanups.push(() => model.close());
    const store = createSqliteEventStore({ path: ":memory:" });
    const engine = createEngine({
      store,
      runner: createUpstreamRunner({ url: model.url, dialect }),
      vad: null,
      createResampler,
    });
    cleanups.push(async () => {
      await engine.close();
      await store.close();
    });
    const host = engine.open();
    if ("code" in host) throw new Error(host.message);
    const sent: Sent[] = [];
    host.attach(sinkInto(sent));
    const step = async (event: Record<string, unknown>, type: string): Promise<void> => {
      const since = sent.length;
      await host.submit(frame(event));
      await until(() => sent.slice(since).some((e) => e.type === type), type);
    };
    await step({ type: "session.update", session: { extra_body: { auto_response: false } } }, "session.updated");
    await step(assistantText("Hello, I am the model."), "conversation.item.done");
    await step(userText("What did you say?"), "conversation.item.done");
    await step(assistantText("I said hello."), "conversation.item.done");
    await step({ type: "response.create", response: { instructions: "Answer." } }, "response.done");
    expect(model.sessions).toHaveLength(1);
    expect(model.sessions[0]?.items.map((i) => [i.role, i.text])).toEqual([
      ["assistant", "Hello, I am the model."],
      ["user", "What did you say?"],
      ["assistant", "I said hello."],
    ]);
    await host.submit(frame({ type: "session.close" }));
    await host.settled();
    expect(replayEntries(await store.read(streamOf(host.sessionId))).divergence).toBeNull();
  });
});
