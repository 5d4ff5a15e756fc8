/**
 * Lockout with backoff, per key: the in-process driver (RedisBackoffLockout shares the state
 * between gateways). Every take counts as a failure until `reset` says it was not one: a key
 * that takes `failures` times is refused for `lockoutMs`, the next lockout in a row for twice
 * that, up to `maxLockoutMs`. What a key did is forgotten `maxLockoutMs` after its last take (or
 * after its lockout ended), so the backoff starts again from the first step.
 *
 * Counting before the outcome is known is what makes it hold under concurrency: a burst of
 * attempts at once cannot all pass a check that only a finished failure would close.
 */
import type { LimitDecision, Limiter } from './limiter.ts';

export interface LockoutOptions {
  /** Takes (failures) after which the key is locked out. */
  failures: number;
  /** The first lockout, in ms; each one in a row doubles it. */
  lockoutMs: number;
  /** The longest lockout, in ms; also how long a quiet key is remembered. */
  maxLockoutMs: number;
}

/** A Limiter whose count a success clears. */
export interface Lockout extends Limiter {
  /** The key's attempt succeeded: its failures and backoff are forgotten. */
  reset(key: string): Promise<void> | void;
}

/** The longest backoff step counted: 2^30 times the first lockout is past any cap. */
const MAX_LEVEL = 31;
/**
 * Keys held at most (about 100 bytes each): past it the least recently tried is forgotten. An
 * attacker spraying made-up emails from many networks would otherwise grow the map for as long
 * as maxLockoutMs; at the cap, keeping one account locked means out-trying 100,000 others.
 */
export const MAX_LOCKOUT_KEYS = 100_000;

interface Held {
  /** Takes since the last lockout (or since the key was first seen). */
  failures: number;
  /** Lockouts in a row; the next one lasts lockoutMs * 2^level. */
  level: number;
  lockedUntil: number;
  /** When the key is forgotten (its state carries no information after that). */
  forgetAt: number;
}

/** The length of the lockout that follows `level` earlier ones. */
export function lockoutLength(options: LockoutOptions, level: number): number {
  return Math.min(options.maxLockoutMs, options.lockoutMs * 2 ** Math.min(level, MAX_LEVEL));
}

export class BackoffLockout implements Lockout {
  private readonly held = new Map<string, Held>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly options: LockoutOptions,
    private readonly now: () => number = performance.now.bind(performance),
    private readonly maxKeys = MAX_LOCKOUT_KEYS,
  ) {
    if (!Number.isInteger(options.failures) || options.failures < 1 || !(options.lockoutMs > 0) || !(options.maxLockoutMs > 0)) {
      throw new Error('BackoffLockout needs an integer failures >= 1, lockoutMs > 0 and maxLockoutMs > 0');
    }
    // Keys nobody tried for a while are forgotten, so memory tracks recent attempts only.
    this.sweeper = setInterval(() => this.sweep(), 60_000).unref();
  }

  /** Keys held in memory. */
  get size(): number {
    return this.held.size;
  }

  take(key: string): LimitDecision {
    const now = this.now();
    let held = this.held.get(key);
    if (held && held.forgetAt <= now) held = undefined;
    if (held && held.lockedUntil > now) {
      this.touch(key, held);
      return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((held.lockedUntil - now) / 1000)) };
    }
    held ??= { failures: 0, level: 0, lockedUntil: 0, forgetAt: 0 };
    held.failures++;
    if (held.failures >= this.options.failures) {
      held.lockedUntil = now + lockoutLength(this.options, held.level);
      held.level = Math.min(held.level + 1, MAX_LEVEL);
      held.failures = 0;
    }
    held.forgetAt = Math.max(held.lockedUntil, now) + this.options.maxLockoutMs;
    this.touch(key, held);
    return { allowed: true, retryAfterSeconds: 0 };
  }

  /** Re-inserts the key, so the map's order is the order of last tries: past maxKeys the first key is forgotten. */
  private touch(key: string, held: Held): void {
    this.held.delete(key);
    this.held.set(key, held);
    if (this.held.size > this.maxKeys) this.held.delete(this.held.keys().next().value!);
  }

  reset(key: string): void {
    this.held.delete(key);
  }

  async shutdown(): Promise<void> {
    clearInterval(this.sweeper);
  }

  private sweep(): void {
    const now = this.now();
    for (const [key, held] of this.held) if (held.forgetAt <= now) this.held.delete(key);
  }
}
