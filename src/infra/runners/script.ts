import { readFile } from "node:fs/promises";
import { parse } from "yaml";
import { z } from "zod";

/**
 * Script files of the `scripted` runner (DESIGN.md, "Ports": ModelRunner): deterministic model behaviour written in
 * YAML, validated strictly (an unknown key is an error that names its path). Example:
 *
 * ```yaml
 * name: greeting
 * speed_factor: .inf          # optional; .inf (default) = chunks back to back, N = N times real time
 * when_exhausted: ignore      # optional; ignore | repeat_last | cycle
 * capabilities:               # optional overrides of the runner's capabilities
 *   chunk_period_ms: 200
 * turns:
 *   - on: respond             # speech_stopped | commit | respond | text | open
 *     actions:
 *       - speak: "Hello there."
 *       - speak: { text: "hello", duration_ms: 1000 }   # a fixed length instead of 60 ms a character
 *       - tool_call: { name: get_weather, call_id: call_1, arguments: { city: Paris } }
 *       - wait_ms: 100
 *       - end_turn
 * ```
 *
 * Each trigger consumes the next turn written for it, in file order; triggers have independent cursors.
 * A turn with `match` is not on that cursor: it plays whenever a unit of its trigger fits it (the first such turn in
 * file order), and the cursor does not move. `match.modalities` (for `respond`) fits a response that requested
 * exactly those modalities; `match.text` fits a text unit that contains it, case-insensitively (for `text`), or a
 * response or commit after such text (for `respond` and `commit`: in the turn lane text is what the next response
 * answers, since nothing but `response.create` or a commit starts one there); `match.tool_output: true` (for
 * `respond`) fits a response asked after a `function_call_output` came back:
 *
 * ```yaml
 *   - on: respond
 *     match: { modalities: [text] }
 *     actions: [{ text: "Tomorrow looks cloudy." }, end_turn]
 *   - on: text
 *     match: { text: "weather" }
 *     actions: [{ tool_call: { name: get_weather, call_id: call_1, arguments: { city: Lisbon } } }, end_turn]
 * ```
 */

/** What starts a turn (see the `scripted` runner for the exact units that match). */
export type ScriptTrigger = "speech_stopped" | "commit" | "respond" | "text" | "open";

/** One step of a turn, in our own spelling. `wait` is in ms. */
export type ScriptAction =
  /** `durationMs`: the length of the synthetic speech (ms); absent: 60 ms a character (the runner's default). */
  | { readonly kind: "speak"; readonly text: string; readonly durationMs?: number }
  | { readonly kind: "text"; readonly text: string }
  | {
      readonly kind: "tool_call";
      /** Both null for a malformed call (`malformed: true`). */
      readonly name: string | null;
      readonly callId: string | null;
      /** JSON text (an object in the script is serialised), or any text for a malformed call. */
      readonly arguments: string;
    }
  | { readonly kind: "input_transcript"; readonly transcript: string }
  /** The transcript of the committed item failed (`transcription_failed`), with this message. */
  | { readonly kind: "input_transcript_failed"; readonly message: string }
  /** The response ends `incomplete` (OpenAI's status: the model stopped at a limit of its own). */
  | { readonly kind: "incomplete"; readonly reason: "max_output_tokens" | "content_filter" }
  | { readonly kind: "listen"; readonly reason: string }
  | { readonly kind: "fail"; readonly message: string }
  | { readonly kind: "wait"; readonly ms: number }
  | { readonly kind: "end_turn" };

/**
 * What a unit must be for a turn with `match` to play: `modalities`, the exact set a `respond` unit requested;
 * `text`, a substring (case-insensitive) of a `text` unit, or of the text a `respond` or `commit` unit answers.
 */
export interface ScriptMatch {
  readonly modalities?: readonly ("audio" | "text")[];
  readonly text?: string;
  /** For `respond`: a response asked after a `function_call_output` came back (the answer to a tool call). */
  readonly toolOutput?: true;
}

/** A turn: played when its trigger arrives (and the unit fits its `match`, when it has one), its actions in order. */
export interface ScriptTurn {
  readonly on: ScriptTrigger;
  readonly match?: ScriptMatch;
  readonly actions: readonly ScriptAction[];
}

/** Capability overrides a script may declare; `chunkPeriodMs` in ms. */
export interface ScriptCapabilities {
  readonly chunkPeriodMs?: number;
  readonly supportsBargeIn?: boolean;
  readonly supportsSessionResume?: boolean;
  readonly supportsAudioTruncate?: boolean;
  readonly supportsToolCalls?: boolean;
}

/** A validated script. */
export interface Script {
  readonly name: string;
  readonly description: string | null;
  readonly capabilities: ScriptCapabilities;
  /** How much faster than real time audio chunks are produced; `Infinity` = back to back. */
  readonly speedFactor: number;
  /** What a trigger does once every turn written for it has been played. */
  readonly whenExhausted: "ignore" | "repeat_last" | "cycle";
  readonly turns: readonly ScriptTurn[];
}

