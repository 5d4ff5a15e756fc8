import { Agent, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openLoop } from './open-loop.ts';

let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A loopback server that answers after `delayMs(n)` for its n-th request; counts connections. */
async function serve(delayMs: (n: number) => number): Promise<{ url: string; connections: () => number }> {
  let requests = 0;
  let connections = 0;
  server = createServer((req, res) => {
    const delay = delayMs(requests++);
    req.resume();
    req.on('end', () => setTimeout(() => res.end('{}'), delay));
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, connections: () => connections };
}

const bodies = [Buffer.from('x')];

describe('openLoop', () => {
  it('gives the p99 of each second, so a stall at the start shows as that second', async () => {
    // The first 10 requests (the first half second at 20/s) wait 1.5 s; the rest are answered at once.
    const { url } = await serve((n) => (n < 10 ? 1500 : 0));
    const result = await openLoop({ url, headers: {}, bodies, rate: 20, duration: 3, connections: 64 });
    expect(result.ok).toBe(60);
    expect(result.p99BySecondMs).toHaveLength(3);
    expect(result.p99BySecondMs[0]).toBeGreaterThanOrEqual(1500);
    // Later seconds are far below the stall (loopback, answered at once), even on a loaded machine.
    expect(result.p99BySecondMs[1]).toBeLessThan(750);
    expect(result.p99BySecondMs[2]).toBeLessThan(750);
    expect(result.latencyMs.max).toBeGreaterThanOrEqual(1500);
  });

  it('has one p99 per second of the run, whatever the rate', async () => {
    const { url } = await serve(() => 0);
    // 15 requests (7.3/s for 2 s, rounded), the last scheduled at 1.92 s: two seconds, not three.
    const result = await openLoop({ url, headers: {}, bodies, rate: 7.3, duration: 2, connections: 8 });
    expect(result.sent).toBe(15);
    expect(result.p99BySecondMs).toHaveLength(2);
    expect(result.p99BySecondMs.every((p99) => p99 >= 0)).toBe(true);
  });

  it('runs on a caller\'s keep-alive pool, so a measured run after a warm-up reuses its connections', async () => {
    const { url, connections } = await serve(() => 0);
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    try {
      const warmup = await openLoop({ url, headers: {}, bodies, rate: 20, duration: 1, connections: 8, agent });
      const opened = connections();
      expect(warmup.ok).toBe(20);
      expect(opened).toBeGreaterThan(0);
      const measured = await openLoop({ url, headers: {}, bodies, rate: 20, duration: 1, connections: 8, agent });
      expect(measured.ok).toBe(20);
      // At most a socket more, should one answer be slow at the same moment as a send.
      expect(connections()).toBeLessThanOrEqual(opened + 1);
      expect(Object.values(agent.freeSockets).flat().length).toBeGreaterThan(0); // left open for the caller
    } finally {
      agent.destroy();
    }
  });
});
