import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { RealtimeClient, type ServerEvent } from "../../src/client/index.ts";
import { foldLog, streamOf } from "../../src/engine/index.ts";
import type { EventStore } from "../../src/engine/ports/index.ts";
import { createResampler, pcm16ToBytes, readWavFile } from "../../src/infra/audio/index.ts";
import { parseConfig } from "../../src/infra/config.ts";
import { createSileroVad } from "../../src/infra/vad/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { startServer } from "../../src/server/index.ts";
import { gatedVad } from "../support/gated-vad.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * A failed append (issue 10, part 2; BEHAVIOUR.md, "Errors": runtime_append_failed). The client gets the coded
 * error and its socket closes with 1011; nothing after the last durable entry reached it; other sessions are served;
 * once the fault clears, the session resumes from its log and goes on, and its log replays identically.
 */

/** A store whose appends to the streams in `failing` throw, as a full disk or an I/O error would. */
const faultInjecting = (store: EventStore, failing: Set<string>): EventStore => ({
  ...store,
  append: (stream, entries, expected) =>
    failing.has(stream)
      ? Promise.reject(new Error(`injected I/O error appending to ${stream}`))
      : store.append(stream, entries, expected),
});

const seqs = (events: readonly ServerEvent[]): number[] =>
  events.flatMap((e) => (typeof e.server_event_seq === "number" ? [e.server_event_seq] : []));

const sessionOf = async (client: RealtimeClient): Promise<{ id: string; token: string }> => {
  const created = await client.waitFor("session.created", { since: 0 });
  return { id: String((created.session as { id: string }).id), token: String(created.resume_token) };
};

const resume = async (url: string, id: string, token: string, last: number): Promise<RealtimeClient> => {
  const client = await RealtimeClient.connect(`${url}?autostart=0`);
  client.send({ type: "session.resume", session_id: id, resume_token: token, last_received_server_event_seq: last });
  return client;
};

/** What a client received, as the log says it was sent: every seq up to the last durable one, none beyond. */
const expectNothingBeyondTheLog = async (store: EventStore, id: string, received: readonly ServerEvent[]) => {
  const durable = foldLog(await store.read(streamOf(id))).wire.seq;
  const got = seqs(received);
  expect(got).toEqual(got.map((_, i) => i + 1));
  expect(got.at(-1)).toBe(durable);
};

/** After a resume: the session answers a response.create, completed, and its log replays identically. */
const expectServedAndReplayable = async (client: RealtimeClient, store: EventStore, id: string): Promise<void> => {
  const since = client.received.length;
  client.send({ type: "response.create", response: { instructions: "Answer." } });
  const done = await client.waitFor("response.done", { since, timeoutMs: 20_000 });
  expect(done.response).toMatchObject({ status: "completed" });
  expect(replayEntries(await store.read(streamOf(id))).divergence).toBeNull();
};

describe("a failed append", () => {
  it("lets the client go with runtime_append_failed and 1011, serves the others, and resumes once the fault clears", async () => {
    const failing = new Set<string>();
    const server = await startTestServer({}, { wrapStore: (store) => faultInjecting(store, failing) });
    try {
      const a = await RealtimeClient.connect(server.url);
      const b = await RealtimeClient.connect(server.url);
      const sa = await sessionOf(a);
      await sessionOf(b);
      a.send({ type: "session.update", session: { instructions: "be brief" } });
      await a.waitFor("session.updated", { since: 0 });

      failing.add(streamOf(sa.id));
      a.send({ type: "response.create", event_id: "evt_lost", response: { instructions: "Answer." } });
      const error = await a.waitFor("error", { since: 0 });
      expect(error.error).toMatchObject({ type: "server_error", code: "runtime_append_failed" });
      expect((await a.closed).code).toBe(1011);
      await expectNothingBeyondTheLog(
        server.store,
        sa.id,
        a.received.map((r) => r.event),
      );
      expect(a.types()).not.toContain("response.created");

      // The other session is served while A's stream fails.
      b.send({ type: "response.create", response: { instructions: "Answer." } });
      const done = await b.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
      expect(done.response).toMatchObject({ status: "completed" });
      expect(server.engine.get(sa.id)?.isClosed).toBe(false);

      // The fault clears: A resumes from what it received and is served again.
      failing.clear();
      const again = await resume(server.url, sa.id, sa.token, a.lastSeq());
      const resumed = await again.waitFor("session.resumed", { since: 0 });
      expect(resumed.attachment_generation).toBe(2);
      await expectServedAndReplayable(again, server.store, sa.id);
      const after = seqs(again.received.map((r) => r.event));
      expect(after[0]).toBe(a.lastSeq() + 1);
      expect(after).toEqual(after.map((_, i) => a.lastSeq() + 1 + i));
      expect((await server.store.read(streamOf(sa.id))).map((e) => e.type)).toContain("SessionRecovered");
      await again.close();
      await b.close();
    } finally {
      await server.stop();
    }
  }, 60_000);

  it("cancels a response cut by the fault: the resumed client learns it ended, and the log replays identically", async () => {
    const failing = new Set<string>();
    const server = await startTestServer({}, { wrapStore: (store) => faultInjecting(store, failing) });
    try {
      const a = await RealtimeClient.connect(server.url);
      const sa = await sessionOf(a);
      a.send({ type: "response.create", response: { instructions: "Answer." } });
      const created = await a.waitFor("response.created", { since: 0 });
      failing.add(streamOf(sa.id));
      await a.waitFor("error", { since: 0, timeoutMs: 20_000 });
      expect((await a.closed).code).toBe(1011);
      await expectNothingBeyondTheLog(
        server.store,
        sa.id,
        a.received.map((r) => r.event),
      );

      failing.clear();
      const again = await resume(server.url, sa.id, sa.token, a.lastSeq());
      const done = await again.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
      expect(done.response).toMatchObject({
        id: (created.response as { id: string }).id,
        status: "cancelled",
        status_details: { reason: "append_failed" },
      });
      const entries = await server.store.read(streamOf(sa.id));
      expect(replayEntries(entries).divergence).toBeNull();
      await again.close();
    } finally {
      await server.stop();
    }
  }, 60_000);
});

