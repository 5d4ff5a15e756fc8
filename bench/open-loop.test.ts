import { Agent, createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openLoop, openLoopPool } from './open-loop.ts';

let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/**
 * A loopback server that answers after `delayMs(n)` for its n-th request; notes which connection
 * (numbered from 0 as opened) each request came on. Idle connections stay open a minute.
 */
async function serve(delayMs: (n: number) => number): Promise<{ url: string; connections: () => number; connectionOf: number[] }> {
  const connectionOf: number[] = [];
  const numbers = new WeakMap<object, number>();
  let connections = 0;
  server = createServer((req, res) => {
    const delay = delayMs(connectionOf.length);
    connectionOf.push(numbers.get(req.socket)!);
    req.resume();
    req.on('end', () => setTimeout(() => res.end('{}'), delay));
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (socket) => numbers.set(socket, connections++));
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, connections: () => connections, connectionOf };
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
    const { url, connections, connectionOf } = await serve(() => 0);
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    try {
      const warmup = await openLoop({ url, headers: {}, bodies, rate: 20, duration: 1, connections: 8, agent });
      const opened = connections();
      expect(warmup.ok).toBe(20);
      expect(opened).toBeGreaterThan(0);
      const measured = await openLoop({ url, headers: {}, bodies, rate: 20, duration: 1, connections: 8, agent });
      expect(measured.ok).toBe(20);
      // Its first request goes out on a socket the warm-up left free (more may open later,
      // should answers be slow on a loaded machine: how many is timing, not the pool).
      expect(connectionOf[20]).toBeLessThan(opened);
      expect(Object.values(agent.freeSockets).flat().length).toBeGreaterThan(0); // left open for the caller
    } finally {
      agent.destroy();
    }
  });

  describe('its pool closes idle sockets before the server would', () => {
    let tcp: TcpServer | undefined;
    afterEach(async () => {
      await new Promise<void>((resolve) => (tcp ? tcp.close(() => resolve()) : resolve()));
      tcp = undefined;
    });

    /**
     * A keep-alive server that never closes a connection itself: it answers each request (a body
     * of one byte, as `bodies` here) after `delayMs` with `keepAlive` as its Keep-Alive header, and
     * notes each connection the client ended.
     */
    async function keepForever(keepAlive: string | undefined, delayMs = 0): Promise<{ url: string; endedByClient: () => number }> {
      let ended = 0;
      tcp = createTcpServer((socket) => {
        let pending = '';
        socket.on('data', (chunk) => {
          pending += chunk.toString('latin1');
          for (let headEnd = pending.indexOf('\r\n\r\n'); headEnd >= 0 && pending.length >= headEnd + 5; headEnd = pending.indexOf('\r\n\r\n')) {
            pending = pending.slice(headEnd + 5);
            const answer = `HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n${keepAlive ? `Keep-Alive: ${keepAlive}\r\n` : ''}\r\n{}`;
            setTimeout(() => socket.write(answer), delayMs);
          }
        });
        socket.on('end', () => {
          ended++;
          socket.end();
        });
        socket.on('error', () => {});
      });
      await new Promise<void>((resolve) => tcp!.listen(0, '127.0.0.1', resolve));
      return { url: `http://127.0.0.1:${(tcp.address() as AddressInfo).port}/v1/traces`, endedByClient: () => ended };
    }

    async function waitFor(condition: () => boolean, deadlineMs: number): Promise<void> {
      for (const until = Date.now() + deadlineMs; !condition() && Date.now() < until;) await new Promise((resolve) => setTimeout(resolve, 50));
    }

    it('a second before the keep-alive timeout the server announces', async () => {
      // The pool's own idle limit (a minute) is far past the deadline: only the hint can close it.
      const { url, endedByClient } = await keepForever('timeout=2');
      const agent = openLoopPool(4, 60_000);
      try {
        const result = await openLoop({ url, headers: {}, bodies, rate: 10, duration: 0.3, connections: 4, agent });
        expect(result.ok).toBe(3);
        await waitFor(() => endedByClient() > 0 && Object.values(agent.freeSockets).flat().length === 0, 15_000);
        expect(endedByClient()).toBeGreaterThan(0);
        expect(Object.values(agent.freeSockets).flat()).toHaveLength(0);
      } finally {
        agent.destroy();
      }
    });

    it('after its own idle limit when the server announces none, without cutting a slower answer', async () => {
      // Each answer takes longer than the idle limit: a request in flight is not a free socket.
      const { url, endedByClient } = await keepForever(undefined, 600);
      const agent = openLoopPool(4, 200);
      try {
        const result = await openLoop({ url, headers: {}, bodies, rate: 10, duration: 0.3, connections: 4, agent });
        expect(result.ok).toBe(3);
        expect(result.errors).toEqual({});
        await waitFor(() => endedByClient() > 0 && Object.values(agent.freeSockets).flat().length === 0, 15_000);
        expect(endedByClient()).toBeGreaterThan(0);
        expect(Object.values(agent.freeSockets).flat()).toHaveLength(0);
      } finally {
        agent.destroy();
      }
    });
  });
});
