import { afterEach, describe, expect, it, vi } from 'vitest';
import { TokenBucketLimiter, type LimitDecision } from './limiter.ts';
import { SlidingWindowLimiter } from './window-limiter.ts';
import { burstsHalfAWindowApart, describeSlidingWindowLimiter, manualClock, overfullWindows } from './window-limiter.suite.ts';
import { seededRandom } from '../test/seeded-random.ts';

const shared = manualClock();
describeSlidingWindowLimiter('in-process', {
  ...shared,
  create: (options) => new SlidingWindowLimiter(options, shared.now),
  shortWindowMs: 1500,
});

/** The definition, written the plain way (every accepted time in an array), to compare against. */
function definition(limit: number, windowMs: number): (key: string, now: number) => LimitDecision {
  const accepted = new Map<string, number[]>();
  return (key, now) => {
    const inWindow = (accepted.get(key) ?? []).filter((time) => time > now - windowMs);
    accepted.set(key, inWindow);
    if (inWindow.length < limit) {
      inWindow.push(now);
      return { allowed: true, retryAfterSeconds: 0 };
    }
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((inWindow[0]! + windowMs - now) / 1000)) };
  };
}

describe('SlidingWindowLimiter', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a burst at the end of a window and one right after its start: limit in all, then limit again once the window has passed', async () => {
    const clock = manualClock();
    const limiter = new SlidingWindowLimiter({ limit: 10, windowMs: 60_000 }, clock.now);
    const burst = () => Array.from({ length: 10 }, () => limiter.take('ip').allowed).filter(Boolean).length;
    clock.at = 59_000;
    expect(burst()).toBe(10);
    clock.at = 60_000 + 30_000;
    expect(burst()).toBe(0);
    clock.at = 59_000 + 60_000 - 1;
    expect(burst()).toBe(0);
    // The window is (now - 60 s, now]: the takes at 59 s leave it at exactly 119 s.
    clock.at = 59_000 + 60_000;
    expect(burst()).toBe(10);
    await limiter.shutdown();
  });

  it('counts Retry-After down to when the oldest accepted take leaves the window', async () => {
    const clock = manualClock();
    const limiter = new SlidingWindowLimiter({ limit: 2, windowMs: 60_000 }, clock.now);
    limiter.take('ip');
    clock.at = 10_000;
    limiter.take('ip');
    clock.at = 30_000;
    expect(limiter.take('ip')).toEqual({ allowed: false, retryAfterSeconds: 30 });
    clock.at = 59_500;
    expect(limiter.take('ip')).toEqual({ allowed: false, retryAfterSeconds: 1 });
    clock.at = 60_000;
    expect(limiter.take('ip').allowed).toBe(true);
    // Now the take at 10 s is the oldest.
    expect(limiter.take('ip')).toEqual({ allowed: false, retryAfterSeconds: 10 });
    await limiter.shutdown();
  });

  it('decides exactly as the definition does, over random traffic', async () => {
    const next = seededRandom(20240611);
    for (const limit of [1, 2, 3, 5, 8, 40]) {
      const clock = manualClock();
      const windowMs = 10_000;
      const limiter = new SlidingWindowLimiter({ limit, windowMs }, clock.now);
      const expected = definition(limit, windowMs);
      for (let i = 0; i < 5000; i++) {
        // Same-time takes, gaps around the rate, and now and then a long pause.
        const roll = next();
        clock.at += roll < 0.2 ? 0 : roll < 0.97 ? Math.floor(next() * (2 * windowMs / limit)) : windowMs;
        const key = `10.0.0.${Math.floor(next() * 4)}`;
        expect(limiter.take(key), `limit ${limit}, take ${i} at ${clock.at} on ${key}`).toEqual(expected(key, clock.at));
      }
      await limiter.shutdown();
    }
  });

  it('forgets a key once its newest accepted take has left the window', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const clock = manualClock();
    const limiter = new SlidingWindowLimiter({ limit: 5, windowMs: 60_000 }, clock.now);
    for (let i = 0; i < 1000; i++) limiter.take(`192.0.2.${i}`);
    for (let i = 0; i < 5; i++) limiter.take('bursty');
    limiter.take('spread');
    clock.at = 50_000;
    limiter.take('active');
    limiter.take('spread');
    expect(limiter.size).toBe(1003);

    // Kept while the newest take is in the window, even if older ones have left it.
    clock.at = 60_000;
    vi.advanceTimersByTime(60_000);
    expect(limiter.size).toBe(2);
    clock.at = 110_000;
    vi.advanceTimersByTime(60_000);
    expect(limiter.size).toBe(0);
    // Forgetting loses nothing: the key starts from an empty window.
    expect(limiter.take('bursty').allowed).toBe(true);
    await limiter.shutdown();
  });

  it('refuses a limit it cannot enforce', () => {
    expect(() => new SlidingWindowLimiter({ limit: 0, windowMs: 60_000 })).toThrow(/limit/);
    expect(() => new SlidingWindowLimiter({ limit: 2.5, windowMs: 60_000 })).toThrow(/limit/);
  });
});

describe('why the relay needs a window, not a token bucket', () => {
  it('a token bucket of the same rate accepts more than the limit within one window', async () => {
    // 10 a minute with a burst of 10: by half a window it has refilled 5 tokens.
    const clock = manualClock();
    const options = { limit: 10, windowMs: 60_000 };
    const bucket = new TokenBucketLimiter({ ratePerMinute: 10, burst: 10 }, clock.now);
    const { accepted, perBurst } = await burstsHalfAWindowApart(bucket, clock, 'ip', options, 4);
    expect(perBurst).toEqual([10, 5, 5, 5]);
    expect(overfullWindows(accepted, options.limit, options.windowMs)).not.toEqual([]);
    await bucket.shutdown();
  });
});
