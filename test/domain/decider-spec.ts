import { expect } from "vitest";
import {
  type Capabilities,
  type Command,
  type DomainEvent,
  decide,
  type ErrorCode,
  evolve,
  type Input,
  type ItemId,
  initialState,
  type PlaybackAck,
  type ResponseId,
  type SessionId,
  type SessionPatch,
  type SessionState,
  type StageOutput,
} from "../../src/domain/index.ts";

/**
 * Given/when/then for the decider (STYLE.md, "Decider tests read as given/when/then"; emmett's
 * deciderSpecification): given these inputs already decided, when this input, then these events, this error, or
 * nothing at all.
 */
export const SESSION_ID = "sess_0123456789abcdef0123456789abcdef" as SessionId;

export const ECHO_CAPABILITIES: Capabilities = {
  implementationLevel: "model_native_duplex",
  chunkPeriodMs: 200,
  supportsBargeIn: true,
  supportsSessionResume: true,
  supportsAudioTruncate: true,
  supportsToolCalls: false,
  supportsVideo: false,
  inputSampleRateHz: 16000,
  outputSampleRateHz: 24000,
};

let clock = 1_000_000;
const at = (): number => {
  clock += 10;
  return clock;
};

export const opened = (capabilities: Capabilities = ECHO_CAPABILITIES): Input => ({
  type: "SessionOpened",
  at: at(),
  data: {
    sessionId: SESSION_ID,
    model: "test-model",
    capabilities,
    resumeTokenSha256: "ab".repeat(32),
    idleTimeoutS: 300,
    nativeDuplex: null,
  },
});
export const command = (c: Command, time = at()): Input => ({
  type: "CommandReceived",
  at: time,
  data: { command: c },
});
export const stage = (output: StageOutput, time = at()): Input => ({
  type: "StageOutputReceived",
  at: time,
  data: { output },
});

/** `ms` of PCM16 at 16 kHz whose VAD frames all have probability `p` (32 ms frames). */
export const append = (ms: number, p: number, eventId: string | null = null): Command => ({
  type: "input_audio_buffer.append",
  eventId,
  audio: new Uint8Array((ms * 16000 * 2) / 1000),
  isSpeech: null,
  vad: Array.from({ length: Math.floor(ms / 32) }, () => p),
  rms: p > 0.5 ? 0.1 : 0,
});

/** One 32 ms frame of PCM16 at 16 kHz per probability, so the VAD clock and the audio clock stay equal. */
export const appendFrames = (probabilities: readonly number[], eventId: string | null = null): Command => ({
  type: "input_audio_buffer.append",
  eventId,
  audio: new Uint8Array(probabilities.length * 32 * 32),
  isSpeech: null,
  vad: [...probabilities],
  rms: 0,
});

/** `ms` of 24 kHz model audio with `text`. */
export const audio = (ms: number, text: string, epoch = 0): StageOutput => ({
  kind: "audio",
  epoch,
  audio: new Uint8Array((ms * 24000 * 2) / 1000),
  transcript: text,
});

/** Client commands, with their `event_id` (null unless given). */
export const update = (patch: SessionPatch, eventId: string | null = null): Command => ({
  type: "session.update",
  eventId,
  patch,
});
export const commit = (eventId: string | null = null, createResponse: boolean | null = null): Command => ({
  type: "input_audio_buffer.commit",
  eventId,
  createResponse,
});
export const clear = (eventId: string | null = null): Command => ({ type: "input_audio_buffer.clear", eventId });
/**
 * `response.create` with instructions of its own: something to respond to, also in a session that heard nothing
 * yet (without any, it is refused with `response_create_without_input`; see `createWithNothing`).
 */
