/**
 * The `runner` section of the deployment configuration (DESIGN.md, "Configuration"; deploy/*.yaml): which model
 * runner serves the sessions (`echo`, `upstream` with its link and resume policy, or `scripted` with its script),
 * and the model profile it is shown as.
 */
import { z } from "zod";
import { DEFAULT_RESUME_POLICY, MAX_RESUME_GRACE_MS } from "./runners/upstream/resume-policy.ts";

/**
 * A model profile (src/domain/profiles.ts) written out in full, as deploy/minicpmo_4_5.yaml and its siblings carry
 * the reference's capability table; or just the name of a built-in one (`profile: personaplex`).
 */
export const profileSchema = z.union([
  z.enum(["minicpmo_4_5", "personaplex", "nemotron_voicechat"]),
  z
    .object({
      name: z.string().regex(/^[A-Za-z0-9_.-]+$/, "expected letters, digits, '_', '.' or '-'"),
      model: z.string().min(1),
      implementation_level: z.literal("model_native_duplex"),
      native_duplex: z.enum(["always", "opt_in"]),
      chunk_period_ms: z.number().int().positive(),
      supports_session_resume: z.boolean(),
      supports_barge_in: z.boolean(),
      supports_audio_truncate: z.boolean(),
      supports_video_input: z.boolean(),
      supports_tool_calls: z.boolean(),
      supports_speed: z.boolean().optional(),
      ref_audio: z.enum(["required", "optional"]),
    })
    .strict(),
]);

export type ProfileConfig = z.infer<typeof profileSchema>;

/**
 * The runner: `echo` (default), `upstream` (a realtime model server over WebSocket), `scripted` (a script file) or
 * `recorded` (a recorded session's model, played back).
 * Times in ms.
 */
export const runnerSchema = z
  .discriminatedUnion("kind", [
    z
      .object({
        kind: z.literal("echo"),
        /** Length of a spoken unit, ms; default: the profile's chunk period, else 200. */
        chunk_period_ms: z.number().int().positive().optional(),
        speed_factor: z.number().positive().default(4),
        profile: profileSchema.optional(),
      })
      .strict(),
    z
      .object({
        kind: z.literal("upstream"),
        /** The upstream's realtime endpoint, `ws://` or `wss://` (a duplex server: `.../v1/realtime?duplex=1`). */
        url: z.string().regex(/^wss?:\/\//, "expected a ws:// or wss:// URL"),
        dialect: z.enum(["duplex", "openai"]).default("duplex"),
        /** openai dialect: `ours` (our server VAD and commits end turns) or `upstream` (its server VAD does). */
        vad: z.enum(["ours", "upstream"]).default("ours"),
        model: z.string().min(1).optional(),
        /** The environment variable holding the upstream's API key (the key itself is never in a file). */
        api_key_env: z.string().min(1).optional(),
        headers: z.record(z.string(), z.string()).default({}),
        connect_timeout_ms: z.number().int().positive().default(5000),
        /** How often a duplex upstream session is sent a heartbeat, so its idle TTL does not run out (ms). */
        heartbeat_ms: z.number().int().positive().default(10_000),
        /** A PEM file of certificates to trust for a `wss://` upstream (a self-signed or private CA). */
        ca_file: z.string().min(1).optional(),
        /**
         * How a dropped duplex upstream session is resumed (ms): tries from `initial_delay_ms`, each delay doubled
         * up to `max_delay_ms` and drawn between half of it and all of it, none after `grace_ms` since the drop
         * (keep it within the upstream's own disconnect grace, 30 s by default).
         */
        resume: z
          .object({
            grace_ms: z.number().int().positive().max(MAX_RESUME_GRACE_MS).default(DEFAULT_RESUME_POLICY.graceMs),
            initial_delay_ms: z.number().int().positive().default(DEFAULT_RESUME_POLICY.initialDelayMs),
            max_delay_ms: z.number().int().positive().default(DEFAULT_RESUME_POLICY.maxDelayMs),
          })
          .strict()
          .default({
            grace_ms: DEFAULT_RESUME_POLICY.graceMs,
            initial_delay_ms: DEFAULT_RESUME_POLICY.initialDelayMs,
            max_delay_ms: DEFAULT_RESUME_POLICY.maxDelayMs,
          }),
        profile: profileSchema.optional(),
      })
      .strict(),
    z
      .object({
        kind: z.literal("recorded"),
        /**
         * A session file (`duplex export`) whose model is played back to sessions whose input matches it
         * (src/infra/runners/recorded.ts); its recorded capabilities are the runner's.
         */
        log: z.string().min(1),
        profile: profileSchema.optional(),
      })
      .strict(),
    z
      .object({
        kind: z.literal("scripted"),
        /** A script file (YAML), e.g. deploy/scripts/greeting.yaml. */
        script: z.string().min(1),
        profile: profileSchema.optional(),
      })
      .strict(),
  ])
  .default({ kind: "echo", speed_factor: 4 });
