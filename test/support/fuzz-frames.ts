import fc from "fast-check";
import { CLIENT_EVENT_ALIASES, CLIENT_EVENTS } from "../../src/protocol/index.ts";

/**
 * Generated and mutated client frames for the fuzz guard (issue 10, part 9): valid frames of each of the 21 client
 * event types, the same frames mutated (keys removed or retyped, values replaced, the type or the event_id changed,
 * the text cut or spliced), frames that are bad by construction, binary frames, text that is not JSON, very deep
 * JSON and very large frames. A frame is generated as a small description and only materialized (given its
 * event_id and its bytes) when it is sent, so a 15 MiB frame costs nothing until then and a failure prints short.
 */

/** A change to a frame's JSON object, or to its text once serialized. */
export type Mutation =
  | { readonly op: "delete"; readonly path: readonly number[] }
  | { readonly op: "set"; readonly path: readonly number[]; readonly value: unknown }
  | { readonly op: "add"; readonly key: string; readonly value: unknown }
  | { readonly op: "retype"; readonly type: unknown }
  | { readonly op: "event_id"; readonly value: unknown }
  | { readonly op: "cut"; readonly at: number }
  | { readonly op: "splice"; readonly at: number; readonly remove: number; readonly insert: string }
  | { readonly op: "wrap"; readonly how: "array" | "twice" | "bom" | "spaces" };

/** Shapes of deep JSON: refused at any depth (`array`, `unknown`, `typed`, `unclosed`) or accepted (`payload`). */
export type DeepShape = "array" | "unknown" | "typed" | "unclosed" | "payload";

/**
 * One generated frame. `must` says what the server has to do with it, whatever the session's state: `reject` (any
 * code of the table), a given code, or `any` (a frame that may well be valid).
 */
export type FrameSpec =
  | {
      readonly kind: "json";
      readonly type: string;
      readonly fields: Readonly<Record<string, unknown>>;
      readonly mutations: readonly Mutation[];
      readonly must: "any" | "reject";
    }
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "binary"; readonly type: string; readonly fields: Readonly<Record<string, unknown>> }
  | { readonly kind: "noise"; readonly bytes: Uint8Array }
  | { readonly kind: "deep"; readonly shape: DeepShape; readonly depth: number }
  | { readonly kind: "large"; readonly bytes: number }
  | { readonly kind: "oversize"; readonly binary: boolean };

/** Deep turn.signal payloads go this deep: accepted up to MAX_JSON_DEPTH levels of frame, refused beyond. */
export const DEEP_PAYLOAD_MAX = 400;
/** Deep JSON that the codec refuses goes this deep. */
export const REFUSED_DEPTH_MAX = 100_000;

/** session.close and its aliases. */
export const CLOSE_TYPES: ReadonlySet<string> = new Set([
  "session.close",
  ...Object.entries(CLIENT_EVENT_ALIASES).flatMap(([alias, type]) => (type === "session.close" ? [alias] : [])),
]);
/** Every type and alias a client may send, except those of session.close (a valid one ends the session). */
const SENDABLE_TYPES = [...CLIENT_EVENTS.map((e) => e.type), ...Object.keys(CLIENT_EVENT_ALIASES)].filter(
  (t) => !CLOSE_TYPES.has(t),
);

/** Item and response ids: `@T` becomes the session's tag, so some name real items. */
// `item_@LIVE`: an item the session holds when the batch is made (see `materialize`), so that frames naming an
// existing item are accepted often enough in every run, whatever the seed.
const itemId = fc.oneof(
  fc.constantFrom("item_nope", "", "item_@T_u1", "item_@T_u2", "item_@LIVE"),
  fc.nat({ max: 6 }).map((n) => `item_resp_@T_${n}`),
);
const responseId = fc.oneof(
  fc.constantFrom("resp_nope", ""),
  fc.nat({ max: 6 }).map((n) => `resp_@T_${n}`),
);
const pcm16Base64 = fc
  .uint8Array({ maxLength: 480 })
  .map((b) => Buffer.from(b.subarray(0, b.length - (b.length % 2))).toString("base64"));
const modalities = fc.constantFrom(["audio"], ["text"], ["audio", "text"]);
const smallJson = fc.jsonValue({ maxDepth: 2 });
const opt = { requiredKeys: [] as never[] };

