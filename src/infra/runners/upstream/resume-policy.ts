/**
 * How a dropped duplex upstream session is resumed (reference/realtime-duplex-api.md, "Reconnect and resume"): the
 * policy a deployment sets (`runner.resume`, src/infra/config.ts) and the backoff with jitter it gives each try.
 */

/**
 * How the link retries a dropped duplex upstream session. Times in ms. The first try comes after `initialDelayMs`;
 * each later one waits twice as long as the one before, at most `maxDelayMs`, each delay drawn at random between half
 * of it and all of it (jitter, so that the sessions of a restarted upstream do not come back in step). No try starts
 * after `graceMs` since the drop.
 */
export interface ResumePolicy {
  readonly graceMs: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
}

export const DEFAULT_RESUME_POLICY: ResumePolicy = { graceMs: 10_000, initialDelayMs: 100, maxDelayMs: 2000 };

/** The longest a resume may be retried (ms): the reference's default disconnect grace is 30 s; ten times that. */
export const MAX_RESUME_GRACE_MS = 300_000;

/**
 * The delay before the try after `attempts` failed ones (ms): `min(maxDelayMs, initialDelayMs * 2^attempts)`,
 * drawn between half of it and all of it with `random` (in [0, 1)).
 */
export const resumeDelayMs = (policy: ResumePolicy, attempts: number, random: () => number = Math.random): number => {
  const step = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** attempts);
  return step / 2 + random() * (step / 2);
};

/**
 * Error codes with which a model server refuses a new session at its own capacity (reference, "Errors": its
 * `duplex_session.max_sessions`): the session here ends `duplex_session_busy`, a retryable refusal (1013).
 */
export const AT_CAPACITY = new Set(["duplex_session_busy", "resource_exhausted"]);

/** Error codes with which the upstream says its session is gone: retrying the same token cannot help. */
export const GONE = new Set([
  "session_resume_expired",
  "invalid_resume_token",
  "unsupported_session_resume",
  "unknown_session",
]);
