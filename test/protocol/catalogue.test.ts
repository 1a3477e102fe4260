import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  type DomainEvent,
  type DomainEventType,
  defaultSessionConfig,
  type ItemId,
  type ResponseId,
  type SessionId,
} from "../../src/domain/index.ts";
import {
  CLIENT_EVENT_ALIASES,
  CLIENT_EVENTS,
  clientEventSchemas,
  decodeClientFrame,
  renderServerEvents,
  renderWireDoc,
  resyncRequired,
  SERVER_EVENTS,
  sessionReplaced,
} from "../../src/protocol/index.ts";
import { ECHO_CAPABILITIES } from "../domain/decider-spec.ts";

/** The event catalogue (src/protocol/catalogue.ts) against docs/wire.md, the decoder and the renderer, both ways. */
const SESSION = "sess_0123456789abcdef0123456789abcdef" as SessionId;
const R = "resp_01234567_1" as ResponseId;
const I = "item_resp_01234567_1" as ItemId;
const U = "item_01234567_u1" as ItemId;
const ledger = { generatedMs: 1000, sentMs: 1000, playedMs: 400, committedMs: 400 };
const call = { itemId: `${I}_fc1` as ItemId, callId: "call_1", name: "get_weather", arguments: '{"city":"Lisbon"}' };
const ended = (status: "completed" | "cancelled" | "incomplete"): DomainEvent => ({
  type: "ResponseEnded",
  data: {
    responseId: R,
    itemId: I,
    previousItemId: U,
    status,
    reason: status === "cancelled" ? "client_cancelled" : status === "incomplete" ? "max_output_tokens" : null,
    transcript: "hello",
    spoke: true,
    audioSent: true,
    metadata: null,
    playback: ledger,
    error: null,
    text: "hello",
    functionCalls: [call],
  },
});
const history = {
  id: U,
  type: "message",
  role: "user",
  text: "hi",
  audioMs: 0,
  status: "completed",
  audio: false,
} as const;

/** One of every domain event; the Record type makes a new event type a compile error here until it is added. */
const SAMPLES: Record<DomainEventType, DomainEvent[]> = {
  SessionCreated: [
    {
      type: "SessionCreated",
      data: {
        sessionId: SESSION,
        config: defaultSessionConfig("m", ECHO_CAPABILITIES),
        capabilities: ECHO_CAPABILITIES,
        attachmentGeneration: 1,
        resumeTokenSha256: "ab".repeat(32),
      },
    },
  ],
  SessionConfigured: [{ type: "SessionConfigured", data: { config: defaultSessionConfig("m", ECHO_CAPABILITIES) } }],
  RequestRejected: [
    {
      type: "RequestRejected",
      data: { code: "bad_event", message: "m", param: null, clientEventId: "e", commandType: "x" },
    },
  ],
  AudioBuffered: [
    {
      type: "AudioBuffered",
      data: {
        durationMs: 100,
        bytes: 3200,
        clockMs: 100,
        vadFrames: 3,
        endpointer: { phase: "silence", runStartMs: null, silenceStartMs: null, floorMs: 0 },
      },
    },
  ],
  SpeechStarted: [{ type: "SpeechStarted", data: { itemId: U, audioStartMs: 0, announced: true } }],
  SpeechAnnounced: [{ type: "SpeechAnnounced", data: { itemId: U, audioStartMs: 0 } }],
  SpeechStopped: [{ type: "SpeechStopped", data: { itemId: U, audioEndMs: 900, announced: true } }],
  InputCleared: [{ type: "InputCleared", data: { clockMs: 0 } }],
  MessageStarted: [
    { type: "MessageStarted", data: { responseId: R, itemId: I, previousItemId: U, outputIndex: 0 } },
    {
      type: "MessageStarted",
      data: { responseId: R, itemId: I, previousItemId: null, outputIndex: 1, outOfBand: true },
    },
  ],
  DeferredResponsesDropped: [{ type: "DeferredResponsesDropped", data: { itemIds: [U], reason: "barge_in" } }],
  DeferredResponseRefused: [
    { type: "DeferredResponseRefused", data: { itemId: U, code: "input_backpressure", message: "m" } },
  ],
  InputCommitted: [
    {
      type: "InputCommitted",
      data: {
        itemId: U,
        previousItemId: null,
        audioMs: 900,
        clockMs: 900,
        historyLength: 1,
        resetEndpointer: true,
        text: "",
      },
    },
  ],
  ResponseStarted: [
    {
      type: "ResponseStarted",
      data: {
        responseId: R,
        itemId: I,
        previousItemId: U,
        turnId: 1,
        metadata: null,
        source: "client",
        modalities: ["audio"],
        instructions: null,
      },
    },
  ],
  ResponseSpoke: [{ type: "ResponseSpoke", data: { responseId: R, itemId: I } }],
  AudioDelivered: [
    {
      type: "AudioDelivered",
      data: {
        responseId: R,
        itemId: I,
        audio: new Uint8Array(480),
        sampleRateHz: 24000,
        transcript: "he",
        durationMs: 10,
        mark: { textChars: 2, audioEndMs: 10 },
        playback: ledger,
        firstDeltaAt: 0,
      },
    },
  ],
  ResponseEnded: [ended("completed"), ended("cancelled"), ended("incomplete")],
  TextStarted: [{ type: "TextStarted", data: { responseId: R, itemId: I } }],
  TextDelivered: [{ type: "TextDelivered", data: { responseId: R, itemId: I, delta: "hi" } }],
  FunctionCallDelivered: [
    { type: "FunctionCallDelivered", data: { responseId: R, outputIndex: 1, previousItemId: I, call } },
  ],
  MalformedFunctionCall: [{ type: "MalformedFunctionCall", data: { callId: null, name: null, arguments: "{" } }],
  InputTranscribed: [{ type: "InputTranscribed", data: { itemId: U, transcript: "hi" } }],
  InputTranscriptionFailed: [
    { type: "InputTranscriptionFailed", data: { itemId: U, code: "upstream_commit_refused", message: "refused" } },
  ],
  InputTextAppended: [{ type: "InputTextAppended", data: { text: "hi" } }],
  ItemCreated: [{ type: "ItemCreated", data: { item: history, previousItemId: null } }],
  ItemRetrieved: [{ type: "ItemRetrieved", data: { item: history } }],
  ItemDeleted: [{ type: "ItemDeleted", data: { itemId: U } }],
  OutputAudioCleared: [{ type: "OutputAudioCleared", data: { responseId: null } }],
  OverlapDecided: [
    { type: "OverlapDecided", data: { action: "drop", reason: "r", policy: "listen_only", overlapMs: 0 } },
  ],
  RuntimeControlReported: [{ type: "RuntimeControlReported", data: { signal: "x", supported: false, detail: "d" } }],
  TurnSignalled: [{ type: "TurnSignalled", data: { event: "barge_in", source: "turn.signal", turnState: "barge_in" } }],
  EventsAcknowledged: [{ type: "EventsAcknowledged", data: { seq: 1 } }],
  ModelListened: [{ type: "ModelListened", data: { reason: "model_listen" } }],
  EpochAdvanced: [{ type: "EpochAdvanced", data: { epoch: 1, reason: "barge_in" } }],
  PlaybackAcknowledged: [
    {
      type: "PlaybackAcknowledged",
      data: {
        responseId: R,
        itemId: I,
        playedMs: 400,
        committedMs: 400,
        truncate: false,
        playback: ledger,
        historyCommitted: false,
      },
    },
  ],
  ItemTruncated: [{ type: "ItemTruncated", data: { itemId: I, contentIndex: 0, audioEndMs: 400 } }],
  HistoryCommitted: [{ type: "HistoryCommitted", data: { item: history, committedMs: null } }],
  HeartbeatAcknowledged: [{ type: "HeartbeatAcknowledged", data: {} }],
  RunnerFailed: [
    {
      type: "RunnerFailed",
      data: { operation: "submit", code: "runtime_data_plane_stream_failed", message: "the runner threw" },
    },
  ],
  SessionClosed: [
    { type: "SessionClosed", data: { reason: "session_close" } },
    { type: "SessionClosed", data: { reason: "runner_failed" } },
    { type: "SessionClosed", data: { reason: "idle_ttl_expired" } },
  ],
  SessionResumed: [
    {
      type: "SessionResumed",
      data: { attachmentGeneration: 2, resumeTokenSha256: "cd".repeat(32), lastReceivedSeq: 1 },
    },
  ],
  SessionDetached: [{ type: "SessionDetached", data: { attachmentGeneration: 1 } }],
  UtteranceResubmitted: [{ type: "UtteranceResubmitted", data: { audioStartMs: 0, audioEndMs: 1500 } }],
};