/** A valid frame's payload (besides `type` and `event_id`) for each of the 21 client event types. */
export const VALID_FIELDS: Readonly<Record<string, fc.Arbitrary<Record<string, unknown>>>> = {
  "session.update": fc.record({
    session: fc.record(
      {
        instructions: fc.string({ maxLength: 30 }),
        voice: fc.constantFrom("alloy", "verse", null),
        output_modalities: modalities,
        turn_detection: fc.constantFrom(
          null,
          { type: "server_vad" },
          { type: "server_vad", silence_duration_ms: 200, create_response: false },
          { type: "semantic_vad" },
        ),
        temperature: fc.double({ min: 0, max: 2, noNaN: true }),
        input_audio_format: fc.constantFrom("pcm16", "g711_ulaw", "g711_alaw", "audio/mpeg"),
        max_response_output_tokens: fc.oneof(fc.integer({ min: 1, max: 4096 }), fc.constant("inf")),
        overlap_policy: fc.constantFrom("listen_only", "barge_in_on_speech"),
        playback_commit_policy: fc.constantFrom("ack_only", "commit_all_on_done"),
        input_audio_transcription: fc.constantFrom(null, { model: "whisper-1" }),
      },
      opt,
    ),
  }),
  "session.heartbeat": fc.constant({}),
  "session.event_ack": fc.record({ server_event_seq: fc.nat({ max: 200 }) }),
  // Made invalid before it is sent (see `harmless`): a valid session.close ends the session.
  "session.close": fc.constant({}),
  "session.resume": fc.record(
    {
      session_id: fc.constantFrom("sess_@S", "sess_00000000000000000000000000000000"),
      resume_token: fc.string({ minLength: 1, maxLength: 44 }),
      last_received_server_event_seq: fc.nat({ max: 100 }),
    },
    { requiredKeys: ["session_id", "resume_token"] },
  ),
  "input_audio_buffer.append": fc.record(
    { audio: pcm16Base64, is_speech: fc.boolean(), sample_rate_hz: fc.constantFrom(16000, 24000, 8000) },
    { requiredKeys: ["audio"] },
  ),
  "input_audio_buffer.commit": fc.record({ response_create: fc.boolean(), final: fc.boolean() }, opt),
  "input.commit": fc.record({ final: fc.boolean(), response_create: fc.boolean() }, opt),
  "input_audio_buffer.clear": fc.constant({}),
  "input.cancel": fc.constant({}),
  "input.text.append": fc.record({ text: fc.string({ maxLength: 40 }) }),
  "conversation.item.create": fc.record({
    item: fc.record({
      type: fc.constant("message"),
      role: fc.constantFrom("user", "assistant", "system"),
      content: fc.array(
        fc.record({ type: fc.constantFrom("input_text", "text"), text: fc.string({ maxLength: 40 }) }),
        {
          minLength: 1,
          maxLength: 2,
        },
      ),
    }),
  }),
  "conversation.item.retrieve": fc.record({ item_id: itemId }),
  "conversation.item.delete": fc.record({ item_id: itemId }),
  "conversation.item.truncate": fc.record(
    { item_id: itemId, content_index: fc.nat({ max: 2 }), audio_end_ms: fc.nat({ max: 5000 }) },
    { requiredKeys: ["item_id", "audio_end_ms"] },
  ),
  "response.create": fc.record(
    {
      response: fc.record(
        {
          output_modalities: modalities,
          instructions: fc.string({ maxLength: 20 }),
          conversation: fc.constantFrom("auto", "none"),
          metadata: fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 }),
        },
        opt,
      ),
    },
    opt,
  ),
  "response.cancel": fc.record({ response_id: responseId }, opt),
  "output_audio_buffer.clear": fc.constant({}),
  barge_in: fc.constant({}),
  "turn.signal": fc.record(
    {
      event: fc.constantFrom("barge_in", "listen", "speak"),
      payload: fc.option(fc.dictionary(fc.string({ maxLength: 8 }), smallJson, { maxKeys: 3 }), { nil: null }),
    },
    { requiredKeys: ["event"] },
  ),
  "playback.ack": fc.record(
    {
      played_ms: fc.nat({ max: 3000 }),
      committed_ms: fc.nat({ max: 3000 }),
      truncate: fc.boolean(),
      response_id: responseId,
      item_id: itemId,
    },
    { requiredKeys: ["played_ms"] },
  ),
};

