import { ERROR_CODES } from "../domain/index.ts";

/**
 * The event catalogue of the wire contract (reference/realtime-duplex-api.md, "Event catalogue"): every client
 * and server event, its tier (1: identical to OpenAI Realtime; 2: an OpenAI name with duplex extensions; 3: duplex
 * only), its direction, its fields and aliases. docs/wire.md is generated from this table, and a test checks both
 * ways that the codec decodes every client event and renders every server event listed here.
 */
export interface CatalogueEntry {
  readonly type: string;
  readonly tier: 1 | 2 | 3;
  readonly direction: "client" | "server";
  /** The payload fields (besides `type` and `event_id`), in wire spelling. */
  readonly fields: readonly string[];
  readonly aliases?: readonly string[];
  readonly description: string;
}

const c = (
  type: string,
  tier: 1 | 2 | 3,
  fields: readonly string[],
  description: string,
  aliases?: readonly string[],
): CatalogueEntry => ({ type, tier, direction: "client", fields, description, ...(aliases ? { aliases } : {}) });
const s = (type: string, tier: 1 | 2 | 3, fields: readonly string[], description: string): CatalogueEntry => ({
  type,
  tier,
  direction: "server",
  fields,
  description,
});

/** The 21 client events. */
export const CLIENT_EVENTS: readonly CatalogueEntry[] = [
  c(
    "session.update",
    2,
    ["session"],
    "Open handshake on first send (creates the session); later sends reconfigure it (instructions, voice, tools, tool_choice, temperature, max_response_output_tokens, modalities, audio formats, turn_detection, ref_audio, extra_body, ...).",
  ),
  c("session.heartbeat", 3, [], "Keepalive; refreshes the session lease."),
  c("session.event_ack", 3, ["server_event_seq"], "Acknowledges received server events by server_event_seq."),
  c("session.close", 3, [], "Graceful close; answered with session.closed.", [
    "close_session",
    "close",
    "session_close",
  ]),
  c(
    "session.resume",
    3,
    ["session_id", "resume_token", "incarnation", "last_received_server_event_seq"],
    "Re-attach a live session on a new socket.",
  ),
  c(
    "input_audio_buffer.append",
    2,
    [
      "audio",
      "format",
      "input_audio_format",
      "sample_rate_hz",
      "is_speech",
      "duration_ms",
      "audio_end_ms",
      "video_frames",
      "max_slice_nums",
      "vad",
      "force_listen",
    ],
    "Append one audio chunk; `video_frames` (base64 JPEG/PNG) are consumed where `capabilities.supports_video_input`, ignored elsewhere; `vad` carries the client's own VAD decisions, `force_listen` keeps the model listening.",
    ["push_chunk", "input.audio.append"],
  ),
  c(
    "input_audio_buffer.commit",
    2,
    ["final", "is_speech", "response_create", "create_response"],
    "Seal the buffered utterance into a user item; `is_speech: false` declares it silence or noise.",
  ),
  c("input.commit", 3, ["final", "response_create"], "Alias of input_audio_buffer.commit."),
  c("input_audio_buffer.clear", 1, [], "Drop un-committed input audio."),
  c("input.cancel", 3, [], "Cancel pending input; advances epoch."),
  c("input.text.append", 3, ["text"], "Append text to the open input item.", ["input_text.append", "push_text"]),
  c(
    "conversation.item.create",
    1,
    ["previous_item_id", "item"],
    "Add a completed item (text, audio, function_call_output).",
  ),
  c("conversation.item.retrieve", 1, ["item_id"], "Fetch a stored item by id."),
  c("conversation.item.delete", 1, ["item_id"], "Delete a stored item by id."),
  c(
    "conversation.item.truncate",
    1,
    ["item_id", "content_index", "audio_end_ms"],
    "Truncate an assistant item at audio_end_ms.",
  ),
  c(
    "response.create",
    1,
    ["response"],
    "Request a response with per-response overrides (modalities, instructions, metadata, tools, tool_choice, temperature, max_output_tokens); `conversation: none` with `input` items makes it out of band.",
  ),
  c("response.cancel", 1, ["response_id"], "Cancel the active (or named) response; advances epoch."),
  c("output_audio_buffer.clear", 1, [], "Discard queued output audio; cancels the active response."),
  c("barge_in", 3, [], "Explicit hard interrupt; requires capabilities.supports_barge_in."),
  c("turn.signal", 3, ["event", "payload"], "External turn-taking signal (event: barge_in).", ["signal_turn"]),
  c(
    "playback.ack",
    3,
    ["response_id", "item_id", "played_ms", "committed_ms", "truncate"],
    "Report cumulative playback progress.",
    ["audio.playback_ack"],
  ),
];

