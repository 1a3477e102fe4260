import { readFile } from "node:fs/promises";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResponseId, SessionId } from "../../src/domain/index.ts";
import { type EventStore, type RecordedEntry, streamOf } from "../../src/engine/index.ts";
import {
  ANSWER_AUDIO_TTL_S,
  answerOf,
  audioIdOf,
  MAX_ANSWER_LOG_ENTRIES,
  parseAudioId,
} from "../../src/server/chat-audio-id.ts";
import { ChatError } from "../../src/server/chat-error.ts";
import { answersOf, type ChatRequest } from "../../src/server/chat-request.ts";
import { WHOLE_LOG_QUEUE, wholeLogReads } from "../../src/server/whole-log-reads.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

/**
 * The audio id of a chat completion's spoken answer (src/server/chat-audio-id.ts, issue 33 part 4): minted from the
 * session and response, resolved from the log of a real request (echo runner, sqlite store), held for
 * `ANSWER_AUDIO_TTL_S` after the response's end and counted against the request's audio budget.
 */
const HEX = "0123456789abcdef0123456789abcdef";

describe("audio ids of chat answers", () => {
  it("names the session and its response, and reads back only what it minted", () => {
    const sessionId = `sess_${HEX}` as SessionId;
    expect(audioIdOf(sessionId, "resp_01234567_3" as ResponseId)).toBe(`audio_${HEX}_3`);
    expect(parseAudioId(`audio_${HEX}_3`)).toEqual({ sessionId, responseId: "resp_01234567_3" });
    for (const id of [
      `audio_${HEX.toUpperCase()}_3`,
      `audio_${HEX.slice(1)}_3`,
      `audio_${HEX}_0`,
      `audio_${HEX}_3 `,
      `audio_${HEX}`,
      "audio_01234567_3",
    ])
      expect(parseAudioId(id)).toBeNull();
  });
});

describe("resolving an answer from its request's log", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let entries: RecordedEntry[];
  let id: string;
  let transcript: string;
  let endedAtMs: number;
  beforeAll(async () => {
    server = await startTestServer();
    const { data, response } = await new OpenAI({
      apiKey: "test",
      baseURL: `http://127.0.0.1:${server.port}/v1`,
      maxRetries: 0,
    }).chat.completions
      .create({
        model: server.model,
        modalities: ["text", "audio"],
        audio: { voice: "alloy", format: "pcm16" },
        // The echo speaks the question back: the answer's audio is real speech.
        messages: [
          {
            role: "user",
            content: [
              {
                type: "input_audio",
                input_audio: {
                  data: (await readFile(sharedAudio("question_16k.wav"))).toString("base64"),
                  format: "wav",
                },
              },
            ],
          },
        ],
      })
      .withResponse();
    id = data.choices[0]?.message.audio?.id ?? "";
    transcript = data.choices[0]?.message.audio?.transcript ?? "";
    entries = await server.store.read(streamOf(response.headers.get("x-duplex-session-id") ?? ""));
    endedAtMs = entries.find((e) => e.type === "ResponseEnded")?.metadata.at ?? Number.NaN;
  });
  afterAll(async () => {
    await server.stop();
  });
  const at = "messages.1.audio.id";
  const resolve = (nowMs: number, budget = { maxS: 300, usedS: 0 }, inputRateHz = 24000, log = entries) =>
    answerOf(id, log, { at, nowMs, inputRateHz, budget });
  const refusal = (f: () => unknown) => {
    try {
      f();
    } catch (error) {
      expect(error).toBeInstanceOf(ChatError);
      const { status, code, param, message } = error as ChatError;
      return { status, code, param, message };
    }
    throw new Error("not refused");
  };

  it("gives the answer's transcript and audio, resampled to the session's input rate", () => {
    const answer = resolve(endedAtMs);
    expect(answer.transcript).toBe(transcript);
    expect(answer.transcript).toMatch(/^I heard \d\.\d seconds of speech/);
    expect(answer.audio.byteLength).toBe(Math.round(answer.seconds * 24000) * 2);
    expect(answer.audio.some((b) => b !== 0)).toBe(true);
    const at16k = resolve(endedAtMs, undefined, 16000);
    expect(Math.abs(at16k.audio.byteLength / 2 - answer.seconds * 16000)).toBeLessThanOrEqual(1);
  });

  it(`holds it until ${ANSWER_AUDIO_TTL_S} s after the response's end, then refuses it as expired, naming the field`, () => {
    const lastS = Math.floor(endedAtMs / 1000) + ANSWER_AUDIO_TTL_S;
    expect(resolve(lastS * 1000 + 999).transcript).toBe(transcript);
    expect(refusal(() => resolve((lastS + 1) * 1000))).toEqual({
      status: 400,
      code: "bad_event",
      param: at,
      message: `${at}: ${id} expired at ${new Date(lastS * 1000).toISOString()} (an answer's audio is held ${ANSWER_AUDIO_TTL_S} s after it)`,
    });
  });

  it("counts the answer's audio against the request's budget, and refuses it past the budget with bad_audio", () => {
    const budget = { maxS: 300, usedS: 1 };
    const answer = resolve(endedAtMs, budget);
    expect(budget.usedS).toBeCloseTo(1 + answer.seconds, 9);
    expect(refusal(() => resolve(endedAtMs, { maxS: 2, usedS: 2 }))).toEqual({
      status: 400,
      code: "bad_audio",
      param: at,
      message: `${at}: the answer's ${answer.seconds.toFixed(1)} s of audio brings the request to ${(2 + answer.seconds).toFixed(1)} s; a request carries at most 2 s (limits.request_audio_s)`,
    });
  });

  it("refuses a response that ended cancelled, and a log too long to look the answer up in", () => {
    const cancelled = entries.map((e) =>
      e.type === "ResponseEnded" ? { ...e, data: { ...(e.data as object), status: "cancelled" } } : e,
    );
    expect(refusal(() => resolve(endedAtMs, undefined, 24000, cancelled))).toMatchObject({
      code: "bad_event",
      param: at,
      message: expect.stringContaining("names a response that ended cancelled: it gave no answer"),
    });
    const long = Array.from({ length: MAX_ANSWER_LOG_ENTRIES }, () => entries[0] as RecordedEntry);
    expect(refusal(() => resolve(endedAtMs, undefined, 24000, long))).toMatchObject({
      code: "bad_event",
      message: expect.stringContaining(`holds ${MAX_ANSWER_LOG_ENTRIES} entries or more`),
    });
  });
});