/** A payload field that is wrong for its type whatever the session's state, for each of the 21 types. */
const BAD_FIELDS: Readonly<Record<string, fc.Arbitrary<Record<string, unknown>>>> = {
  "session.update": fc.oneof(
    fc.record({ session: fc.constantFrom(5, "x", [], true) }),
    fc.record({ session: fc.record({ turn_detection: fc.constant({ type: 42 }) }) }),
    fc.record({ session: fc.record({ output_modalities: fc.constantFrom([], ["smell"], ["audio", "audio"]) }) }),
    fc.record({ session: fc.record({ voice: fc.constant(""), temperature: fc.constant("hot") }) }),
    fc.record({ session: fc.record({ max_response_output_tokens: fc.constantFrom(0, 5000, "lots") }) }),
  ),
  "session.heartbeat": fc.constant({}),
  "session.event_ack": fc.record({ server_event_seq: fc.constantFrom(-1, 1.5, "3", null, 1e12) }),
  "session.close": fc.constant({}),
  // Refused on a socket that holds a session, valid or not.
  "session.resume": VALID_FIELDS["session.resume"] as fc.Arbitrary<Record<string, unknown>>,
  "input_audio_buffer.append": fc.oneof(
    fc.record({ audio: fc.constantFrom(5, null, "@@@@", "AAA", "A===") }),
    fc.record({ audio: fc.constant("AAAA"), sample_rate_hz: fc.constantFrom(3, -1, 44_101) }),
    fc.record({ audio: fc.constant("AAAA"), format: fc.constantFrom("audio/mpeg", "opus") }),
  ),
  "input_audio_buffer.commit": fc.record({ response_create: fc.constantFrom("yes", 1, null) }),
  "input.commit": fc.record({ final: fc.constantFrom("yes", 0, []) }),
  "input_audio_buffer.clear": fc.constant({}),
  "input.cancel": fc.constant({}),
  "input.text.append": fc.record({ text: fc.constantFrom(7, null, ["a"], { t: "a" }) }),
  "conversation.item.create": fc.oneof(
    fc.constant({}),
    fc.record({ item: fc.constantFrom({ type: "message", content: "hi" }, { type: "picture" }, "item", null) }),
  ),
  "conversation.item.retrieve": fc.record({ item_id: fc.constantFrom("", 5, null, "item_nope") }),
  "conversation.item.delete": fc.record({ item_id: fc.constantFrom("", 5, null, "item_nope") }),
  "conversation.item.truncate": fc.record({ item_id: itemId, audio_end_ms: fc.constantFrom(-5, "5", null) }),
  "response.create": fc.record({
    response: fc.constantFrom({ modalities: ["smell"] }, { conversation: "maybe" }, { temperature: "x" }, 5, "r"),
  }),
  "response.cancel": fc.record({ response_id: fc.constantFrom(5, null, ["resp"], {}) }),
  "output_audio_buffer.clear": fc.constant({}),
  barge_in: fc.constant({}),
  "turn.signal": fc.oneof(
    fc.record({ event: fc.constantFrom("", 5, null) }),
    fc.record({ event: fc.constant("barge_in"), payload: fc.constantFrom("p", 5, []) }),
  ),
  "playback.ack": fc.oneof(fc.constant({}), fc.record({ played_ms: fc.constantFrom(-1, "soon", null) })),
};

/** An event_id a schema refuses (not a string, or over 512 characters); echoed as the error's when it is a string. */
const badEventId = fc.constantFrom(5, null, true, { id: "x" }, ["x"], "x".repeat(513), "é".repeat(600));

const TYPES = CLIENT_EVENTS.map((e) => e.type);
/** Types whose every frame is refused once one of their payload fields is bad (some have no payload field). */
const NO_PAYLOAD = new Set(["session.heartbeat", "session.close", "input_audio_buffer.clear", "input.cancel"]);
NO_PAYLOAD.add("output_audio_buffer.clear").add("barge_in");

const jsonValue = fc.oneof(
  smallJson,
  fc.constantFrom(null, -1, 0, 1.5, 1e300, -1e300, "", "x".repeat(600), [], {}, true, "AAA=", "\u0000", "\ud800"),
);

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant("delete" as const),
      path: fc.array(fc.nat(), { minLength: 1, maxLength: 3 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant("set" as const),
      path: fc.array(fc.nat(), { minLength: 1, maxLength: 3 }),
      value: jsonValue,
    }),
  },
  fc.record({ op: fc.constant("add" as const), key: fc.string({ maxLength: 12 }), value: jsonValue }),
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("retype" as const),
      type: fc.oneof(
        fc.constantFrom(...SENDABLE_TYPES),
        fc.string({ maxLength: 20 }),
        fc.constantFrom(5, null, [], {}),
      ),
    }),
  },
  fc.record({ op: fc.constant("event_id" as const), value: fc.oneof(badEventId, fc.constant(undefined)) }),
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant("cut" as const), at: fc.double({ min: 0, max: 1, noNaN: true }) }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant("splice" as const),
      at: fc.double({ min: 0, max: 1, noNaN: true }),
      remove: fc.nat({ max: 3 }),
      insert: fc.oneof(
        fc.constantFrom("", "{", "}", "[", "]", '"', ",", ":", "\\", "\\u12", "null", " "),
        fc.string({ maxLength: 4 }),
      ),
    }),
  },
  fc.record({
    op: fc.constant("wrap" as const),
    how: fc.constantFrom("array" as const, "twice" as const, "bom" as const, "spaces" as const),
  }),
);

