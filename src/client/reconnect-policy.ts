/**
 * How a DuplexClient reconnects after a drop (reference/realtime-duplex-api.md, "Reconnect and resume"): up to
 * `attempts` connections, the n-th (from 1) after a delay of `min(maxDelayMs, baseDelayMs * 2^(n-1))` ms, scaled by
 * a random factor in [0.5, 1] when `jitter` is on (so many clients dropped together do not reconnect in step).
 */
export interface ReconnectPolicy {
  /** Connections tried before the client gives up with `reconnect_failed`. At least 1. */
  readonly attempts: number;
  /** Delay before the first attempt, ms. */
  readonly baseDelayMs: number;
  /** Largest delay between attempts, ms. */
  readonly maxDelayMs: number;
  /** Scale each delay by a random factor in [0.5, 1]. Default true. */
  readonly jitter?: boolean;
}

/** The reference's default: five attempts with 0.25 to 4 s of jittered backoff. */
export const DEFAULT_RECONNECT_POLICY: ReconnectPolicy = {
  attempts: 5,
  baseDelayMs: 250,
  maxDelayMs: 4000,
  jitter: true,
};

/**
 * The delay before attempt `attempt` (1-based), ms. `random` returns a number in [0, 1) (Math.random by default;
 * tests pass their own).
 */
export const reconnectDelayMs = (policy: ReconnectPolicy, attempt: number, random: () => number = Math.random) => {
  const exponential = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(policy.jitter === false ? exponential : exponential * (0.5 + random() / 2));
};

/**
 * WebSocket close codes after which the session is still there to resume: 1001 (going away), 1005 (no code), 1006
 * (dropped without a close frame: a network failure, a killed server), 1011 (the server let the socket go after a
 * failed append: the session waits in its log), 1012 (service restart: the server shuts down and comes back), 1013
 * (try again later: output backpressure detached the socket). Any other close, or a close that follows
 * `session.closed`, `session.expired` or `session.replaced`, ends the client.
 */
export const RESUMABLE_CLOSE_CODES: readonly number[] = [1001, 1005, 1006, 1011, 1012, 1013];