describe("an id's lookup is bounded like every whole-log read", () => {
  const request = (id: string) =>
    ({
      model: "m",
      messages: [
        { role: "user", content: "Hello" },
        { role: "assistant", audio: { id } },
      ],
    }) as unknown as ChatRequest;
  const budget = () => ({ maxS: 300, usedS: 0 });
  const store = { read: async () => [] } as unknown as EventStore;

  it("waits for a place among the server's whole-log reads, and is refused with 429 once their queue is full", async () => {
    const reads = wholeLogReads(1);
    let free: () => void = () => undefined;
    const held = reads.run(() => new Promise<void>((resolve) => (free = resolve)));
    const queued = Array.from({ length: WHOLE_LOG_QUEUE }, () => reads.run(async () => "queued"));
    const refused = await answersOf(request(`audio_${HEX}_1`), store, 16000, budget(), Date.now(), reads).catch(
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(ChatError);
    expect(refused).toMatchObject({ status: 429, code: "resource_exhausted" });
    free();
    await held;
    expect((await Promise.all(queued)).map((q) => q?.value)).toEqual(Array(WHOLE_LOG_QUEUE).fill("queued"));
    // With a place free, the lookup runs (and finds no such session).
    const unknown = await answersOf(request(`audio_${HEX}_1`), store, 16000, budget(), Date.now(), reads).catch(
      (e: unknown) => e,
    );
    expect(unknown).toMatchObject({ status: 400, code: "bad_event" });
  });

  it("echoes at most the first 64 characters of a malformed id", async () => {
    const huge = `x${"y".repeat(5_000_000)}`;
    const refused = (await answersOf(request(huge), store, 16000, budget(), Date.now(), wholeLogReads()).catch(
      (e: unknown) => e,
    )) as ChatError;
    expect(refused).toBeInstanceOf(ChatError);
    expect(JSON.stringify(refused.body()).length).toBeLessThan(1000);
    expect(refused.message).toContain("(5000001 characters)");
  });
});
