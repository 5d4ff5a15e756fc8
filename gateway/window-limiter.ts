/**
 * SlidingWindowLimiter: at most `limit` accepted takes per key in ANY `windowMs` window, the
 * in-process driver (RedisSlidingWindowLimiter shares the windows between gateways). Unlike a
 * token bucket, nothing refills during a burst: a take is allowed iff fewer than `limit`
 * accepted takes lie in (now - windowMs, now]. Refused takes are not recorded.
 */
import type { LimitDecision, Limiter } from './limiter.ts';

export interface SlidingWindowOptions {
  /** Accepted takes per key in any window. */
  limit: number;
  /** Length of the window in ms (60 000 for "per minute"). */
  windowMs: number;
}

/**
 * The accepted times of one key, oldest first, in a ring that grows up to `limit`. Only keys
 * with two or more takes in the window need one: a single take is kept as a bare number.
 */
class AcceptedTimes {
  private times: Float64Array;
  private head = 0;
  size = 2;

  constructor(first: number, second: number, private readonly limit: number) {
    this.times = new Float64Array(Math.min(limit, 4));
    this.times[0] = first;
    this.times[1] = second;
  }

  get oldest(): number {
    return this.times[this.head]!;
  }

  get newest(): number {
    return this.times[(this.head + this.size - 1) % this.times.length]!;
  }

  /** Forgets the times at or before `cutoff` (they have left the window). */
  dropThrough(cutoff: number): void {
    while (this.size > 0 && this.oldest <= cutoff) {
      this.head = (this.head + 1) % this.times.length;
      this.size--;
    }
  }

  /** Callers push only while size < limit, so the ring never outgrows `limit`. */
  push(time: number): void {
    if (this.size === this.times.length) this.grow();
    this.times[(this.head + this.size) % this.times.length] = time;
    this.size++;
  }

  private grow(): void {
    const grown = new Float64Array(Math.min(this.limit, this.times.length * 2));
    for (let i = 0; i < this.size; i++) grown[i] = this.times[(this.head + i) % this.times.length]!;
    this.times = grown;
    this.head = 0;
  }
}

export class SlidingWindowLimiter implements Limiter {
  private readonly windows = new Map<string, number | AcceptedTimes>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly options: SlidingWindowOptions, private readonly now: () => number = performance.now.bind(performance)) {
    if (!Number.isInteger(options.limit) || options.limit < 1 || !(options.windowMs > 0)) throw new Error('SlidingWindowLimiter needs an integer limit >= 1 and windowMs > 0');
    // A key with nothing left in its window carries no information: forget it, so memory
    // tracks active clients only.
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, options.windowMs)).unref();
  }

  /** Keys held in memory (clients with an accepted take in the window, until the next sweep). */
  get size(): number {
    return this.windows.size;
  }

  take(key: string): LimitDecision {
    const now = this.now();
    const cutoff = now - this.options.windowMs;
    const held = this.windows.get(key);
    if (held === undefined || (typeof held === 'number' && held <= cutoff)) {
      this.windows.set(key, now);
      return { allowed: true, retryAfterSeconds: 0 };
    }
    if (typeof held === 'number') {
      if (this.options.limit === 1) return this.refuse(held, now);
      this.windows.set(key, new AcceptedTimes(held, now, this.options.limit));
      return { allowed: true, retryAfterSeconds: 0 };
    }
    held.dropThrough(cutoff);
    // Back to a bare number: a key that burst once does not keep its ring.
    if (held.size === 0) {
      this.windows.set(key, now);
      return { allowed: true, retryAfterSeconds: 0 };
    }
    if (held.size >= this.options.limit) return this.refuse(held.oldest, now);
    held.push(now);
    return { allowed: true, retryAfterSeconds: 0 };
  }

  async shutdown(): Promise<void> {
    clearInterval(this.sweeper);
  }

  /** Refused until the oldest accepted take leaves the window. */
  private refuse(oldest: number, now: number): LimitDecision {
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((oldest + this.options.windowMs - now) / 1000)) };
  }

  private sweep(): void {
    const cutoff = this.now() - this.options.windowMs;
    for (const [key, held] of this.windows) {
      if ((typeof held === 'number' ? held : held.newest) <= cutoff) this.windows.delete(key);
    }
  }
}