const ids = ["response_id", "item_id", "output_index", "content_index"];

/** The 44 server events. Every one also carries `event_id`, `server_event_seq` (but session.created) and `epoch`. */
export const SERVER_EVENTS: readonly CatalogueEntry[] = [
  s("session.created", 2, ["session", "incarnation", "attachment_generation", "resume_token"], "Session opened."),
  s("session.updated", 2, ["session"], "Effective session config after every session.update."),
  s("session.heartbeat_ack", 3, ["session_id"], "Reply to session.heartbeat."),
  s(
    "session.closed",
    3,
    ["session_id", "reason", "event"],
    "Last event of a closed session; `event` is the native event (session_id, epoch, reason).",
  ),
  s(
    "session.resumed",
    3,
    ["session_id", "incarnation", "attachment_generation", "resume_token"],
    "Resume accepted; `detach_reason` (ours) says why the last socket was let go of, when it was.",
  ),
  s("session.replaced", 3, ["session_id", "attachment_generation"], "Sent to the socket a resume superseded."),
  s(
    "session.expired",
    3,
    ["session_id", "incarnation", "reason"],
    "Lease ran out (idle_ttl_expired, disconnect_grace_expired, max_lifetime_expired).",
  ),
  s("session.resync_required", 3, ["session_id", "reason"], "Replay impossible; start a new session."),
  s("input_audio_buffer.speech_started", 1, ["audio_start_ms", "item_id"], "Speech onset detected."),
  s("input_audio_buffer.speech_stopped", 1, ["audio_end_ms", "item_id"], "Speech end detected."),
  s("input_audio_buffer.committed", 2, ["previous_item_id", "item_id", "event"], "Commit accepted."),
  s("input_audio_buffer.cleared", 1, [], "Input buffer cleared."),
  s("conversation.item.added", 2, ["previous_item_id", "item"], "Item entered history (GA spelling)."),
  s("conversation.item.created", 2, ["previous_item_id", "item"], "Item entered history (beta spelling)."),
  s("conversation.item.done", 2, ["previous_item_id", "item"], "Item finalized."),
  s(
    "conversation.item.input_audio_transcription.completed",
    1,
    ["item_id", "content_index", "transcript"],
    "Transcript of a committed user audio item (model-produced).",
  ),
  s(
    "conversation.item.input_audio_transcription.failed",
    1,
    ["item_id", "content_index", "error"],
    "A committed user item got no transcript (the model server refused the commit, or could not transcribe it).",
  ),
  s("conversation.item.deleted", 2, ["item_id", "event"], "Reply to conversation.item.delete."),
  s("conversation.item.retrieved", 1, ["item"], "Reply to conversation.item.retrieve."),
  s(
    "conversation.item.truncated",
    2,
    ["item_id", "content_index", "audio_end_ms"],
    "Reply to conversation.item.truncate.",
  ),
  s("response.created", 2, ["response_id", "response"], "A response starts."),
  s("response.output_item.added", 1, ["response_id", "output_index", "item"], "Item attached to the response."),
  s("response.content_part.added", 1, [...ids, "part"], "Content part opened."),
  s("response.speak", 3, [...ids, "metadata"], "The model chose to speak; before the first audio delta."),
  s("response.output_audio.delta", 2, [...ids, "delta", "format", "sample_rate_hz", "metadata"], "One audio chunk."),
  s("response.output_audio_transcript.delta", 1, [...ids, "delta"], "Transcript paired with each audio delta."),
  s("response.output_text.delta", 1, [...ids, "delta"], "Text delta of a text-modality response."),
  s("response.output_text.done", 1, [...ids, "text"], "Final text of a text-modality response."),
  s("response.output_audio.done", 1, ids, "Audio stream closed."),
  s("response.output_audio_transcript.done", 1, [...ids, "transcript"], "Full transcript."),
  s("response.content_part.done", 1, [...ids, "part"], "Content part finalized."),
  s("response.output_item.done", 1, ["response_id", "output_index", "item"], "Item finalized."),
  s("response.done", 2, ["response_id", "response"], "Terminal event: completed, cancelled or failed."),
  s("rate_limits.updated", 1, ["rate_limits"], "After every response.done; always an empty list."),
  s(
    "response.listen",
    3,
    ["session_id", "response"],
    "The model chose to keep listening; `response_id` names the precreated response it ends (its response.done follows).",
  ),
  s(
    "response.function_call_arguments.delta",
    1,
    ["response_id", "item_id", "output_index", "call_id", "delta"],
    "Tool-call arguments delta.",
  ),
  s(
    "response.function_call_arguments.done",
    1,
    ["response_id", "item_id", "output_index", "call_id", "name", "arguments"],
    "Tool-call arguments complete.",
  ),
  s("duplex.function_call.done", 3, ["event"], "Raw fallback when a model tool call is malformed."),
  s("output_audio_buffer.cleared", 1, ["response_id"], "Queued output audio discarded."),
  s("playback.acknowledged", 3, ["event"], "Reply to playback.ack with the playback ledger."),
  s(
    "overlap.decision",
    3,
    ["session_id", "policy", "action", "reason", "overlap_ms", "metadata"],
    "How overlapping input was handled.",
  ),
  s("runtime.control", 3, ["session_id", "result"], "Diagnostic: a control signal was partially unsupported."),
  s(
    "turn.event",
    3,
    ["session_id", "event", "turn_state"],
    "A turn-taking signal the session took (barge_in, turn.signal), with the turn state and epoch after it.",
  ),
  s("error", 2, ["error"], "Error envelope."),
];