/** Thrown when a script cannot be read, is not YAML, or does not validate; `message` names every bad key. */
export class ScriptError extends Error {
  readonly code = "script_invalid";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ScriptError";
  }
}

const nonEmpty = z.string().min(1);

const toolCallSchema = z
  .object({
    name: nonEmpty.optional(),
    call_id: nonEmpty.optional(),
    arguments: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
    malformed: z.boolean().optional(),
  })
  .strict()
  .superRefine((call, ctx) => {
    if (call.malformed === true) return;
    for (const key of ["name", "call_id"] as const) {
      if (call[key] === undefined) {
        ctx.addIssue({ code: "custom", path: [key], message: "is required unless malformed: true" });
      }
    }
  });

/** `- end_turn` (a bare word) is read as `{ end_turn: true }`, so a misspelt word is reported as an unknown key. */
const actionSchema = z.preprocess(
  (value) => (typeof value === "string" ? { [value]: true } : value),
  z
    .object({
      speak: z
        .union([nonEmpty, z.object({ text: nonEmpty, duration_ms: z.number().int().positive() }).strict()])
        .optional(),
      text: nonEmpty.optional(),
      tool_call: toolCallSchema.optional(),
      input_transcript: z.string().optional(),
      input_transcript_failed: nonEmpty.optional(),
      incomplete: z.enum(["max_output_tokens", "content_filter"]).optional(),
      listen: nonEmpty.optional(),
      fail: nonEmpty.optional(),
      wait_ms: z.number().int().min(0).optional(),
      end_turn: z.union([z.literal(true), z.null()]).optional(),
    })
    .strict()
    .superRefine((action, ctx) => {
      const keys = Object.keys(action);
      if (keys.length !== 1) {
        ctx.addIssue({
          code: "custom",
          message: `an action has exactly one key (speak, text, tool_call, input_transcript, input_transcript_failed, incomplete, listen, fail, wait_ms, end_turn), got ${keys.length === 0 ? "none" : keys.join(", ")}`,
        });
      }
    }),
);

const speedFactorSchema = z.preprocess(
  (value) => (value === "infinity" || value === "inf" ? Number.POSITIVE_INFINITY : value),
  z.custom<number>(
    (value) => typeof value === "number" && value > 0 && !Number.isNaN(value),
    'expected a positive number or .inf ("infinity")',
  ),
);

const scriptSchema = z
  .object({
    name: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+$/, "expected letters, digits, '_', '.' or '-'")
      .min(1),
    description: z.string().optional(),
    capabilities: z
      .object({
        chunk_period_ms: z.number().int().positive().optional(),
        supports_barge_in: z.boolean().optional(),
        supports_session_resume: z.boolean().optional(),
        supports_audio_truncate: z.boolean().optional(),
        supports_tool_calls: z.boolean().optional(),
      })
      .strict()
      .optional(),
    speed_factor: speedFactorSchema.optional(),
    when_exhausted: z.enum(["ignore", "repeat_last", "cycle"]).optional(),
    turns: z.array(
      z
        .object({
          on: z.enum(["speech_stopped", "commit", "respond", "text", "open"]),
          match: z
            .object({
              modalities: z
                .array(z.enum(["audio", "text"]))
                .min(1)
                .optional(),
              text: nonEmpty.optional(),
              tool_output: z.literal(true).optional(),
            })
            .strict()
            .optional(),
          actions: z.array(actionSchema).min(1),
        })
        .strict()
        .superRefine((turn, ctx) => {
          const match = turn.match;
          if (match === undefined) return;
          if (match.modalities === undefined && match.text === undefined && match.tool_output === undefined)
            ctx.addIssue({ code: "custom", path: ["match"], message: "needs modalities, text or tool_output" });
          if (match.tool_output !== undefined && turn.on !== "respond")
            ctx.addIssue({
              code: "custom",
              path: ["match", "tool_output"],
              message: `only a respond turn can match tool_output, not ${turn.on}`,
            });
          if (match.modalities !== undefined && turn.on !== "respond")
            ctx.addIssue({
              code: "custom",
              path: ["match", "modalities"],
              message: `only a respond turn can match modalities, not ${turn.on}`,
            });
          if (match.text !== undefined && turn.on !== "text" && turn.on !== "respond" && turn.on !== "commit")
            ctx.addIssue({
              code: "custom",
              path: ["match", "text"],
              message: `only a text, respond or commit turn can match text, not ${turn.on}`,
            });
        }),
    ),
  })
  .strict();

type RawAction = z.output<typeof actionSchema>;

