/**
 * The sign-in lockout on a real Redis, shared between gateways: this file starts its own
 * redis-server on a free port (so it can stop it without touching the machine's shared one).
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../test/harness.ts';
import type { Lockout } from './lockout.ts';
import { describeLockout } from './lockout.suite.ts';
import { RedisBackoffLockout, type RedisLockoutOptions } from './redis-lockout.ts';
import { TestRedisServer } from '../test/redis-test-server.ts';

const server = new TestRedisServer();
const silent = pino({ level: 'silent' });
// Generous, so that a loaded machine does not push the contract's cases onto the local fallback.
const commandTimeoutMs = 5000;

beforeAll(() => server.start());
afterAll(() => server.close());

async function lockout(options: RedisLockoutOptions): Promise<RedisBackoffLockout> {
  return new RedisBackoffLockout(await server.client(), { commandTimeoutMs, keyPrefix: `test:${randomUUID()}:`, ...options }, silent);
}

describeLockout('Redis', {
  create: (options) => lockout(options),
  // Real time passes in the case that waits lockouts out.
  shortLockoutMs: 1000,
  now: () => Date.now(),
  pass: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  verify: (made: Lockout) => {
    // Redis decided every take: a suite passed by the local fallback would prove nothing.
    const redisLockout = made as RedisBackoffLockout;
    expect([redisLockout.mode, redisLockout.fallbackDecisions]).toEqual(['redis', 0]);
  },
});

describe('RedisBackoffLockout', () => {
  it('shares one count between gateways: failures on either lock the account on both, a success on either clears it', async () => {
    const options = { failures: 4, lockoutMs: 60_000, maxLockoutMs: 900_000, keyPrefix: `test:${randomUUID()}:` };
    const a = await lockout(options);
    const b = await lockout(options);
    const allowed = [];
    for (let i = 0; i < 5; i++) allowed.push((await (i % 2 === 0 ? a : b).take('account')).allowed);
    expect(allowed).toEqual([true, true, true, true, false]);
    expect((await a.take('account')).allowed).toBe(false);
    await b.reset('account');
    expect((await a.take('account')).allowed).toBe(true);
    expect([a.mode, b.mode]).toEqual(['redis', 'redis']);
  });

  it('keeps a quiet key for the longest lockout only', async () => {
    const keyPrefix = `test:${randomUUID()}:`;
    const made = await lockout({ failures: 2, lockoutMs: 500, maxLockoutMs: 1000, keyPrefix });
    await made.take('account');
    const admin = await server.client();
    const ttl = await admin.pTTL(`${keyPrefix}account`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1000);
    await eventually(async () => (await admin.exists(`${keyPrefix}account`)) === 0, 10_000, 100);
  });

  it('falls back to a local lockout while Redis is down, and returns to Redis after', async () => {
    const made = await lockout({ failures: 2, lockoutMs: 60_000, maxLockoutMs: 900_000, retryIntervalMs: 200 });
    expect((await made.take('account')).allowed).toBe(true);
    await server.stop();
    try {
      const during = [];
      for (let i = 0; i < 3; i++) during.push((await made.take('account')).allowed);
      expect(made.mode).toBe('local-fallback');
      // Sign-in is not all refused: the local lockout (empty so far) decides.
      expect(during).toEqual([true, true, false]);
      await made.reset('account');
    } finally {
      await server.start();
    }
    await eventually(async () => {
      await made.take('other');
      return made.mode === 'redis';
    }, 15_000, 100);
  });
});