/** Renders docs/wire.md from the catalogue. */
export const renderWireDoc = (): string => {
  const row = (e: CatalogueEntry): string =>
    `| \`${e.type}\` | ${e.tier} | ${e.fields.map((f) => `\`${f}\``).join(", ") || "—"} | ${(e.aliases ?? []).map((a) => `\`${a}\``).join(", ") || "—"} | ${e.description} |`;
  return [
    "# Wire contract: event catalogue",
    "",
    "Generated from `src/protocol/catalogue.ts` by `npm run docs:wire`; a test fails when this file and the table differ.",
    "Tier 1: identical to OpenAI Realtime; 2: an OpenAI name with duplex extensions; 3: duplex only",
    '(`../shared/reference/realtime-duplex-api.md`, "Event catalogue").',
    "",
    `## Client to server (${CLIENT_EVENTS.length})`,
    "",
    "| event | tier | fields | aliases | description |",
    "| --- | --- | --- | --- | --- |",
    ...CLIENT_EVENTS.map(row),
    "",
    `## Server to client (${SERVER_EVENTS.length})`,
    "",
    "Every server event carries `event_id`, `epoch` and, after `session.created`, `server_event_seq`. A client that",
    "announces the beta protocol gets `response.audio.*`, `response.audio_transcript.*` and `response.text.*` for the",
    "`response.output_*` names.",
    "",
    "| event | tier | fields | aliases | description |",
    "| --- | --- | --- | --- | --- |",
    ...SERVER_EVENTS.map(row),
    "",
    `## Error codes (${Object.keys(ERROR_CODES).length})`,
    "",
    "`error.code` of the `error` event (and of the flat handshake errors), its `error.type`, and the WebSocket close",
    "code that follows where the error ends the socket (`src/domain/errors.ts`).",
    "",
    "| code | type | close | meaning |",
    "| --- | --- | --- | --- |",
    ...Object.entries(ERROR_CODES).map(
      ([code, spec]) =>
        `| \`${code}\` | ${spec.type} | ${"closeCode" in spec ? spec.closeCode : "—"} | ${spec.message} |`,
    ),
    "",
  ].join("\n");
};