describe("a store fault while appends and resumes are in flight", () => {
  it("a resume whose read of the log fails lets that socket go with internal_error; the same token resumes later", async () => {
    const unreadable = new Set<string>();
    const server = await startTestServer(
      {},
      {
        wrapStore: (store) => ({
          ...store,
          read: (stream, from) =>
            unreadable.has(stream)
              ? Promise.reject(new Error(`injected I/O error reading ${stream}`))
              : store.read(stream, from),
        }),
      },
    );
    try {
      const a = await RealtimeClient.connect(server.url);
      const sa = await sessionOf(a);
      a.send({ type: "session.update", session: { instructions: "be brief" } });
      await a.waitFor("session.updated", { since: 0 });
      await a.terminate();

      unreadable.add(streamOf(sa.id));
      const refused = await resume(server.url, sa.id, sa.token, a.lastSeq());
      const error = await refused.waitFor("error", { since: 0 });
      expect(error.error).toMatchObject({ type: "server_error", code: "internal_error" });
      expect(String((error.error as { message: string }).message)).toMatch(/could not be read/);
      expect((await refused.closed).code).toBe(1011);
      expect(refused.types()).toEqual(["error"]);

      // The claim was never answered: the token the client holds is still the current one.
      unreadable.clear();
      const again = await resume(server.url, sa.id, sa.token, a.lastSeq());
      const resumed = await again.waitFor("session.resumed", { since: 0 });
      expect(resumed.attachment_generation).toBe(2);
      await expectServedAndReplayable(again, server.store, sa.id);
      await again.close();
    } finally {
      await server.stop();
    }
  }, 60_000);

  it("a session rebuilt after a failed append starts its resampler and VAD afresh, as after a restart", async () => {
    // Appends to the streams in `failing` wait for `release`, then throw; `held` resolves when one waits.
    const failing = new Set<string>();
    let release = (): void => undefined;
    let held = (): void => undefined;
    const holding = new Promise<void>((resolve) => {
      held = resolve;
    });
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const gate = gatedVad();
    const server = await startTestServer(
      {},
      {
        wrapVad: gate.wrap,
        wrapStore: (store) => ({
          ...store,
          append: async (stream, entries, expected) => {
            if (!failing.has(stream)) return store.append(stream, entries, expected);
            held();
            await released;
            throw new Error(`injected I/O error appending to ${stream}`);
          },
        }),
      },
    );
    try {
      // 24 kHz speech, resampled to the echo's 16 kHz: the resampler and the VAD both carry state across appends.
      const speech = (await readWavFile(sharedAudio("jfk_24k.wav"))).samples;
      const chunk = (i: number): Uint8Array => pcm16ToBytes(speech.subarray(2400 * i, 2400 * (i + 1)));
      const a = await RealtimeClient.connect(server.url);
      const sa = await sessionOf(a);
      a.send({ type: "session.update", session: { instructions: "listen" } });
      await a.waitFor("session.updated", { since: 0 });

      failing.add(streamOf(sa.id));
      a.appendAudio(chunk(10));
      await holding;
      // These arrive while the first append's batch is being appended: they reach the resampler and the VAD
      // at once, and are dropped when that append fails.
      const before = gate.calls;
      for (let i = 11; i < 16; i++) a.appendAudio(chunk(i));
      await expect.poll(() => gate.calls, { timeout: 5_000 }).toBe(before + 5);
      release();
      const error = await a.waitFor("error", { since: 0 });
      expect(error.error).toMatchObject({ code: "runtime_append_failed" });
      await a.closed;

      failing.clear();
      const again = await resume(server.url, sa.id, sa.token, a.lastSeq());
      await again.waitFor("session.resumed", { since: 0 });
      const ids: string[] = [];
      for (let i = 20; i < 30; i++) ids.push(again.appendAudio(chunk(i), { event_id: `after_${i}` }));
      again.send({ type: "session.heartbeat" });
      await again.waitFor("session.heartbeat_ack", { since: 0 });

      const appended = (await server.store.read(streamOf(sa.id)))
        .filter((e) => e.type === "CommandReceived")
        .map((e) => (e.data as { command: { eventId?: string; audio?: Uint8Array; vad?: number[] } }).command)
        .filter((c) => c.eventId?.startsWith("after_"));
      expect(appended.map((c) => c.eventId)).toEqual(ids);

      // What a fresh resampler and a fresh Silero stream make of the same audio.
      const resampler = createResampler(24000, 16000);
      const vad = await createSileroVad({ thread: "main" });
      const stream = vad.createStream();
      const expected: { audio: Uint8Array; vad: number[] }[] = [];
      for (let i = 20; i < 30; i++) {
        const samples = resampler.push(new Int16Array(speech.subarray(2400 * i, 2400 * (i + 1))));
        expected.push({ audio: pcm16ToBytes(samples), vad: await stream.process(samples) });
      }
      await vad.close();
      expect(appended.map((c) => Buffer.from(c.audio ?? []).toString("base64"))).toEqual(
        expected.map((e) => Buffer.from(e.audio).toString("base64")),
      );
      expect(appended.map((c) => c.vad)).toEqual(expected.map((e) => e.vad));
      await again.close();
    } finally {
      release();
      gate.open();
      await server.stop();
    }
  }, 60_000);
});

