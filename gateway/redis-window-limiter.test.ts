/**
 * Cluster-wide sliding windows on a real Redis: this file starts its own redis-server on a free
 * port (so it can pause, stop and restart it without touching the machine's shared one).
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../test/harness.ts';
import type { Limiter } from './limiter.ts';
import { RedisSlidingWindowLimiter, type RedisWindowLimiterOptions } from './redis-window-limiter.ts';
import { TestRedisServer } from '../test/redis-test-server.ts';
import { describeSlidingWindowLimiter } from './window-limiter.suite.ts';

const server = new TestRedisServer();
const silent = pino({ level: 'silent' });
// Generous, so that a loaded machine does not push the cases that check Redis's decisions onto
// the local fallback; the fallback cases set their own.
const commandTimeoutMs = 5000;

beforeAll(() => server.start());
afterAll(() => server.close());

async function limiter(options: RedisWindowLimiterOptions, log = silent): Promise<RedisSlidingWindowLimiter> {
  return new RedisSlidingWindowLimiter(await server.client(), { commandTimeoutMs, keyPrefix: `test:${randomUUID()}:`, ...options }, log);
}

/** A logger whose lines the test reads. */
function recordingLog() {
  const lines: Array<{ level: number; msg: string }> = [];
  return { lines, log: pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) }) };
}

describeSlidingWindowLimiter('Redis', {
  create: (options) => limiter(options),
  // Real time passes in the cases that wait a window out.
  shortWindowMs: 1500,
  now: () => Date.now(),
  pass: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  verify: (made: Limiter) => {
    // Redis decided every take: a suite passed by the local fallback would prove nothing.
    const redisLimiter = made as RedisSlidingWindowLimiter;
    expect([redisLimiter.mode, redisLimiter.fallbackDecisions]).toEqual(['redis', 0]);
  },
});

describe('RedisSlidingWindowLimiter', () => {
  it('shares one window between gateways', async () => {
    const options = { limit: 5, windowMs: 60_000, keyPrefix: `test:${randomUUID()}:` };
    const a = await limiter(options);
    const b = await limiter(options);
    const decisions = [];
    for (let i = 0; i < 6; i++) decisions.push(await (i % 2 === 0 ? a : b).take('198.51.100.7'));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
    expect(decisions[5]!.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(decisions[5]!.retryAfterSeconds).toBeLessThanOrEqual(60);
    expect((await a.take('203.0.113.1')).allowed).toBe(true);
    expect([a.mode, b.mode]).toEqual(['redis', 'redis']);
  });

  it('keeps at most `limit` members per key, and an idle key expires with its window', async () => {
    const keyPrefix = `test:${randomUUID()}:`;
    const windows = await limiter({ limit: 3, windowMs: 1500, keyPrefix });
    for (let i = 0; i < 6; i++) await windows.take('ip');
    const admin = await server.client();
    expect(await admin.zCard(`${keyPrefix}ip`)).toBe(3);
    const ttl = await admin.pTTL(`${keyPrefix}ip`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1500);
    await eventually(async () => (await admin.exists(`${keyPrefix}ip`)) === 0, 10_000, 100);
  });

  it('loads its script again when Redis has lost it', async () => {
    const keyPrefix = `test:${randomUUID()}:`;
    const windows = await limiter({ limit: 2, windowMs: 60_000, keyPrefix });
    expect((await windows.take('ip')).allowed).toBe(true);
    const admin = await server.client();
    await admin.scriptFlush();
    expect((await windows.take('ip')).allowed).toBe(true);
    expect((await windows.take('ip')).allowed).toBe(false);
    expect(await admin.zCard(`${keyPrefix}ip`)).toBe(2);
    expect([windows.mode, windows.fallbackDecisions]).toEqual(['redis', 0]);
  });

  it('does not count its own event loop\'s stall against Redis: a healthy Redis still decides', async () => {
    const { lines, log } = recordingLog();
    const windows = await limiter({ limit: 3, windowMs: 60_000, commandTimeoutMs: 100 }, log);
    for (let i = 0; i < 2; i++) {
      const decision = windows.take('ip');
      // A synchronous stall three timeouts long (a long GC, an in-process insert), while Redis answers at once.
      const until = performance.now() + 300;
      while (performance.now() < until);
      expect((await decision).allowed).toBe(true);
    }
    expect([windows.mode, windows.fallbackDecisions]).toEqual(['redis', 0]);
    expect(lines.filter((line) => line.msg.includes('Redis unavailable'))).toEqual([]);
  });

  it('falls back to a local window while Redis is slow, says so once, and returns to Redis after', async () => {
    const { lines, log } = recordingLog();
    const windows = await limiter({ limit: 3, windowMs: 60_000, commandTimeoutMs: 200, retryIntervalMs: 200 }, log);
    expect((await windows.take('ip')).allowed).toBe(true);
    // Scripts are writes: Redis holds them (and answers nothing) until the pause is lifted.
    const admin = await server.client();
    await admin.clientPause(60_000, 'WRITE');
    try {
      const during = [];
      for (let i = 0; i < 4; i++) during.push((await windows.take('ip')).allowed);
      expect(windows.mode).toBe('local-fallback');
      // Traffic is not all refused: the local window (limit 3, empty so far) decides.
      expect(during).toEqual([true, true, true, false]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await windows.take('ip'); // tries Redis again, which still does not answer
      expect(windows.fallbackDecisions).toBe(5);
    } finally {
      await admin.clientUnpause();
    }
    await eventually(async () => {
      await windows.take('other');
      return windows.mode === 'redis';
    }, 15_000, 100);
    expect(lines.filter((line) => line.msg.includes('Redis unavailable')).length).toBe(1);
    expect(lines.filter((line) => line.msg.includes('Redis is back')).length).toBe(1);
  });

  it('falls back to a local window while Redis is down, and returns to Redis after', async () => {
    const windows = await limiter({ limit: 3, windowMs: 60_000, retryIntervalMs: 200 });
    expect((await windows.take('ip')).allowed).toBe(true);
    await server.stop();
    try {
      const during = [];
      for (let i = 0; i < 4; i++) during.push((await windows.take('ip')).allowed);
      expect(windows.mode).toBe('local-fallback');
      expect(during).toEqual([true, true, true, false]);
      expect(windows.fallbackDecisions).toBe(4);
    } finally {
      await server.start();
    }
    await eventually(async () => {
      await windows.take('other');
      return windows.mode === 'redis';
    }, 15_000, 100);
  });
});
