import { RateLimiterMemory } from "rate-limiter-flexible";

/** When an address is locked out (`auth` in the deployment config; README, "Configuration"). */
export interface AuthLockoutOptions {
  /** Failed API key checks from one address that lock it out (`auth.max_failed_attempts`). */
  readonly maxFailures: number;
  /** s: failures count within this long of the first one (`auth.failed_attempts_window_s`). */
  readonly windowS: number;
  /** s: how long a locked-out address is refused, whatever key it offers (`auth.lockout_s`). */
  readonly lockoutS: number;
}

/**
 * Refuses an address for a while after repeated failed API key checks, so keys cannot be guessed at the speed of
 * the network. Kept in this process's memory (`rate-limiter-flexible`'s RateLimiterMemory, one entry per failing
 * address, dropped when its window or lockout ends): a restart forgets it, and servers do not share it.
 * Only failures are counted; a successful check neither counts nor clears earlier failures.
 */
export interface AuthLockout {
  /** ms until `address` may try again; 0 when it is not locked out. */
  lockedFor(address: string): Promise<number>;
  /** Counts a failed check from `address`. True when this failure locks it out (for `lockoutS`). */
  failed(address: string): Promise<boolean>;
}

/** Makes an AuthLockout. @throws RangeError when a limit is not positive. */
export const createAuthLockout = (options: AuthLockoutOptions): AuthLockout => {
  const { maxFailures, windowS, lockoutS } = options;
  if (!(maxFailures >= 1 && windowS > 0 && lockoutS > 0)) {
    throw new RangeError(
      `auth lockout: expected max failures >= 1 and positive window and lockout, got ${maxFailures}, ${windowS} s, ${lockoutS} s`,
    );
  }
  // `points` failures fit in a window; a lockout is a `block`, which sets the count to points + 1 for its duration.
  const limiter = new RateLimiterMemory({ keyPrefix: "auth", points: maxFailures, duration: windowS });
  return {
    async lockedFor(address) {
      const entry = await limiter.get(address);
      return entry !== null && entry.consumedPoints > maxFailures ? Math.max(entry.msBeforeNext, 1) : 0;
    },
    async failed(address) {
      const entry = await limiter.penalty(address);
      if (entry.consumedPoints < maxFailures) return false;
      await limiter.block(address, lockoutS);
      return true;
    },
  };
};
