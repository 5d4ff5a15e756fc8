/**
 * Per-client-IP token buckets on ingestion. Driver interface so the cluster can share buckets
 * through Redis; TokenBucketLimiter is the in-process driver.
 */
export interface LimitDecision {
  allowed: boolean;
  /** When refused: whole seconds until a token is available (at least 1). */
  retryAfterSeconds: number;
}

export interface Limiter {
  take(key: string): Promise<LimitDecision> | LimitDecision;
  shutdown(): Promise<void>;
}

export interface TokenBucketOptions {
  ratePerMinute: number;
  burst: number;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export class TokenBucketLimiter implements Limiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly options: TokenBucketOptions, private readonly now: () => number = performance.now.bind(performance)) {
    this.perMs = options.ratePerMinute / 60_000;
    // A full bucket carries no information: forget it, so memory tracks active clients only.
    this.sweeper = setInterval(() => this.sweep(), 60_000).unref();
  }

  take(key: string): LimitDecision {
    const now = this.now();
    let bucket = this.buckets.get(key);
    if (!bucket) this.buckets.set(key, (bucket = { tokens: this.options.burst, updatedAt: now }));
    bucket.tokens = Math.min(this.options.burst, bucket.tokens + (now - bucket.updatedAt) * this.perMs);
    bucket.updatedAt = now;
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true, retryAfterSeconds: 0 };
    }
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / this.perMs / 1000)) };
  }

  async shutdown(): Promise<void> {
    clearInterval(this.sweeper);
  }

  private sweep(): void {
    const now = this.now();
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + (now - bucket.updatedAt) * this.perMs >= this.options.burst) this.buckets.delete(key);
    }
  }
}
