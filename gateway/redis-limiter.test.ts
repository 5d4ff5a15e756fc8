/**
 * Cluster-wide token buckets on a real Redis: this file starts its own redis-server on a free
 * port (so it can stop and restart it without touching the machine's shared one).
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../test/harness.ts';
import { RedisTokenBucketLimiter } from './redis-limiter.ts';
import { TestRedisServer } from '../test/redis-test-server.ts';

const redis = new TestRedisServer();
const log = pino({ level: 'silent' });
const client = () => redis.client();

beforeAll(() => redis.start());
afterAll(() => redis.close());

describe('RedisTokenBucketLimiter', () => {
  it('shares one bucket between gateways', async () => {
    // One token a minute: no refill between the takes however slow the machine is.
    const options = { ratePerMinute: 1, burst: 5, keyPrefix: 'test:shared:' };
    const a = new RedisTokenBucketLimiter(await client(), options, log);
    const b = new RedisTokenBucketLimiter(await client(), options, log);
    const decisions = [];
    for (let i = 0; i < 6; i++) decisions.push(await (i % 2 === 0 ? a : b).take('198.51.100.7'));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
    expect(decisions[5]!.retryAfterSeconds).toBe(60);
    expect((await a.take('203.0.113.1')).allowed).toBe(true);
    expect(a.mode).toBe('redis');
  });

  it('refills at the configured rate', async () => {
    // 30/min: a token every 2 s (Redis's clock decides, so the test polls instead of sleeping).
    const limiter = new RedisTokenBucketLimiter(await client(), { ratePerMinute: 30, burst: 1, keyPrefix: 'test:refill:' }, log);
    const emptiedAt = Date.now();
    expect((await limiter.take('ip')).allowed).toBe(true);
    const refused = await limiter.take('ip');
    expect([refused.allowed, refused.retryAfterSeconds]).toEqual([false, 2]);
    await eventually(async () => (await limiter.take('ip')).allowed, 15_000, 200);
    expect(Date.now() - emptiedAt).toBeGreaterThanOrEqual(1500);
  });

  it('falls back to local buckets while Redis is down, and returns to Redis after', async () => {
    const limiter = new RedisTokenBucketLimiter(await client(), { ratePerMinute: 1, burst: 3, keyPrefix: 'test:down:', retryIntervalMs: 200 }, log);
    expect((await limiter.take('ip')).allowed).toBe(true);
    await redis.stop();
    const during = [];
    for (let i = 0; i < 4; i++) during.push((await limiter.take('ip')).allowed);
    expect(limiter.mode).toBe('local-fallback');
    // Traffic is not all refused: the local bucket (burst 3) decides.
    expect(during).toEqual([true, true, true, false]);
    expect(limiter.fallbackDecisions).toBe(4);

    await redis.start();
    await eventually(async () => {
      await limiter.take('other');
      return limiter.mode === 'redis';
    }, 15_000, 100);
  });
});
