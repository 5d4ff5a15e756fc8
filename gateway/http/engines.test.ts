/**
 * Both HTTP engines read a body only once the handler takes it: a request refused at the door
 * (after admission, which may take a while) costs no allocation of its Content-Length, and a
 * body taken late still arrives whole, its bytes taken from the handler's allowance.
 */
import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SluiceError } from '../../core/errors.ts';
import type { HttpHandler, HttpServer, HttpServerOptions } from './adapter.ts';
import { NodeHttpServer } from './node.ts';
import { nativeUws, UwsHttpServer } from './uws.ts';

const MiB = 1024 * 1024;
const OPTIONS: HttpServerOptions = { maxBodyBytes: 10 * MiB, bodyDeadline: { timeoutMs: 10_000, minBytesPerSecond: 65_536 }, maxConnections: 100 };
const engines = {
  uws: (handler: HttpHandler, options = OPTIONS) => new UwsHttpServer(handler, options, nativeUws().uws!),
  node: (handler: HttpHandler, options = OPTIONS) => new NodeHttpServer(handler, options),
};

let server: HttpServer | undefined;
afterEach(async () => {
  await server?.close(0);
  server = undefined;
});

async function serve(engine: keyof typeof engines, handler: HttpHandler, options = OPTIONS): Promise<number> {
  server = engines[engine](handler, options);
  return server.listen('127.0.0.1', 0);
}

/** A raw keep-alive connection: what was received so far, and writes. */
function rawConnection(port: number) {
  const socket = connect(port, '127.0.0.1');
  const state = { received: '', errors: [] as Error[], closed: false };
  socket.on('data', (data) => (state.received += data.toString('latin1')));
  socket.on('error', (err) => state.errors.push(err));
  socket.on('close', () => (state.closed = true));
  return {
    state,
    write: (data: string | Buffer) => socket.write(data),
    /** Sends the head of a POST announcing `length` bytes, and the first `sent` of them. */
    postHead(length: number, sent: number) {
      socket.write(`POST /x HTTP/1.1\r\nhost: localhost\r\ncontent-length: ${length}\r\n\r\n`);
      socket.write(Buffer.alloc(sent, 1));
    },
    /** The status lines received so far. */
    statuses: () => [...state.received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1])),
    close: () => socket.destroy(),
  };
}

/** An allowance that records what it was asked for and refuses past `limit`. */
function allowance(limit = Infinity) {
  const asked: number[] = [];
  return {
    asked,
    resize(n: number) {
      if (n > limit) throw new SluiceError('unavailable', 'budget used up', { retryAfterSeconds: 3 });
      asked.push(n);
    },
  };
}

