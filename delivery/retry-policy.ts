/**
 * When a failed attempt is tried again: exponential backoff with jitter, never sooner than the
 * provider's Retry-After, for at most `attempts` attempts per series. With the defaults (10
 * attempts, 15 s base, 1 h cap) a job that keeps failing is tried over about two hours:
 * 15 s, 30 s, 1 min, 2 min, 4 min, 8 min, 16 min, 32 min, 1 h — each drawn from half to all of
 * its step, so jobs that failed together do not all come back together.
 */
export interface RetryPolicyOptions {
  /** Attempts per series, the first included: the last failure makes the job dead. */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

/** A Retry-After longer than this is not waited for in full (a broken provider must not park a job for weeks). */
const MAX_RETRY_AFTER_MS = 24 * 60 * 60 * 1000;

export class RetryPolicy {
  constructor(readonly options: RetryPolicyOptions, private readonly random: () => number = Math.random) {}

  /** Whether a failed attempt number `attempt` (1-based) leaves another. */
  hasNext(attempt: number): boolean {
    return attempt < this.options.attempts;
  }

  /** The wait after failed attempt `attempt`: the step drawn from [step/2, step], at least the provider's Retry-After. */
  delayAfter(attempt: number, retryAfterMs?: number): number {
    const { baseDelayMs, maxDelayMs } = this.options;
    const step = Math.min(maxDelayMs, baseDelayMs * 2 ** Math.min(30, attempt - 1));
    const jittered = Math.round(step / 2 + (step / 2) * this.random());
    return Math.max(jittered, Math.min(retryAfterMs ?? 0, MAX_RETRY_AFTER_MS));
  }
}