/** A really full filesystem: a 2 MiB tmpfs (needs root; skipped with the reason where mount is refused). */
const mountable = (() => {
  try {
    execFileSync(
      "sh",
      [
        "-c",
        "mkdir -p /tmp/duplex-tmpfs-probe && mount -t tmpfs -o size=64k tmpfs /tmp/duplex-tmpfs-probe && umount /tmp/duplex-tmpfs-probe",
      ],
      { stdio: "ignore" },
    );
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!mountable)("a full filesystem (tmpfs)", () => {
  let dir = "";
  afterAll(async () => {
    if (dir === "") return;
    execFileSync("umount", [dir]);
    await rm(dir, { recursive: true, force: true });
  });

  it("a session streaming onto a full disk is let go of with runtime_append_failed, and resumes once space is freed", async () => {
    dir = await mkdtemp(join(tmpdir(), "duplex-full-"));
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", dir]);
    await mkdir(join(dir, "data"));
    const config = parseConfig({
      log_level: "silent",
      listen: { host: "127.0.0.1", port: 0 },
      event_store: { kind: "sqlite", path: join(dir, "data", "duplex.sqlite") },
      // The disk floors would refuse the session on a 2 MiB disk before it fills: this is the append that fails.
      limits: { disk_free_floor_mb: 0, disk_hard_floor_mb: 0 },
    });
    const server = await startServer(config);
    try {
      const speech = (await readWavFile(sharedAudio("jfk_16k.wav"))).samples;
      const a = await RealtimeClient.connect(server.url);
      const sa = await sessionOf(a);
      a.send({ type: "session.update", session: { input_sample_rate_hz: 16000 } });
      await a.waitFor("session.updated", { since: 0 });
      // 11 s of speech is about 350 KB of log: the 2 MiB disk fills within a few repeats.
      let closed = false;
      void a.closed.then(() => {
        closed = true;
      });
      for (let i = 0; i < 40 && !closed; i++) {
        a.appendSamples(speech, { sampleRateHz: 16000 });
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const error = await a.waitFor("error", { since: 0, timeoutMs: 20_000 });
      expect(error.error).toMatchObject({ code: "runtime_append_failed" });
      expect(String((error.error as { message: string }).message)).toMatch(/full/i);
      expect((await a.closed).code).toBe(1011);
      await expectNothingBeyondTheLog(
        server.store,
        sa.id,
        a.received.map((r) => r.event),
      );

      execFileSync("mount", ["-o", "remount,size=64m", dir]);
      const again = await resume(server.url, sa.id, sa.token, a.lastSeq());
      await again.waitFor("session.resumed", { since: 0 });
      again.send({ type: "input_audio_buffer.commit" });
      await expectServedAndReplayable(again, server.store, sa.id);
      await again.close();
    } finally {
      await server.close();
    }
  }, 90_000);
});
