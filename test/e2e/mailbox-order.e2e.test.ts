import { describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import type { VadModel } from "../../src/engine/ports/vad.ts";
import { readWavFile } from "../../src/infra/audio/index.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * The real Silero VAD with a gate: while it is shut, every stream's `process` waits (in call order) before it
 * reaches the model, as a VAD thread busy with a long batch would.
 */
const gatedVad = () => {
  let open: Promise<void> = Promise.resolve();
  let release = (): void => undefined;
  return {
    shut(): void {
      open = new Promise((resolve) => {
        release = resolve;
      });
    },
    open(): void {
      release();
    },
    wrap: (vad: VadModel): VadModel => ({
      sampleRate: vad.sampleRate,
      frameSamples: vad.frameSamples,
      close: () => vad.close(),
      createStream() {
        const stream = vad.createStream();
        return {
          async process(samples) {
            await open;
            return stream.process(samples);
          },
          reset: () => stream.reset(),
          close: () => stream.close(),
        };
      },
    }),
  };
};

describe("the mailbox while an append's VAD is pending (issue 11)", () => {
  it("lets the model's audio go ahead of the append, and keeps the client's later frames behind it", async () => {
    const gate = gatedVad();
    const server = await startTestServer({}, { wrapVad: gate.wrap });
    try {
      const client = await RealtimeClient.connect(server.url);
      client.send({ type: "session.update", session: { input_sample_rate_hz: 16000 } });
      await client.waitFor("session.updated", { since: 0 });
      // 11 s of speech, then silence: the echo answers the utterance with 11 s of audio, 4 times faster than real time.
      client.appendSamples((await readWavFile(sharedAudio("jfk_16k.wav"))).samples, {
        sampleRateHz: 16000,
        tailMs: 1500,
      });
      await client.waitFor("response.output_audio.delta", { since: 0, timeoutMs: 30_000 });

      gate.shut();
      const shutAt = client.received.length;
      client.appendAudio(new Uint8Array(3200), { event_id: "held" });
      client.send({ type: "session.heartbeat", event_id: "behind" });
      // The model goes on speaking while the append waits for its VAD...
      await client.waitFor("response.output_audio.delta", { since: shutAt });
      const second = client.received.length;
      await client.waitFor("response.output_audio.delta", { since: second });
      // ...and the heartbeat, a client frame after the append, waits with it.
      expect(client.received.slice(shutAt).map((r) => r.event.type)).not.toContain("session.heartbeat_ack");

      const openedAt = client.received.length;
      gate.open();
      await client.waitFor("session.heartbeat_ack", { since: openedAt });
      const log = await server.store.read(
        `session-${String(((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id)}`,
      );
      const commands = log
        .filter((e) => e.type === "CommandReceived")
        .map((e) => (e.data as { command: { type: string; eventId?: string } }).command);
      const held = commands.findIndex((c) => c.eventId === "held");
      const behind = commands.findIndex((c) => c.eventId === "behind");
      expect(held).toBeGreaterThan(0);
      expect(behind).toBe(held + 1);
      // In the log, model audio that arrived while the append waited was decided before it.
      const heldAt = log.findIndex(
        (e) => e.type === "CommandReceived" && (e.data as { command: { eventId?: string } }).command.eventId === "held",
      );
      const deliveredBefore = log
        .slice(0, heldAt)
        .filter(
          (e) => e.type === "AudioDelivered" && (e.metadata.at as number) >= (log[heldAt]?.metadata.at as number),
        );
      expect(deliveredBefore.length).toBeGreaterThan(0);
      await client.close();
    } finally {
      gate.open();
      await server.stop();
    }
  });
});
