import { describe, expect, it } from 'vitest';
import { RetryPolicy } from './retry-policy.ts';

describe('RetryPolicy', () => {
  const options = { attempts: 10, baseDelayMs: 15_000, maxDelayMs: 3_600_000 };

  it('doubles the step per attempt up to the cap, each delay drawn from half to all of its step', () => {
    const low = new RetryPolicy(options, () => 0);
    const high = new RetryPolicy(options, () => 1);
    const steps = [15_000, 30_000, 60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000, 3_600_000];
    steps.forEach((step, index) => {
      expect(high.delayAfter(index + 1)).toBe(step);
      expect(low.delayAfter(index + 1)).toBe(step / 2);
    });
  });

  it('spreads jobs that failed together', () => {
    const policy = new RetryPolicy(options);
    const delays = new Set(Array.from({ length: 50 }, () => policy.delayAfter(3)));
    expect(delays.size).toBeGreaterThan(10);
  });

  it('waits at least what Retry-After asked, within a day', () => {
    const policy = new RetryPolicy(options, () => 0);
    expect(policy.delayAfter(1, 120_000)).toBe(120_000);
    expect(policy.delayAfter(1, 1000)).toBe(7500);
    expect(policy.delayAfter(1, 90 * 24 * 3600 * 1000)).toBe(24 * 3600 * 1000);
  });

  it('counts the attempts of a series', () => {
    const policy = new RetryPolicy({ ...options, attempts: 3 });
    expect([1, 2, 3].map((attempt) => policy.hasNext(attempt))).toEqual([true, true, false]);
  });
});