const digest = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// uWebSockets.js only where its native binary runs (Node 20); node:http everywhere.
describe.each(nativeUws().uws ? (['uws', 'node'] as const) : (['node'] as const))('%s engine', (engine) => {
  it('allocates nothing for a Content-Length of 10 MiB while admission runs, and answers 401 without it', async () => {
    let admitted!: () => void;
    const admission = new Promise<void>((resolve) => (admitted = resolve));
    let waiting = 0;
    const port = await serve(engine, async () => {
      waiting++;
      await admission; // a slow key check: the bodies are announced, the bytes not read
      return { status: 401, body: 'unauthorized' };
    });
    const before = process.memoryUsage().arrayBuffers;
    const clients = Array.from({ length: 4 }, () => rawConnection(port));
    for (const client of clients) client.postHead(10 * MiB, 16 * 1024);
    await vi.waitFor(() => expect(waiting).toBe(4), { timeout: 10_000 });
    await delay(100); // let the first bytes of each body arrive
    const grown = process.memoryUsage().arrayBuffers - before;
    admitted();
    for (const client of clients) client.write(Buffer.alloc(10 * MiB - 16 * 1024, 1)); // the clients finish sending
    await vi.waitFor(() => expect(clients.map((c) => c.statuses())).toEqual(Array(4).fill([401])), { timeout: 10_000 });
    for (const client of clients) client.close();
    // Four preallocated bodies would be 40 MiB; what the clients sent is 64 KiB.
    expect(grown).toBeLessThan(4 * MiB);
  });

  it.each([
    ['with a Content-Length', false],
    ['chunked', true],
  ])('hands over a body taken after admission whole (%s), its bytes taken from the allowance as they arrive', async (_name, chunked) => {
    const budget = allowance();
    const port = await serve(engine, async (request) => {
      await delay(200); // admission: the body keeps arriving meanwhile, up to the read-ahead
      const body = await request.body(budget);
      return { status: 200, body: `${body.byteLength} ${digest(body)}` };
    });
    const payload = Buffer.alloc(MiB);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 7) % 251;
    const body = chunked
      ? new ReadableStream({
          start(controller) {
            for (let at = 0; at < payload.length; at += 64 * 1024) controller.enqueue(payload.subarray(at, at + 64 * 1024));
            controller.close();
          },
        })
      : payload;
    const response = await fetch(`http://127.0.0.1:${port}/x`, { method: 'POST', body, duplex: 'half' } as RequestInit);
    expect([response.status, await response.text()]).toEqual([200, `${MiB} ${digest(payload)}`]);
    // Grown as the chunks came, announced or not: never the Content-Length up front.
    expect(budget.asked.at(-1)).toBe(MiB);
    expect(budget.asked.length).toBeGreaterThan(1);
  });

  it.each([
    ['within the read-ahead', 16 * 1024],
    ['past the read-ahead (reading paused)', 256 * 1024],
    ['whole before the answer', MiB],
  ])('answers a client refused at the door without a reset and serves its next request (body sent %s)', async (_name, sent) => {
    const port = await serve(engine, async (request) => {
      if (request.method === 'GET') return { status: 200, body: 'ok' };
      await delay(100);
      return { status: 401, body: 'no' };
    });
    const client = rawConnection(port);
    client.postHead(MiB, sent);
    await delay(300); // the answer is decided while the client may still be sending
    // The rest is read and dropped (closing under a client still writing makes it fail with EPIPE).
    client.write(Buffer.alloc(MiB - sent, 1));
    client.write('GET /y HTTP/1.1\r\nhost: localhost\r\n\r\n');
    await vi.waitFor(() => expect(client.statuses()).toEqual([401, 200]), { timeout: 10_000 });
    client.close();
    expect(client.state.errors).toEqual([]);
  });

  it('answers fetch clients refused at once, request after request on their connections', async () => {
    const port = await serve(engine, async () => ({ status: 503, headers: { 'retry-after': '1' }, body: 'full' }));
    const body = Buffer.alloc(MiB, 1);
    for (let i = 0; i < 5; i++) {
      const response = await fetch(`http://127.0.0.1:${port}/x`, { method: 'POST', body, signal: AbortSignal.timeout(8_000) });
      expect([response.status, await response.text()]).toEqual([503, 'full']);
    }
  });

  it('answers the allowance\'s refusal with 503, keeping nothing of the body, and serves the connection\'s next request', async () => {
    const port = await serve(engine, async (request) => {
      if (request.method === 'GET') return { status: 200 };
      try {
        await request.body(allowance(100 * 1024));
        return { status: 200 };
      } catch (err) {
        return { status: (err as SluiceError).httpStatus, headers: { 'retry-after': String((err as SluiceError).retryAfterSeconds) } };
      }
    });
    const client = rawConnection(port);
    client.postHead(5 * MiB, 1024);
    client.write(Buffer.alloc(5 * MiB - 1024, 1)); // refused mid-body: the rest is read and dropped
    client.write('GET /y HTTP/1.1\r\nhost: localhost\r\n\r\n');
    await vi.waitFor(() => expect(client.statuses()).toEqual([503, 200]), { timeout: 10_000 });
    expect(client.state.received.toLowerCase()).toContain('retry-after: 3');
    expect(client.state.errors).toEqual([]);
    client.close();
  });

  it('close(grace): stops accepting at once, lets a request in flight finish within the grace, then closes every connection', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const port = await serve(engine, async (request) => {
      if (request.path === '/slow') await released;
      if (request.path === '/never') await new Promise(() => {});
      return { status: 200, body: 'ok' };
    });
    const get = (path: string) => `GET ${path} HTTP/1.1\r\nhost: localhost\r\n\r\n`;
    const idle = rawConnection(port);
    idle.write(get('/x'));
    await vi.waitFor(() => expect(idle.statuses()).toEqual([200]), { timeout: 10_000 });
    const slow = rawConnection(port);
    const never = rawConnection(port);
    slow.write(get('/slow'));
    never.write(get('/never'));
    await delay(200);

    const grace = 2000;
    const started = Date.now();
    let done = 0;
    const closing = server!.close(grace).then(() => (done = Date.now()));
    server = undefined;
    await expect(fetch(`http://127.0.0.1:${port}/x`, { signal: AbortSignal.timeout(5000) })).rejects.toThrow();
    release();
    await vi.waitFor(() => expect(slow.statuses()).toEqual([200]), { timeout: 5000 });
    await vi.waitFor(() => expect(done).toBeGreaterThan(0), { timeout: grace + 10_000 });
    await closing;
    // The request that never finishes kept it open for the grace, not longer (generous margin).
    expect(done - started).toBeGreaterThanOrEqual(grace - 100);
    expect(done - started).toBeLessThan(grace + 8000);
    await vi.waitFor(() => expect([idle.state.closed, slow.state.closed, never.state.closed]).toEqual([true, true, true]), { timeout: 5000 });
    expect(never.statuses()).toEqual([]);
  });
});

it('node:http holds at most maxConnections per port: past it a new connection is closed at once', async () => {
  const port = await serve('node', async () => ({ status: 200, body: 'ok' }), { ...OPTIONS, maxConnections: 2 });
  const get = 'GET /x HTTP/1.1\r\nhost: localhost\r\n\r\n';
  const [a, b] = [rawConnection(port), rawConnection(port)];
  a.write(get);
  b.write(get);
  await vi.waitFor(() => expect([a.statuses(), b.statuses()]).toEqual([[200], [200]]), { timeout: 10_000 });
  const third = rawConnection(port);
  third.write(get);
  await vi.waitFor(() => expect(third.state.closed).toBe(true), { timeout: 10_000 });
  expect(third.statuses()).toEqual([]);
  a.close();
  // A place is free again.
  await vi.waitFor(async () => {
    const next = rawConnection(port);
    next.write(get);
    await delay(200);
    next.close();
    expect(next.statuses()).toEqual([200]);
  }, { timeout: 10_000 });
  b.close();
});
