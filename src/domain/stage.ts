import type { ToolChoice, ToolDefinition } from "./config.ts";
import type { HistoryItem } from "./history-item.ts";
import type { ItemId, ResponseId } from "./ids.ts";

/**
 * What the model stage emits (DESIGN.md, "Ports": ModelRunner). Every output is stamped with the epoch of the unit
 * it answers; output of an older epoch is dropped by the decider (BEHAVIOUR.md, "Identity").
 */
export type StageOutput =
  | { readonly kind: "speak"; readonly epoch: number }
  | { readonly kind: "listen"; readonly epoch: number; readonly reason: string }
  | {
      readonly kind: "audio";
      readonly epoch: number;
      /** PCM16 little-endian mono at the session's output rate (bytes). */
      readonly audio: Uint8Array;
      /** The transcript text of this chunk (may be empty). */
      readonly transcript: string;
    }
  | {
      readonly kind: "text";
      readonly epoch: number;
      /** A text delta of a text-modality response. */
      readonly text: string;
    }
  | {
      readonly kind: "tool_call";
      readonly epoch: number;
      /** Null when the model's call is malformed (rendered as `duplex.function_call.done`). */
      readonly callId: string | null;
      readonly name: string | null;
      /** The arguments as the model wrote them (JSON text, maybe invalid). */
      readonly arguments: string;
    }
  | {
      readonly kind: "input_transcript";
      readonly epoch: number;
      /** What the model heard of a committed user item. */
      readonly transcript: string;
      /**
       * The user item it transcribes (from the commit unit); absent: the last committed one. A transcript belongs to
       * its item whatever was committed or cancelled since (BEHAVIOUR.md, "Turn-taking").
       */
      readonly itemId?: string;
    }
  | { readonly kind: "end_of_turn"; readonly epoch: number }
  | {
      /**
       * The model ended its response before its end at a limit of its own (OpenAI's `status: incomplete`): the
       * response ends `incomplete` with this reason; the epoch stays, and the next deferred turn is answered.
       */
      readonly kind: "incomplete";
      readonly epoch: number;
      readonly reason: IncompleteReason;
    }
  | {
      /**
       * The model server could not transcribe a committed user item (it refused the commit, or its transcription
       * failed): the client is told for that item, and later transcripts keep to their own items.
       */
      readonly kind: "input_transcript_failed";
      readonly epoch: number;
      /** The user item (from the commit unit); absent: the last committed one. */
      readonly itemId?: string;
      readonly code: TranscriptFailureCode;
      readonly message: string;
    }
  | {
      /**
       * A new model-server session was given the conversation as history (an upstream session that could not be
       * resumed, after a restart of this server): the items it was given, in order. Recorded; it decides nothing.
       */
      readonly kind: "history_seeded";
      readonly epoch: number;
      readonly itemIds: readonly string[];
    }
  | {
      /**
       * The model stopped its response before its end by itself: `reason` as the model gave it. `turn_detected`
       * and `barge_in` (its own VAD heard the user) end it as a barge-in, whose utterance is answered next; anything
       * else ends it `model_cancelled`, and the turn deferred behind it is answered.
       */
      readonly kind: "cancelled";
      readonly epoch: number;
      readonly reason: string;
    }
  | { readonly kind: "failure"; readonly epoch: number; readonly message: string }
  | {
      /**
       * The model server's own session behind this one (an upstream runner): its id and the SHA-256 of its resume
       * token (the token itself stays in the runner's memory). Recorded for the log; it decides nothing.
       */
      readonly kind: "upstream_session";
      readonly epoch: number;
      readonly sessionId: string;
      readonly resumeTokenSha256: string | null;
      /**
       * The duplex dialect's revision the model server speaks (src/infra/runners/upstream/link.ts, DuplexRevision):
       * `incarnation` or `server_ids`; absent for an OpenAI server and in logs recorded before it was told.
       */
      readonly revision?: "incarnation" | "server_ids";
    }
  | {
      /**
       * The model stage is gone for this session (an upstream model server refused, timed out, dropped or sent
       * garbage): the session ends with `code`, whatever the epoch.
       */
      readonly kind: "stage_lost";
      readonly epoch: number;
      readonly code: StageLossCode;
      readonly message: string;
    };