const anyType = fc.constantFrom(...TYPES);

/** A valid frame of a random type, mutated 0 to 3 times (0: sent as generated). */
const mutatedFrame: fc.Arbitrary<FrameSpec> = anyType.chain((type) =>
  fc.record({
    kind: fc.constant("json" as const),
    type: fc.constant(type),
    fields: VALID_FIELDS[type] as fc.Arbitrary<Record<string, unknown>>,
    mutations: fc.oneof(
      { weight: 1, arbitrary: fc.constant([]) },
      { weight: 5, arbitrary: fc.array(mutation, { minLength: 1, maxLength: 3 }) },
    ),
    must: fc.constant("any" as const),
  }),
);

/** A frame of a random type that every session refuses: a bad payload field, or a bad event_id. */
const badFrame: fc.Arbitrary<FrameSpec> = anyType.chain((type) =>
  fc
    .record({
      fields: NO_PAYLOAD.has(type) ? fc.constant({}) : (BAD_FIELDS[type] as fc.Arbitrary<Record<string, unknown>>),
      id:
        NO_PAYLOAD.has(type) || type === "session.close"
          ? badEventId.map((v) => [v])
          : fc.option(badEventId.map((v) => [v])),
    })
    .map(({ fields, id }) => ({
      kind: "json" as const,
      type,
      fields,
      mutations: id === null ? [] : [{ op: "event_id" as const, value: id[0] }],
      must: "reject" as const,
    })),
);

/**
 * Frames that are refused whatever the session's state: a bad payload field or event_id (300 in 621), text that is
 * not a JSON object, binary JSON, binary noise (100 each), deep JSON (20: three in four up to 200 levels, one in four
 * 1,000 to 100,000) and large frames of 64 KiB to 1 MiB (1). Per 100,000 frames that is about 350 frames 1,000
 * levels deep or more and 50 large ones (some 130 MB of frames in all), enough to cross the pending input limit now
 * and then.
 */
const refusedFrame: fc.Arbitrary<FrameSpec> = fc.oneof(
  { weight: 300, arbitrary: badFrame },
  {
    weight: 100,
    arbitrary: fc
      .record({
        kind: fc.constant("text" as const),
        text: fc.oneof(
          fc.string({ maxLength: 40, unit: "binary" }),
          fc.constantFrom("", "{", "null", "[]", "42", '"type"', "{}}", "\u0000", '{"type":"barge_in",}'),
        ),
      })
      .filter((f) => !isJsonObject(f.text)),
  },
  {
    weight: 100,
    arbitrary: anyType.chain((type) =>
      fc.record({
        kind: fc.constant("binary" as const),
        type: fc.constant(type),
        fields: VALID_FIELDS[type] as fc.Arbitrary<Record<string, unknown>>,
      }),
    ),
  },
  {
    weight: 100,
    arbitrary: fc.record({ kind: fc.constant("noise" as const), bytes: fc.uint8Array({ maxLength: 64 }) }),
  },
  {
    weight: 20,
    arbitrary: fc.record({
      kind: fc.constant("deep" as const),
      shape: fc.constantFrom("array" as const, "unknown" as const, "typed" as const, "unclosed" as const),
      depth: fc.oneof(
        { weight: 3, arbitrary: fc.integer({ min: 1, max: 200 }) },
        { weight: 1, arbitrary: fc.integer({ min: 1000, max: REFUSED_DEPTH_MAX }) },
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("large" as const),
      bytes: fc.integer({ min: 64 * 1024, max: 1024 * 1024 }),
    }),
  },
);

/**
 * What a session is sent most of the time: mutated frames of the 21 types (600 in 920; a sixth of them unmutated,
 * so valid), frames refused by construction (300), and deep turn.signal payloads (20).
 */
export const mixedFrame: fc.Arbitrary<FrameSpec> = fc.oneof(
  { weight: 600, arbitrary: mutatedFrame },
  { weight: 300, arbitrary: refusedFrame },
  {
    weight: 20,
    arbitrary: fc.record({
      kind: fc.constant("deep" as const),
      shape: fc.constant("payload" as const),
      depth: fc.integer({ min: 1, max: DEEP_PAYLOAD_MAX }),
    }),
  },
);

/** Only frames that every session refuses. */
export const refusedOnlyFrame: fc.Arbitrary<FrameSpec> = refusedFrame;

/** True when `text` parses as a JSON object (not an array, not a scalar). */
export function isJsonObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}