export const create = (metadata: Record<string, unknown> | null = null, eventId: string | null = null): Command => ({
  type: "response.create",
  eventId,
  metadata,
  instructions: RESPONSE_INSTRUCTIONS,
  modalities: null,
});
/** The instructions `create` gives its response. */
export const RESPONSE_INSTRUCTIONS = "Answer the user.";
/** `response.create` with nothing of its own: no instructions, no input, no options. */
export const createWithNothing = (eventId: string | null = null): Command => ({
  type: "response.create",
  eventId,
  metadata: null,
  instructions: null,
  modalities: null,
});
export const cancel = (responseId: string | null = null, eventId: string | null = null): Command => ({
  type: "response.cancel",
  eventId,
  responseId: responseId as ResponseId | null,
});
export const ack = (
  fields: {
    readonly responseId?: string;
    readonly itemId?: string;
    readonly playedMs: number;
    readonly committedMs?: number;
    readonly truncate?: boolean;
  },
  eventId: string | null = null,
): PlaybackAck => ({
  type: "playback.ack",
  eventId,
  responseId: (fields.responseId ?? null) as ResponseId | null,
  itemId: (fields.itemId ?? null) as ItemId | null,
  playedMs: fields.playedMs,
  committedMs: fields.committedMs ?? null,
  truncate: fields.truncate ?? false,
});
export const truncate = (itemId: string, audioEndMs: number, eventId: string | null = null): Command => ({
  type: "conversation.item.truncate",
  eventId,
  itemId: itemId as ItemId,
  contentIndex: 0,
  audioEndMs,
});
export const close = (eventId: string | null = null): Command => ({ type: "session.close", eventId });

/** `T` with every field optional, recursively, and branded ids widened to `string` so tests can write literals. */
export type Loose<T> = T extends ItemId | ResponseId | SessionId
  ? string
  : T extends Uint8Array
    ? T
    : T extends readonly (infer U)[]
      ? readonly Loose<U>[]
      : T extends object
        ? { readonly [K in keyof T]?: Loose<T[K]> }
        : T;

/** An expected event: its type, and any part of its data. */
export type ExpectedEvent = {
  [K in DomainEvent["type"]]: { readonly type: K; readonly data?: Loose<Extract<DomainEvent, { type: K }>["data"]> };
}[DomainEvent["type"]];

export interface Spec {
  readonly state: SessionState;
  when(input: Input): {
    readonly events: DomainEvent[];
    /** The state after folding `events` into `state`. */
    readonly after: SessionState;
    /** The events match `expected`, one for one, in order. */
    then(expected: readonly ExpectedEvent[]): void;
    /** The first events match `expected`, in order; later events are not checked. */
    thenStartsWith(expected: readonly ExpectedEvent[]): void;
    thenTypes(types: readonly DomainEvent["type"][]): void;
    /** Exactly one `RequestRejected` with `code` (and `clientEventId`), and a state deep-equal to the one before. */
    thenRejects(code: ErrorCode, clientEventId?: string | null): void;
    thenNothing(): void;
  };
}

/** Folds `events` into `state`. */
export const fold = (state: SessionState, events: readonly DomainEvent[]): SessionState => events.reduce(evolve, state);

/** Folds `inputs` through decide/evolve and returns the spec of the next input. */
export const given = (...inputs: Input[]): Spec => {
  let state = initialState;
  for (const input of inputs) state = fold(state, decide(state, input));
  return {
    state,
    when(input) {
      const events = decide(state, input);
      const after = fold(state, events);
      return {
        events,
        after,
        // biome-ignore lint/suspicious/noThenProperty: given/when/then; this object is never awaited.
        then: (expected) => {
          expect(events).toHaveLength(expected.length);
          expect(events).toMatchObject(expected);
        },
        thenStartsWith: (expected) => {
          expect(events.length).toBeGreaterThanOrEqual(expected.length);
          expect(events.slice(0, expected.length)).toMatchObject(expected);
        },
        thenTypes: (types) => expect(events.map((e) => e.type)).toEqual(types),
        thenRejects: (code, clientEventId) => {
          expect(events).toHaveLength(1);
          expect(events[0]).toMatchObject({ type: "RequestRejected", data: { code } });
          if (clientEventId !== undefined) expect(events[0]).toMatchObject({ data: { clientEventId } });
          expect(after).toEqual(state);
        },
        thenNothing: () => expect(events).toEqual([]),
      };
    },
  };
};

/** The state after `inputs`. */
export const stateAfter = (...inputs: Input[]): SessionState => given(...inputs).state;
