/**
 * The one table of error codes (BEHAVIOUR.md, "Errors"; reference/realtime-duplex-api.md, "Errors").
 * Each code has its OpenAI `error.type` class, a default message, and whether it ends the session or the socket.
 * An unknown code is a compile error: every error the project sends is an `ErrorCode` of this table.
 */
export type ErrorClass = "invalid_request_error" | "server_error" | "rate_limit_error";

/** One row of the table. `closesSocket`: the socket is closed after the error (WebSocket close code given). */
export interface ErrorSpec {
  readonly type: ErrorClass;
  readonly message: string;
  readonly closeCode?: number;
}

const invalid = (message: string): ErrorSpec => ({ type: "invalid_request_error", message });
const server = (message: string, closeCode?: number): ErrorSpec =>
  closeCode === undefined ? { type: "server_error", message } : { type: "server_error", message, closeCode };

export const ERROR_CODES = {
  bad_event: invalid("The event does not match its schema."),
  bad_audio: invalid("The audio does not match the declared format."),
  config_timeout: { type: "invalid_request_error", message: "No session.update arrived in time.", closeCode: 1008 },
  invalid_json: invalid("The frame is not a JSON object."),
  event_too_large: invalid("The frame is larger than the maximum frame size."),
  unknown_event: invalid("The event type is not known."),
  session_closed: invalid("The session is closed."),
  unknown_session: invalid("The session is not known to this server."),
  response_already_active: invalid("A response is already active."),
  response_not_active: invalid("No response is active."),
  response_create_without_input: invalid("response.create needs input to respond to."),
  response_override_unsupported: invalid("A response cannot change what the session sets for every response."),
  input_audio_buffer_empty: invalid("input_audio_buffer.commit requires a non-empty input audio buffer."),
  item_not_found: invalid("No item has that id."),
  missing_item_id: invalid("The event needs an item_id."),
  playback_item_mismatch: invalid("The response_id and item_id name different responses."),
  playback_item_not_found: invalid("No assistant item matches the playback acknowledgement."),
  playback_ack_too_late: invalid("The item's history slot was settled before this acknowledgement."),
  unsupported_audio_format: invalid("The audio format is not supported."),
  unsupported_turn_detection: invalid("The turn_detection type is not supported."),
  barge_in_unsupported: invalid("The model does not support barge-in."),
  invalid_event_ack: invalid("The acknowledged server_event_seq is beyond the last event sent."),
  invalid_session_resume: invalid("session.resume is malformed."),
  invalid_resume_token: invalid("The resume token is not valid for this session."),
  session_resume_expired: invalid("The session is unknown or expired."),
  unsupported_session_resume: invalid("The model does not support session resume."),
  audio_truncate_unsupported: invalid("The model does not support audio truncation."),
  tool_calls_unsupported: invalid("The model does not call tools."),
  speed_unsupported: invalid("The model speaks at one rate only."),
  ref_audio_required: invalid("The model needs a ref_audio voice clip."),
  unsupported_ref_audio_path: invalid("ref_audio must be a data URL; URLs and paths are not fetched."),
  ref_audio_update_unsupported: invalid("ref_audio cannot change once the session has audio."),
  invalid_video_frames: invalid("video_frames must be base64 JPEG or PNG images."),
  invalid_function_call_output: invalid("A function_call_output item needs call_id and output."),
  duplicate_function_call: invalid("The call_id is already a function call of the session."),
  invalid_function_call: server("The model made a function call without a call_id or name."),
  unknown_function_call: invalid("The call_id names no function call of the session."),
  duplicate_function_call_output: invalid("The function call is already answered."),
  late_function_call_output: invalid("The function call was cancelled before its output."),
  stale_function_call_output: invalid("The function call was made before a barge-in; its epoch is over."),
  internal_error: server("Internal server error.", 1011),
  runtime_append_failed: server("The session log could not be appended to.", 1011),
  runtime_data_plane_stream_failed: server("The model stage failed."),
  response_timeout: server("The model produced nothing for the response within response_timeout_ms."),
  upstream_unavailable: server("The upstream model server cannot be reached, or went away.", 1011),
  upstream_protocol_error: server("The upstream model server broke the protocol.", 1011),
  recording_diverged: server("The session's input is not the recording's that the recorded runner plays back.", 1011),
  upstream_commit_refused: server("The upstream model server refused a commit; the item has no transcript."),
  transcription_failed: server("The model could not transcribe the item."),
  server_vad_unavailable: server("Server VAD is not available."),
  commit_aborted: server("The commit was aborted."),
  resource_exhausted: { type: "rate_limit_error", message: "Session capacity reached.", closeCode: 1013 },
  input_backpressure: { type: "rate_limit_error", message: "Too much input is pending for this session." },
  output_backpressure: {
    type: "rate_limit_error",
    message: "The client does not read output fast enough.",
    closeCode: 1013,
  },
  duplex_session_busy: { type: "rate_limit_error", message: "Session capacity reached.", closeCode: 1013 },
  unauthorized: { type: "invalid_request_error", message: "Missing or invalid API key.", closeCode: 1008 },
  model_not_found: invalid("No model has that id on this server."),
  response_not_found: invalid("The session has no response with that id."),
  not_found: invalid("No route has that method and path."),
  not_available: invalid("The route is a turn-based one that a duplex deployment does not serve."),
  forbidden_host: invalid("The Host header names a host this server does not serve (listen.allowed_hosts)."),
  forbidden_origin: invalid("The Origin header names a site this server does not allow (listen.allowed_origins)."),
  request_too_large: invalid("The request body is larger than limits.http_body_bytes."),
  too_many_connections: {
    type: "rate_limit_error",
    message: "Too many open connections (listen.max_connections, listen.max_connections_per_address); retry later.",
  },
  too_many_auth_failures: {
    type: "rate_limit_error",
    message: "Too many failed API key checks from this address; retry later.",
  },
} as const satisfies Record<string, ErrorSpec>;

/** Every error code the project can send. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** True when `code` is a code of the table. */
export const isErrorCode = (code: string): code is ErrorCode => Object.hasOwn(ERROR_CODES, code);

/**
 * A rejection with its code, message and the offending parameter, as the decider and the codec produce it.
 * `param` is the dotted path of the field at fault (`session.turn_detection.type`), when one is.
 */
export interface Rejection {
  readonly code: ErrorCode;
  readonly message: string;
  readonly param?: string;
}

/** Builds a rejection; `message` defaults to the table's. */
export const reject = (code: ErrorCode, message?: string, param?: string): Rejection =>
  param === undefined
    ? { code, message: message ?? ERROR_CODES[code].message }
    : { code, message: message ?? ERROR_CODES[code].message, param };