const toAction = (raw: RawAction): ScriptAction => {
  if (raw.speak !== undefined)
    return typeof raw.speak === "string"
      ? { kind: "speak", text: raw.speak }
      : { kind: "speak", text: raw.speak.text, durationMs: raw.speak.duration_ms };
  if (raw.text !== undefined) return { kind: "text", text: raw.text };
  if (raw.input_transcript !== undefined) return { kind: "input_transcript", transcript: raw.input_transcript };
  if (raw.input_transcript_failed !== undefined) {
    return { kind: "input_transcript_failed", message: raw.input_transcript_failed };
  }
  if (raw.incomplete !== undefined) return { kind: "incomplete", reason: raw.incomplete };
  if (raw.listen !== undefined) return { kind: "listen", reason: raw.listen };
  if (raw.fail !== undefined) return { kind: "fail", message: raw.fail };
  if (raw.wait_ms !== undefined) return { kind: "wait", ms: raw.wait_ms };
  if (raw.tool_call !== undefined) {
    const call = raw.tool_call;
    const args = call.arguments ?? {};
    const text = typeof args === "string" ? args : JSON.stringify(args);
    return call.malformed === true
      ? { kind: "tool_call", name: null, callId: null, arguments: text }
      : { kind: "tool_call", name: call.name ?? null, callId: call.call_id ?? null, arguments: text };
  }
  return { kind: "end_turn" };
};

/** `turns.0.actions.1` -> `turns[0].actions[1]`. */
const formatPath = (path: readonly PropertyKey[]): string =>
  path.reduce<string>(
    (out, key) => (typeof key === "number" ? `${out}[${key}]` : out === "" ? String(key) : `${out}.${String(key)}`),
    "",
  );

const describeIssue = (issue: z.core.$ZodIssue): string => {
  const at = formatPath(issue.path);
  if (issue.code === "unrecognized_keys") {
    return issue.keys.map((key) => `${at === "" ? key : `${at}.${key}`}: unknown key`).join("; ");
  }
  return `${at === "" ? "(root)" : at}: ${issue.message}`;
};

/**
 * Validates a parsed script (the object a YAML document gives).
 *
 * @param source what the script came from, for messages (a path).
 * @throws ScriptError naming the path of every bad key (`turns[0].actions[1].speek: unknown key`).
 */
export const validateScript = (value: unknown, source = "script"): Script => {
  const parsed = scriptSchema.safeParse(value);
  if (!parsed.success) {
    throw new ScriptError(`${source} is invalid: ${parsed.error.issues.map(describeIssue).join("; ")}`);
  }
  const raw = parsed.data;
  const caps = raw.capabilities ?? {};
  const capabilities: ScriptCapabilities = {
    ...(caps.chunk_period_ms === undefined ? {} : { chunkPeriodMs: caps.chunk_period_ms }),
    ...(caps.supports_barge_in === undefined ? {} : { supportsBargeIn: caps.supports_barge_in }),
    ...(caps.supports_session_resume === undefined ? {} : { supportsSessionResume: caps.supports_session_resume }),
    ...(caps.supports_audio_truncate === undefined ? {} : { supportsAudioTruncate: caps.supports_audio_truncate }),
    ...(caps.supports_tool_calls === undefined ? {} : { supportsToolCalls: caps.supports_tool_calls }),
  };
  return {
    name: raw.name,
    description: raw.description ?? null,
    capabilities,
    speedFactor: raw.speed_factor ?? Number.POSITIVE_INFINITY,
    whenExhausted: raw.when_exhausted ?? "ignore",
    turns: raw.turns.map((turn) => ({
      on: turn.on,
      ...(turn.match === undefined
        ? {}
        : {
            match: {
              ...(turn.match.modalities === undefined ? {} : { modalities: turn.match.modalities }),
              ...(turn.match.text === undefined ? {} : { text: turn.match.text }),
              ...(turn.match.tool_output === undefined ? {} : { toolOutput: true as const }),
            },
          }),
      actions: turn.actions.map(toAction),
    })),
  };
};

/**
 * Parses and validates a YAML script.
 *
 * @param text the YAML text.
 * @param source what the text came from, for messages (a path).
 * @throws ScriptError (`code: "script_invalid"`) when the text is not YAML or the script does not validate.
 */
export const parseScript = (text: string, source = "script"): Script => {
  let value: unknown;
  try {
    value = parse(text);
  } catch (error) {
    throw new ScriptError(`${source} is not valid YAML: ${(error as Error).message}`, { cause: error });
  }
  return validateScript(value, source);
};

/**
 * Reads, parses and validates a YAML script file.
 *
 * @throws ScriptError (`code: "script_invalid"`) when the file cannot be read or the script is invalid.
 */
export const loadScript = async (path: string): Promise<Script> => {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new ScriptError(`cannot read script ${path}: ${(error as Error).message}`, { cause: error });
  }
  return parseScript(text, path);
};
