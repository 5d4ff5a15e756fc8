/**
 * Credentials in service URLs never reach a log line or an error: NATS against the real
 * nats-server (NATS_URL, default nats://127.0.0.1:4222; it has no auth and accepts the
 * credentials it does not check) and one of the test's own that requires a token, Redis on a
 * port where nothing listens.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../core/config.ts';
import { createLogger, type Logger } from '../core/log.ts';
import { testConfig } from '../test/harness.ts';
import { startNatsServer } from '../test/sluice-processes.ts';
import { descriptorUse } from '../core/descriptors.ts';
import { TestRedisServer } from '../test/redis-test-server.ts';
import { connectNats, createLimiter, defaultMaxConnections, grpcLimits } from './components.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
/** NATS_URL's host:port, to build URLs with credentials in them. */
const NATS_HOST = new URL(NATS_URL).host;

/** A logger whose lines the test reads. */
function capturedLog(): { log: Logger; text: () => string } {
  const lines: string[] = [];
  return { log: createLogger('info', { write: (line: string) => void lines.push(line) }), text: () => lines.join('') };
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('connectNats', () => {
  it('names an unreachable server without its password', async () => {
    const { log, text } = capturedLog();
    const config = testConfig('/nonexistent', { 'nats.url': 'nats://user:secret-pw@127.0.0.1:1' });
    const error: Error = await connectNats(config, log).then(
      () => {
        throw new Error('connected to a port where nothing listens');
      },
      (err) => err,
    );
    expect(error.message).toContain('cannot reach NATS at nats://user@127.0.0.1:1');
    expect(error.message).not.toContain('secret-pw');
    expect(JSON.stringify(error.cause ?? null)).not.toContain('secret-pw');
    expect(text()).not.toContain('secret-pw');
  });

  it('logs the servers it connects to without a password or a token', async () => {
    const shownServers = async (url: string) => {
      const { log, text } = capturedLog();
      const nc = await connectNats(testConfig('/nonexistent', { 'nats.url': url }), log);
      cleanups.push(() => nc!.close());
      expect(text()).not.toMatch(/secret-pw|secret-token/);
      return JSON.parse(text().split('\n').find((l) => l.includes('connected to NATS'))!).servers;
    };
    expect(await shownServers(`nats://user:secret-pw@${NATS_HOST}, ${NATS_HOST}`)).toEqual([`nats://user@${NATS_HOST}`, `nats://${NATS_HOST}`]);
    expect(await shownServers(`nats://secret-token@${NATS_HOST}`)).toEqual([`nats://***@${NATS_HOST}`]);
  });

  it('sends NATS_URL\'s token to a server that requires one (nats.js ignores credentials in a URL); a wrong one fails without showing it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-nats-token-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const server = await startNatsServer(dir, ['--auth', 'secret-token']);
    cleanups.push(() => server.stop());
    const { log } = capturedLog();
    const nc = await connectNats(testConfig('/nonexistent', { 'nats.url': server.url.replace('//', '//secret-token@') }), log);
    cleanups.push(() => nc!.close());
    expect(await nc!.rtt()).toBeGreaterThanOrEqual(0);
    const wrong = connectNats(testConfig('/nonexistent', { 'nats.url': server.url.replace('//', '//wrong-secret-token@') }), log);
    await expect(wrong).rejects.toThrow(/^cannot reach NATS at nats:\/\/\*\*\*@127\.0\.0\.1:\d+: Authorization Violation$/);
  });
});

describe('createLimiter', () => {
  it('starts while Redis is down, falls back, and names Redis without its password', { timeout: 20_000 }, async () => {
    const { log, text } = capturedLog();
    const limiter = await createLimiter(testConfig('/nonexistent', { 'redis.url': 'redis://user:secret-pw@127.0.0.1:1' }), log, { ratePerMinute: 60, burst: 5 }, 'test:down:');
    cleanups.push(() => limiter.shutdown());
    expect(await limiter.take('203.0.113.7')).toMatchObject({ allowed: true });
    expect(text()).toContain('"redis":"redis://user@127.0.0.1:1"');
    expect(text()).not.toContain('secret-pw');
  });

  it('gives Redis SLUICE_REDIS_TIMEOUT_MS to answer before limiting on its own', { timeout: 30_000 }, async () => {
    const redis = new TestRedisServer();
    await redis.start();
    cleanups.push(() => redis.close());
    const admin = await redis.client();
    const afterPause = async (timeoutMs: number) => {
      const config = testConfig('/nonexistent', { 'redis.url': redis.url, 'redis.timeoutMs': timeoutMs });
      const limiter = await createLimiter(config, capturedLog().log, { ratePerMinute: 1, burst: 1 }, `test:timeout-${timeoutMs}:`);
      cleanups.push(() => limiter.shutdown());
      expect(await limiter.take('203.0.113.7')).toMatchObject({ allowed: true }); // Redis's one token
      await admin.clientPause(500, 'WRITE'); // Redis holds the next take for half a second
      const allowed = (await limiter.take('203.0.113.7')).allowed;
      await admin.clientUnpause();
      return allowed;
    };
    // At 100 ms the gateway's own bucket (still full) decides; at 10 s the take waits out the
    // pause and Redis's bucket (empty) refuses.
    expect(await afterPause(100)).toBe(true);
    expect(await afterPause(10_000)).toBe(false);
  });
});