/**
 * Why a model stage was lost (the error code its session ends with): `duplex_session_busy` when the model server
 * refused the session at its own capacity (reference, "Errors": its `max_sessions`), a retryable refusal.
 */
export const STAGE_LOSS_CODES = [
  "upstream_unavailable",
  "upstream_protocol_error",
  "duplex_session_busy",
  "recording_diverged",
] as const;
export type StageLossCode = (typeof STAGE_LOSS_CODES)[number];

/** OpenAI's reasons of an `incomplete` response. */
export type IncompleteReason = "max_output_tokens" | "content_filter";
export const INCOMPLETE_REASONS: readonly IncompleteReason[] = ["max_output_tokens", "content_filter"];

/**
 * Why a user item has no transcript (error codes of the table): `commit_aborted` when the model server aborted the
 * commit (reference, "Errors"), `upstream_commit_refused` for any other refusal of it.
 */
export const TRANSCRIPT_FAILURE_CODES = ["upstream_commit_refused", "transcription_failed", "commit_aborted"] as const;
export type TranscriptFailureCode = (typeof TRANSCRIPT_FAILURE_CODES)[number];

/**
 * Why `value` is not a `StageOutput` a decider can take, or null when it is one: a known `kind`, a non-negative
 * integer `epoch`, and the fields of its kind with their types (audio as a `Uint8Array` of whole PCM16 samples).
 * The engine checks every output a runner emits before it enters the session (a malformed one fails the session).
 */
export const stageOutputProblem = (value: unknown): string | null => {
  if (typeof value !== "object" || value === null)
    return `expected an object, got ${value === null ? "null" : typeof value}`;
  const o = value as Record<string, unknown>;
  if (typeof o.epoch !== "number" || !Number.isInteger(o.epoch) || o.epoch < 0) {
    return `epoch must be a non-negative integer, got ${JSON.stringify(o.epoch)}`;
  }
  const text = (key: string): string | null =>
    typeof o[key] === "string" ? null : `${String(o.kind)}: ${key} must be a string`;
  switch (o.kind) {
    case "speak":
    case "end_of_turn":
      return null;
    case "listen":
      return text("reason");
    case "audio":
      if (!(o.audio instanceof Uint8Array)) return "audio: audio must be a Uint8Array of PCM16 bytes";
      if (o.audio.byteLength % 2 !== 0)
        return `audio: ${o.audio.byteLength} bytes is not a whole number of PCM16 samples`;
      return text("transcript");
    case "text":
      return text("text");
    case "tool_call":
      if (o.callId !== null && typeof o.callId !== "string") return "tool_call: callId must be a string or null";
      if (o.name !== null && typeof o.name !== "string") return "tool_call: name must be a string or null";
      return text("arguments");
    case "input_transcript":
      return text("transcript");
    case "failure":
      return text("message");
    case "cancelled":
      return text("reason");
    case "incomplete":
      return (INCOMPLETE_REASONS as readonly unknown[]).includes(o.reason)
        ? null
        : `incomplete: reason must be one of ${INCOMPLETE_REASONS.join(", ")}, got ${JSON.stringify(o.reason)}`;
    case "input_transcript_failed":
      if (!(TRANSCRIPT_FAILURE_CODES as readonly unknown[]).includes(o.code)) {
        return `input_transcript_failed: unknown code ${JSON.stringify(o.code)}`;
      }
      if (o.itemId !== undefined && typeof o.itemId !== "string")
        return "input_transcript_failed: itemId must be a string";
      return text("message");
    case "history_seeded":
      return Array.isArray(o.itemIds) && o.itemIds.every((id) => typeof id === "string")
        ? null
        : "history_seeded: itemIds must be an array of strings";
    case "upstream_session":
      if (o.resumeTokenSha256 !== null && typeof o.resumeTokenSha256 !== "string") {
        return "upstream_session: resumeTokenSha256 must be a string or null";
      }
      if (o.revision !== undefined && o.revision !== "incarnation" && o.revision !== "server_ids") {
        return "upstream_session: revision must be incarnation or server_ids";
      }
      return text("sessionId");
    case "stage_lost":
      return (STAGE_LOSS_CODES as readonly unknown[]).includes(o.code)
        ? text("message")
        : `stage_lost: unknown code ${JSON.stringify(o.code)}`;
    default:
      return `unknown output kind ${JSON.stringify(o.kind)}`;
  }
};

