/**
 * Cluster-wide token buckets on a real Redis: this file starts its own redis-server on a free
 * port (so it can stop and restart it without touching the machine's shared one).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { pino } from 'pino';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../test/harness.ts';
import { RedisTokenBucketLimiter } from './redis-limiter.ts';

let port = 0;
let server: ChildProcess | undefined;
const clients: Array<{ destroy(): void }> = [];
const log = pino({ level: 'silent' });

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address() as { port: number };
      probe.close(() => resolve(free));
    });
  });
}

async function startRedis(): Promise<void> {
  server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  server.once('error', (err) => {
    throw new Error(`redis-server could not start (run deploy/services.sh to install it): ${err.message}`);
  });
  const deadline = Date.now() + 5000;
  for (;;) {
    const probe = createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: false } });
    probe.on('error', () => {});
    try {
      await probe.connect();
      await probe.ping();
      await probe.quit();
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

async function stopRedis(): Promise<void> {
  const running = server;
  server = undefined;
  if (!running || running.exitCode !== null) return;
  await new Promise((resolve) => {
    running.once('exit', resolve);
    running.kill('SIGKILL');
  });
}

async function client() {
  const redis = createClient({
    url: `redis://127.0.0.1:${port}`,
    // Fail commands at once while disconnected (the limiter falls back), reconnect in the background.
    disableOfflineQueue: true,
    socket: { connectTimeout: 500, reconnectStrategy: () => 100 },
  });
  redis.on('error', () => {});
  await redis.connect();
  clients.push(redis);
  return redis;
}

beforeAll(async () => {
  port = await freePort();
  await startRedis();
});
afterAll(async () => {
  for (const redis of clients) await redis.destroy();
  await stopRedis();
});

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
    await stopRedis();
    const during = [];
    for (let i = 0; i < 4; i++) during.push((await limiter.take('ip')).allowed);
    expect(limiter.mode).toBe('local-fallback');
    // Traffic is not all refused: the local bucket (burst 3) decides.
    expect(during).toEqual([true, true, true, false]);
    expect(limiter.fallbackDecisions).toBe(4);

    await startRedis();
    await eventually(async () => {
      await limiter.take('other');
      return limiter.mode === 'redis';
    }, 15_000, 100);
  });
});