describe('per-client keys (SLUICE_IPV6_LIMIT_PREFIX)', () => {
  /** Takes from three addresses of one /48 in two /64s (the first two share one), then one from another /48. */
  const allowedFrom = async (limiter: { take(key: string): Promise<{ allowed: boolean }> | { allowed: boolean } }) => {
    const allowed: boolean[] = [];
    for (const address of ['2001:db8:1:1::1', '2001:db8:1:1::2', '2001:db8:1:2::1', '2001:db8:2:1::1']) allowed.push((await limiter.take(address)).allowed);
    return allowed;
  };

  it('counts IPv6 clients by their /64 unless configured otherwise, in process and in Redis', { timeout: 30_000 }, async () => {
    const redis = new TestRedisServer();
    await redis.start();
    cleanups.push(() => redis.close());
    for (const redisUrl of ['', redis.url]) {
      const limiterOf = async (overrides: Record<string, unknown>) => {
        const config = testConfig('/nonexistent', { 'redis.url': redisUrl, 'redis.timeoutMs': 5000, ...overrides });
        const limiter = await createLimiter(config, capturedLog().log, { ratePerMinute: 1, burst: 1 }, `test:prefix:${randomUUID()}:`);
        cleanups.push(() => limiter.shutdown());
        return limiter;
      };
      // One token each: the second address of the first /64 finds it spent.
      expect(await allowedFrom(await limiterOf({})), redisUrl || 'in process').toEqual([true, false, true, true]);
      expect(await allowedFrom(await limiterOf({ 'limits.ipv6Prefix': 48 })), redisUrl || 'in process').toEqual([true, false, false, true]);
      expect(await allowedFrom(await limiterOf({ 'limits.ipv6Prefix': 128 })), redisUrl || 'in process').toEqual([true, true, true, true]);
    }
  });

  it('takes the prefix from the environment, 48 to 128', () => {
    expect(loadConfig({ SLUICE_IPV6_LIMIT_PREFIX: '56' }).limits.ipv6Prefix).toBe(56);
    expect(loadConfig({}).limits.ipv6Prefix).toBe(64);
    for (const refused of ['47', '129', '64.5']) {
      expect(() => loadConfig({ SLUICE_IPV6_LIMIT_PREFIX: refused }), refused).toThrow(/limits\.ipv6Prefix \(SLUICE_IPV6_LIMIT_PREFIX\)/);
    }
  });
});

describe('grpcLimits', () => {
  it('leaves half the open-files limit to the rest of the process when the connection cap is not set', async () => {
    expect(defaultMaxConnections(1024)).toBe(512);
    expect(defaultMaxConnections(20_001)).toBe(10_000);
    expect(defaultMaxConnections(Infinity)).toBe(10_000);
    expect(defaultMaxConnections(undefined)).toBe(10_000);
    const openFiles = (await descriptorUse())?.limit;
    expect((await grpcLimits(testConfig('/nonexistent'))).maxConnections).toBe(defaultMaxConnections(openFiles));
    expect((await grpcLimits(testConfig('/nonexistent', { 'grpc.maxConnections': 7 }))).maxConnections).toBe(7);
  });

  it('gives one connection a quarter of the in-flight budget, and never less than one message', async () => {
    const MiB = 1024 * 1024;
    expect((await grpcLimits(testConfig('/nonexistent', { 'limits.maxInFlightBytes': 256 * MiB }))).maxConnectionBytes).toBe(64 * MiB);
    expect((await grpcLimits(testConfig('/nonexistent', { 'limits.maxInFlightBytes': 16 * MiB }))).maxConnectionBytes).toBe(10 * MiB);
  });
});
