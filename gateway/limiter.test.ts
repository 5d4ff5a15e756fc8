import { describe, expect, it } from 'vitest';
import { TokenBucketLimiter } from './limiter.ts';

describe('TokenBucketLimiter', () => {
  it('allows a burst up to the bucket size, then refuses with Retry-After', async () => {
    let now = 0;
    const limiter = new TokenBucketLimiter({ ratePerMinute: 600, burst: 5 }, () => now);
    for (let i = 0; i < 5; i++) expect(limiter.take('1.2.3.4').allowed).toBe(true);
    const refused = limiter.take('1.2.3.4');
    expect(refused).toEqual({ allowed: false, retryAfterSeconds: 1 });
    // Other IPs have their own bucket.
    expect(limiter.take('5.6.7.8').allowed).toBe(true);
    // 600/min refills one token every 100 ms.
    now += 100;
    expect(limiter.take('1.2.3.4').allowed).toBe(true);
    expect(limiter.take('1.2.3.4').allowed).toBe(false);
    await limiter.shutdown();
  });

  it('computes Retry-After from the refill rate', async () => {
    let now = 0;
    const limiter = new TokenBucketLimiter({ ratePerMinute: 6, burst: 1 }, () => now);
    expect(limiter.take('a').allowed).toBe(true);
    expect(limiter.take('a').retryAfterSeconds).toBe(10);
    now += 4_000;
    expect(limiter.take('a').retryAfterSeconds).toBe(6);
    await limiter.shutdown();
  });
});