const ctx = { sessionId: SESSION, capabilities: ECHO_CAPABILITIES, epoch: 0, turnId: 1 };

describe("event catalogue", () => {
  it("lists 21 client and 44 server events, each once", () => {
    expect(CLIENT_EVENTS).toHaveLength(21);
    expect(SERVER_EVENTS).toHaveLength(44);
    expect(new Set(CLIENT_EVENTS.map((e) => e.type)).size).toBe(21);
    expect(new Set(SERVER_EVENTS.map((e) => e.type)).size).toBe(44);
  });

  it("docs/wire.md is the table rendered (npm run docs:wire)", () => {
    expect(readFileSync("docs/wire.md", "utf8")).toBe(renderWireDoc());
  });

  it("the codec decodes exactly the client events and aliases of the table", () => {
    const listed = new Set(CLIENT_EVENTS.flatMap((e) => [e.type, ...(e.aliases ?? [])]));
    const decoded = new Set([...Object.keys(clientEventSchemas), ...Object.keys(CLIENT_EVENT_ALIASES)]);
    expect([...decoded].sort()).toEqual([...listed].sort());
    for (const type of listed) {
      const frame = decodeClientFrame(JSON.stringify({ type, event_id: "e" }), 30, { inputRateHz: 24000 });
      expect(frame.type === "invalid" ? frame.code : "ok", type).not.toBe("unknown_event");
    }
  });

  it("the renderer (and the socket's own events) produce exactly the server events of the table", () => {
    const rendered = Object.values(SAMPLES)
      .flat()
      .flatMap((event) => renderServerEvents(ctx, event).map((body) => body.type));
    const socket = [sessionReplaced(SESSION, 1), resyncRequired(SESSION, "journal_gap")].map((j) => JSON.parse(j).type);
    expect([...new Set([...rendered, ...socket])].sort()).toEqual(SERVER_EVENTS.map((e) => e.type).sort());
  });

  it("every rendered server event has the fields the table lists", () => {
    const bodies = Object.values(SAMPLES)
      .flat()
      .flatMap((event) => renderServerEvents(ctx, event));
    for (const entry of SERVER_EVENTS) {
      const body = bodies.find((b) => b.type === entry.type);
      if (body === undefined) continue;
      for (const field of entry.fields) expect(body, `${entry.type}.${field}`).toHaveProperty(field);
    }
  });
});