/** Work the engine hands to the model stage, derived from domain events (see effects.ts). */
export type RunnerUnit =
  | {
      readonly kind: "append";
      readonly epoch: number;
      /** PCM16 mono at the runner's input rate (bytes). */
      readonly audio: Uint8Array;
      /** Input clock (ms) at the start of this audio. */
      readonly startMs: number;
      /** Server VAD annotations of this append (reference: the annotated append). */
      readonly vad: {
        readonly speechStartedAtMs: number | null;
        readonly speechStoppedAtMs: number | null;
        readonly speechActive: boolean;
      };
      /** Camera frames (JPEG or PNG bytes) riding the append; only on a model that consumes video. */
      readonly videoFrames?: readonly Uint8Array[];
      /** `force_listen` of the append: the model must listen through it, never starting to speak on it. */
      readonly forceListen?: true;
    }
  | {
      readonly kind: "commit";
      readonly epoch: number;
      /** The user item the commit made (absent in older callers): a transcript of it names this item. */
      readonly itemId?: ItemId;
    }
  | {
      readonly kind: "respond";
      readonly epoch: number;
      readonly responseId: ResponseId;
      /** This response's instructions, or null for the session's (`configure`). */
      readonly instructions: string | null;
      /** What the response should contain: audio (with its transcript) or text only. */
      readonly modalities: readonly ("audio" | "text")[];
      /** `none`: out of band: answer `input` (or nothing), outside the conversation. */
      readonly conversation: "auto" | "none";
      /** `response.input`: the items to answer instead of the conversation, or null for the conversation. */
      readonly input: readonly HistoryItem[] | null;
      readonly metadata: Readonly<Record<string, unknown>> | null;
      /** The tools, tool choice, temperature and token limit in force for this response. */
      readonly tools: readonly ToolDefinition[];
      readonly toolChoice: ToolChoice;
      readonly temperature: number | null;
      readonly maxOutputTokens: number | "inf";
      /**
       * The user item whose commit asked for this response (a deferred response answers its own turn, not the
       * newest), or null when a `response.create` did (absent in units of older tests: null).
       */
      readonly inReplyTo?: ItemId | null;
    }
  | {
      /**
       * What the client reported of a response's playback (`playback.ack`, or a `conversation.item.truncate`, then
       * `truncate` is set and both positions are the cut), so a model that keeps history can keep it honest. ms.
       */
      readonly kind: "playback";
      readonly epoch: number;
      readonly responseId: ResponseId;
      readonly playedMs: number;
      readonly committedMs: number;
      readonly truncate: boolean;
    }
  | {
      /** The client's answer to a function call (`conversation.item.create` of a `function_call_output`). */
      readonly kind: "function_call_output";
      readonly epoch: number;
      readonly itemId: ItemId;
      readonly callId: string;
      readonly output: string;
    }
  | { readonly kind: "text"; readonly epoch: number; readonly text: string }
  | {
      /**
       * An assistant message or a function call the client placed in the conversation (`conversation.item.create`;
       * a chat request's earlier answer named by its `audio.id`, or its `tool_calls`): the model keeps it as its own
       * earlier words and answers nothing for it. A runner whose model keeps no conversation ignores it.
       */
      readonly kind: "item";
      readonly epoch: number;
      readonly item: HistoryItem;
    }
  | { readonly kind: "clear"; readonly epoch: number };
