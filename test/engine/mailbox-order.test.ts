import { describe, expect, it } from "vitest";
import { streamOf } from "../../src/engine/index.ts";
import type { EventStore } from "../../src/engine/ports/index.ts";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { type EngineSession, openEngineSession } from "../support/engine-session.ts";
import { gatedVad } from "../support/gated-vad.ts";
import { sharedAudio } from "../support/server.ts";

type Gate = ReturnType<typeof gatedVad>;

const sessionIdOf = async (client: EngineSession): Promise<string> =>
  String(((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id);

const commandsOf = async (store: EventStore, id: string) =>
  (await store.read(streamOf(id)))
    .filter((e) => e.type === "CommandReceived")
    .map((e) => (e.data as { command: { type: string; eventId?: string; code?: string } }).command);

/**
 * Makes the echo speak (11 s of speech, answered 4 times faster than real time), then holds an append at the VAD
 * and checks that the model's audio goes ahead of it while a heartbeat sent after it waits with it; then opens the
 * gate and checks the order the log recorded.
 */
const expectOutputsToPassAHeldAppend = async (
  client: EngineSession,
  gate: Gate,
  store: EventStore,
  label: string,
): Promise<void> => {
  const speaking = client.sent.length;
  client.appendSamples((await readWavFile(sharedAudio("jfk_16k.wav"))).samples, {
    sampleRateHz: 16000,
    tailMs: 1500,
  });
  await client.waitFor("response.output_audio.delta", { since: speaking, ms: 30_000 });

  gate.shut();
  const shutAt = client.sent.length;
  client.appendAudio(new Uint8Array(3200), { event_id: `held_${label}` });
  void client.send({ type: "session.heartbeat", event_id: `behind_${label}` });
  // The model goes on speaking while the append waits for its VAD...
  await client.waitFor("response.output_audio.delta", { since: shutAt });
  const second = client.sent.length;
  await client.waitFor("response.output_audio.delta", { since: second });
  // ...and the heartbeat, a client frame after the append, waits with it.
  expect(client.sent.slice(shutAt).map((e) => e.type)).not.toContain("session.heartbeat_ack");

  const openedAt = client.sent.length;
  gate.open();
  await client.waitFor("session.heartbeat_ack", { since: openedAt });
  const id = await sessionIdOf(client);
  const commands = await commandsOf(store, id);
  const held = commands.findIndex((c) => c.eventId === `held_${label}`);
  expect(held).toBeGreaterThan(0);
  expect(commands[held + 1]?.eventId).toBe(`behind_${label}`);
  // In the log, model audio that arrived while the append waited was decided before it.
  const log = await store.read(streamOf(id));
  const heldAt = log.findIndex(
    (e) =>
      e.type === "CommandReceived" && (e.data as { command: { eventId?: string } }).command.eventId === `held_${label}`,
  );
  const deliveredBefore = log
    .slice(0, heldAt)
    .filter((e) => e.type === "AudioDelivered" && (e.metadata.at as number) >= (log[heldAt]?.metadata.at as number));
  expect(deliveredBefore.length).toBeGreaterThan(0);
};

/**
 * A session in process whose VAD is gated, its client sending 16 kHz audio; the gate is opened and the session
 * closed after.
 */
const withGatedServer = async (
  body: (client: EngineSession, gate: Gate, store: EventStore) => Promise<void>,
): Promise<void> => {
  const gate = gatedVad();
  const client = await openEngineSession({ vad: gate.wrap });
  try {
    void client.send({ type: "session.update", session: { input_sample_rate_hz: 16000 } });
    await client.waitFor("session.updated", { since: 0 });
    await body(client, gate, client.store);
  } finally {
    gate.open();
    await client.close();
  }
};

describe("the mailbox while an append's VAD is pending (issue 11)", () => {
  it("lets the model's audio go ahead of the append, and keeps the client's later frames behind it", () =>
    withGatedServer((client, gate, store) => expectOutputsToPassAHeldAppend(client, gate, store, "a")));

  it(
    "refuses an append whose VAD fails with server_vad_unavailable, decides what came after it, and goes on",
    () =>
      withGatedServer(async (client, gate, store) => {
        const before = client.sent.length;
        gate.failNext(1);
        client.appendAudio(new Uint8Array(3200), { event_id: "lost_vad" });
        void client.send({ type: "session.update", event_id: "after", session: { instructions: "still here" } });
        const error = await client.waitFor("error", { since: before });
        expect(error.error).toMatchObject({
          type: "server_error",
          code: "server_vad_unavailable",
          event_id: "lost_vad",
        });
        const updated = await client.waitFor("session.updated", { since: before });
        expect(updated.session).toMatchObject({ instructions: "still here" });
        expect(client.sent.slice(before).map((e) => e.type)).toEqual(["error", "session.updated"]);

        // The session goes on, and its appends are still prepared on arrival: the model's audio passes a held one.
        await expectOutputsToPassAHeldAppend(client, gate, store, "b");
        const id = await sessionIdOf(client);
        const commands = await commandsOf(store, id);
        const refused = commands.find((c) => c.eventId === "lost_vad");
        expect(refused).toMatchObject({ type: "invalid", code: "server_vad_unavailable" });
        expect(replayEntries(await store.read(streamOf(id))).divergence).toBeNull();
        expect(client.types()).not.toContain("input_audio_buffer.cleared");
      }),
    60_000,
  );
});
