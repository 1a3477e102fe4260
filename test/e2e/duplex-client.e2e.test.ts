import { afterEach, describe, expect, it } from "vitest";
import { DuplexClient, DuplexConnectionError, DuplexSessionClosedError } from "../../src/client/index.ts";
import { foldLog, streamOf } from "../../src/engine/index.ts";
import { pcm16ToBytes, readWavFile } from "../../src/infra/audio/index.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { expectDeliveredAsLogged } from "../support/delivery.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * DuplexClient against a real server over real sockets (reference/realtime-duplex-api.md, "Reconnect and resume";
 * BEHAVIOUR.md, "Resume"): a dropped connection is resumed by the client itself, and what it delivers is the
 * session's log, once and in order.
 */
const QUICK = { attempts: 5, baseDelayMs: 20, maxDelayMs: 200 };

const question = async (): Promise<Uint8Array> =>
  pcm16ToBytes((await readWavFile(sharedAudio("question_16k.wav"))).samples);

describe("DuplexClient on a real server", () => {
  let server: Awaited<ReturnType<typeof startTestServer>> | null = null;
  afterEach(async () => {
    await server?.stop();
    server = null;
  });

  it("resumes a connection dropped mid-response by itself: every event once, in order, and the response completes with its audio", async () => {
    server = await startTestServer();
    const client = await DuplexClient.connect(server.url, {
      session: { input_sample_rate_hz: 16000 },
      reconnect: QUICK,
      ackIntervalMs: 100,
    });
    await client.streamAudio(await question(), { bytesPerSecond: 32_000, realtime: false });
    client.appendAudio(new Uint8Array(32_000)); // a second of silence ends the utterance
    const handle = await client.nextResponse(20_000);
    await client.events.waitFor("response.output_audio.delta", { since: 0, timeoutMs: 20_000 });
    expect(handle.phase).toBe("streaming");
    client.dropConnection();

    const result = await handle.done;
    expect(result.status).toBe("completed");
    expect(client.resumes).toBe(1);
    expect(client.attachmentGeneration).toBe(2);
    await client.close();
    expect(await client.closed).toBeNull();

    const entries = await server.store.read(streamOf(client.sessionId));
    const delivered = client.events.events();
    const n = expectDeliveredAsLogged(delivered, entries);
    expect(delivered.at(-1)?.type).toBe("session.closed");
    expect(client.lastReceivedSeq).toBe(n);
    // The handle's audio is the log's audio of that response, byte for byte: nothing twice, nothing missing.
    const logged = Buffer.concat(
      foldLog(entries)
        .replay.map((e) => JSON.parse(e.json) as { type: string; response_id?: string; delta?: string })
        .filter((e) => e.type === "response.output_audio.delta" && e.response_id === result.responseId)
        .map((e) => Buffer.from(String(e.delta), "base64")),
    );
    expect(logged.length).toBeGreaterThan(24_000 * 2 * 0.5);
    expect(Buffer.from(result.audio).equals(logged)).toBe(true);
    expect(result.transcript).toMatch(/^I heard \d\.\d seconds of speech/);
    const replay = replayEntries(entries);
    expect(replay.divergence).toBeNull();
    expect(replay.ok).toBe(true);
  });

  it("a response.create in the turn lane returns a handle that resolves with the answer's audio, transcript and end", async () => {
    server = await startTestServer({ session_mode: "turn" });
    const client = await DuplexClient.connect(server.url, {
      session: { input_sample_rate_hz: 16000 },
      reconnect: QUICK,
    });
    await client.streamAudio(await question(), { bytesPerSecond: 32_000, realtime: false });
    client.commit();
    const handle = client.createResponse();
    const result = await handle.done;
    expect(result).toMatchObject({ status: "completed", sampleRateHz: 24_000 });
    expect(result.audioMs).toBeGreaterThan(500);
    expect(Buffer.from(result.audio).equals(client.events.audioBytes(result.responseId))).toBe(true);
    // A second create while none is active works; one while it streams is refused, with the server's code.
    const second = client.createResponse();
    const refused = client.createResponse();
    await expect(refused.done).rejects.toMatchObject({ code: "response_already_active" });
    expect((await second.done).status).toBe("completed");
    expect(client.responses).toEqual([handle, second]);
    await client.close();
  });

  it("says what to do when nothing listens at the URL, over a real socket", async () => {
    const failure = await DuplexClient.connect("ws://127.0.0.1:1/v1/realtime").catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(DuplexConnectionError);
    expect(failure).toMatchObject({
      code: "connect_failed",
      message: "nothing listens at 127.0.0.1:1: start the server (npm start) or pass --url",
    });
  });

  it("ends with session_resume_expired, and tries no more, when the server let the session go before the resume", async () => {
    server = await startTestServer({ duplex_session: { disconnect_grace_s: 0.2 } });
    const client = await DuplexClient.connect(server.url, {
      reconnect: { attempts: 3, baseDelayMs: 1500, maxDelayMs: 1500, jitter: false },
    });
    client.send({ type: "session.update", session: {} });
    await client.events.waitFor("session.updated", { since: 0 });
    client.dropConnection();
    const end = await client.closed;
    expect(end).toBeInstanceOf(DuplexSessionClosedError);
    expect(end?.code).toBe("session_resume_expired");
    expect(client.phase).toBe("closed");
    expect(client.events.types().at(-1)).toBe("error");
    expect(client.events.count("connection.resumed")).toBe(0);
  });
});
