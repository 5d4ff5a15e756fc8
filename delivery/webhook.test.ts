/**
 * WebhookSender against real node:http(s) receivers on 127.0.0.1, which verify the signatures
 * with the independent `standardwebhooks` package; and the SSRF guard, with a policy that
 * allows nothing and a connector that records and refuses, so nothing is ever reached.
 * Safety net: while this file runs, a socket may connect to loopback only.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { Webhook } from 'standardwebhooks';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { refusingConnector, tableResolver } from '../test/egress-doubles.ts';
import { allowLoopbackConnectionsOnly } from '../test/loopback-only.ts';
import { makeCertificate } from '../test/test-certificate.ts';
import { EgressPolicy, type ConnectOptions, type ResolvedAddress } from './egress.ts';
import { parseRetryAfter } from './channel.ts';
import { WebhookSender } from './webhook.ts';

// ---- loopback only ------------------------------------------------------------------------

allowLoopbackConnectionsOnly();

// ---- receivers ----------------------------------------------------------------------------

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  url: string;
}

type Answer = (request: http.IncomingMessage, response: http.ServerResponse, received: Received) => void;

const servers: Array<http.Server> = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  }));
});

/** A receiver on 127.0.0.1 (a random port) that records each request's headers and body, then answers. */
async function receiver(answer: Answer, server: http.Server = http.createServer()) {
  const requests: Received[] = [];
  server.on('request', (request: http.IncomingMessage, response: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const received = { headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), url: request.url ?? '' };
      requests.push(received);
      answer(request, response, received);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const scheme = server instanceof https.Server ? 'https' : 'http';
  return { requests, port, url: `${scheme}://127.0.0.1:${port}/hook` };
}

const secret = () => `whsec_${randomBytes(32).toString('base64')}`;
const delivery = (id = `msg_${randomBytes(8).toString('hex')}`) => ({ id, timestamp: new Date(), body: JSON.stringify({ type: 'form.submitted', data: { name: 'Ada', note: 'ü ✓' } }) });
const verified = (key: string, received: Received) => new Webhook(key).verify(received.body, received.headers as Record<string, string>);
const loopbackSender = (options: { timeoutMs?: number; maxResponseBytes?: number } = {}) =>
  new WebhookSender({ egress: new EgressPolicy({ allow: ['127.0.0.1/32'] }), ...options });

// ---- delivery -----------------------------------------------------------------------------

describe('WebhookSender: a receiver that answers', () => {
  it('delivers a request the standardwebhooks package verifies, with its headers', async () => {
    const key = secret();
    const hook = await receiver((_request, response) => response.writeHead(204).end());
    const message = delivery();
    const outcome = await loopbackSender().send({ url: `${hook.url}?source=relay`, secrets: [key] }, message);
    expect(outcome).toEqual({ kind: 'delivered', providerStatus: 'http 204' });
    const [received] = hook.requests;
    expect(received!.body).toBe(message.body);
    expect(received!.url).toBe('/hook?source=relay');
    expect(received!.headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': 'Sluice-Webhooks/1',
      'webhook-id': message.id,
      'webhook-timestamp': String(Math.floor(message.timestamp.getTime() / 1000)),
      host: `127.0.0.1:${hook.port}`,
    });
    expect(verified(key, received!)).toEqual(JSON.parse(message.body));
    expect(() => verified(secret(), received!)).toThrow('No matching signature found');
  });

  it('signs with every secret during a rotation, each verifying alone', async () => {
    const [current, previous] = [secret(), secret()];
    const hook = await receiver((_request, response) => response.writeHead(200).end('ok'));
    expect(await loopbackSender().send({ url: hook.url, secrets: [current, previous] }, delivery())).toMatchObject({ kind: 'delivered' });
    const [received] = hook.requests;
    expect(String(received!.headers['webhook-signature']).split(' ')).toEqual([expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/), expect.stringMatching(/^v1,/)]);
    expect(verified(current, received!)).toBeDefined();
    expect(verified(previous, received!)).toBeDefined();
  });

  it('signs with a base64url secret as the relay generates them', async () => {
    const key = `whsec_${randomBytes(24).toString('base64url')}`;
    const hook = await receiver((_request, response) => response.writeHead(200).end());
    expect(await loopbackSender().send({ url: hook.url, secrets: [key] }, delivery())).toMatchObject({ kind: 'delivered' });
    // The same key bytes, in the standard alphabet the package decodes.
    const standard = `whsec_${Buffer.from(key.slice(6), 'base64url').toString('base64')}`;
    expect(verified(standard, hook.requests[0]!)).toBeDefined();
  });

  it('reports a 500 as transient, and the retry (same id) as delivered', async () => {
    const key = secret();
    let calls = 0;
    const hook = await receiver((_request, response) => (++calls === 1 ? response.writeHead(500).end('database is restarting') : response.writeHead(200).end()));
    const sender = loopbackSender();
    const message = delivery();
    expect(await sender.send({ url: hook.url, secrets: [key] }, message)).toEqual({ kind: 'transient', error: 'http 500 Internal Server Error', providerStatus: 'http 500' });
    expect(await sender.send({ url: hook.url, secrets: [key] }, { ...message, timestamp: new Date() })).toEqual({ kind: 'delivered', providerStatus: 'http 200' });
    expect(hook.requests.map((received) => received.headers['webhook-id'])).toEqual([message.id, message.id]);
    for (const received of hook.requests) expect(verified(key, received)).toBeDefined();
  });

  it('gives up on a receiver that does not answer, or stops in the middle of its body (transient)', async () => {
    const silent = await receiver(() => {});
    const halfway = await receiver((_request, response) => {
      response.writeHead(200, { 'content-length': '100' });
      response.write('partial');
    });
    const sender = loopbackSender({ timeoutMs: 300 });
    for (const hook of [silent, halfway]) {
      expect(await sender.send({ url: hook.url, secrets: [secret()] }, delivery())).toEqual({ kind: 'transient', error: 'no complete answer within 300 ms', providerStatus: 'timeout' });
    }
  });

  it('does not follow a redirect: permanent, without repeating where it pointed', async () => {
    const elsewhere = await receiver((_request, response) => response.writeHead(200).end());
    const moved = await receiver((_request, response) => response.writeHead(302, { location: elsewhere.url }).end());
    const outcome = await loopbackSender().send({ url: moved.url, secrets: [secret()] }, delivery());
    expect(outcome).toEqual({ kind: 'permanent', error: 'http 302 Found: redirect not followed (configure the final URL)', providerStatus: 'http 302' });
    expect(moved.requests).toHaveLength(1);
    expect(elsewhere.requests).toHaveLength(0);
  });

  it('classifies 4xx as permanent except 408 and 429, which are retried when the receiver says', async () => {
    const statuses: Record<string, [number, Record<string, string>, string]> = {
      '/missing': [404, {}, 'no such hook'],
      '/gone': [410, {}, ''],
      '/limited': [429, { 'retry-after': '7' }, 'slow down'],
      '/slow': [408, {}, ''],
      '/maintenance': [503, { 'retry-after': new Date(Date.now() + 120_000).toUTCString() }, ''],
    };
    const hook = await receiver((request, response) => {
      const [status, headers, body] = statuses[request.url!]!;
      response.writeHead(status, headers).end(body);
    });
    const send = (path: string) => loopbackSender().send({ url: hook.url.replace('/hook', path), secrets: [secret()] }, delivery());
    expect(await send('/missing')).toEqual({ kind: 'permanent', error: 'http 404 Not Found', providerStatus: 'http 404' });
    expect(await send('/gone')).toEqual({ kind: 'permanent', error: 'http 410 Gone', providerStatus: 'http 410' });
    expect(await send('/limited')).toEqual({ kind: 'transient', error: 'http 429 Too Many Requests', providerStatus: 'http 429', retryAfterMs: 7000 });
    expect(await send('/slow')).toEqual({ kind: 'transient', error: 'http 408 Request Timeout', providerStatus: 'http 408' });
    const maintenance = await send('/maintenance');
    expect(maintenance).toMatchObject({ kind: 'transient', providerStatus: 'http 503' });
    // An HTTP date, to the second: well over a minute from now on any machine.
    expect(maintenance.kind === 'transient' && maintenance.retryAfterMs).toBeGreaterThan(60_000);
    expect(maintenance.kind === 'transient' && maintenance.retryAfterMs).toBeLessThanOrEqual(120_000);
  });

  it('reads at most maxResponseBytes of an endless body, then closes the connection', async () => {
    let closedByClient: Promise<void> | undefined;
    const hook = await receiver((_request, response) => {
      response.writeHead(500, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(16 * 1024, 'x');
      const pump = () => {
        while (!response.destroyed && response.write(chunk));
      };
      response.on('drain', pump);
      closedByClient = new Promise((resolve) => response.on('close', resolve));
      pump();
    });
    // Without the cap, this would run until the timeout and say so.
    const outcome = await loopbackSender({ maxResponseBytes: 4096, timeoutMs: 30_000 }).send({ url: hook.url, secrets: [secret()] }, delivery());
    expect(outcome).toEqual({ kind: 'transient', providerStatus: 'http 500', error: 'http 500 Internal Server Error' });
    await closedByClient;
  });

  it('gives up on a body that drips forever at the attempt\'s deadline (transient)', async () => {
    const timers: NodeJS.Timeout[] = [];
    const hook = await receiver((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/plain' });
      // A byte every 20 ms: never idle long enough for an inactivity timeout, never done.
      timers.push(setInterval(() => response.write('.'), 20));
    });
    try {
      const started = Date.now();
      const outcome = await loopbackSender({ timeoutMs: 300 }).send({ url: hook.url, secrets: [secret()] }, delivery());
      expect(outcome).toEqual({ kind: 'transient', error: 'no complete answer within 300 ms', providerStatus: 'timeout' });
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      for (const timer of timers) clearInterval(timer);
    }
  });

  it('never repeats what the receiver said: no body, no Location, no banner of another protocol', async () => {
    const banner = 'SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5';
    const secretLocation = 'http://10.0.0.1/internal/admin?token=abc';
    const errors = await receiver((request, response) => {
      if (request.url === '/moved') response.writeHead(301, { location: secretLocation }).end(banner);
      else response.writeHead(request.url === '/teapot' ? 418 : 599).end(`${banner} -NOAUTH redis_version:7.2.4`);
    });
    const raw = net.createServer((socket) => {
      socket.on('data', () => {});
      socket.end(`${banner}\r\n`);
    });
    await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
    const rawPort = (raw.address() as net.AddressInfo).port;
    try {
      const sender = loopbackSender();
      const outcomes = [
        await sender.send({ url: errors.url.replace('/hook', '/moved'), secrets: [secret()] }, delivery()),
        await sender.send({ url: errors.url.replace('/hook', '/teapot'), secrets: [secret()] }, delivery()),
        await sender.send({ url: errors.url, secrets: [secret()] }, delivery()),
        await sender.send({ url: `http://127.0.0.1:${rawPort}/hook`, secrets: [secret()] }, delivery()),
      ];
      expect(outcomes.map((outcome) => outcome.kind !== 'delivered' && outcome.error)).toEqual([
        'http 301 Moved Permanently: redirect not followed (configure the final URL)',
        "http 418 I'm a Teapot",
        'http 599',
        expect.stringMatching(new RegExp(`^connection to 127\\.0\\.0\\.1:${rawPort} failed: HPE_[A-Z_]+$`)),
      ]);
      for (const outcome of outcomes) expect(JSON.stringify(outcome)).not.toMatch(/SSH|redis|10\.0\.0\.1|token/);
    } finally {
      await new Promise((resolve) => raw.close(resolve));
    }
  });

  it('reports a refused connection as transient', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as net.AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const outcome = await loopbackSender().send({ url: `http://127.0.0.1:${port}/hook`, secrets: [secret()] }, delivery());
    expect(outcome).toEqual({ kind: 'transient', error: `connection to 127.0.0.1:${port} failed: ECONNREFUSED`, providerStatus: 'network' });
  });

  it('refuses a secret that is not whsec_ base64 without sending anything (permanent)', async () => {
    const hook = await receiver((_request, response) => response.writeHead(200).end());
    expect(await loopbackSender().send({ url: hook.url, secrets: [secret(), 'my secret passphrase'] }, delivery())).toEqual({ kind: 'permanent', error: 'signing secret 2 is not whsec_ followed by base64', providerStatus: 'bad secret' });
    expect(await loopbackSender().send({ url: hook.url, secrets: [] }, delivery())).toMatchObject({ kind: 'permanent', providerStatus: 'bad secret' });
    expect(hook.requests).toHaveLength(0);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('7', now)).toBe(7000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:01:30 GMT', now)).toBe(90_000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter('-5', now)).toBeUndefined();
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
  });
});

// ---- TLS ----------------------------------------------------------------------------------

describe('WebhookSender over TLS', () => {
  let cert: string;
  let key: string;
  beforeAll(async () => {
    // A certificate for receiver.test, made here: the test needs the openssl command.
    ({ cert, key } = await makeCertificate('receiver.test'));
  });

  const egress = new EgressPolicy({ allow: ['127.0.0.1/32'], resolve: async (): Promise<ResolvedAddress[]> => [{ address: '127.0.0.1', family: 4 }] });

  it('connects to the checked address and verifies the certificate against the host name (SNI)', async () => {
    let sni: string | undefined;
    const hook = await receiver((request, response) => {
      sni = (request.socket as tls.TLSSocket).servername || undefined;
      response.writeHead(200).end();
    }, https.createServer({ cert, key }));
    const seen: ConnectOptions[] = [];
    // The default connector with the test's CA: what the sender asks for is what is checked.
    const connect = (options: ConnectOptions) => {
      seen.push(options);
      return tls.connect({ host: options.host, port: options.port, ca: cert, ...(options.servername ? { servername: options.servername } : {}) });
    };
    const sender = new WebhookSender({ egress, connect });
    const outcome = await sender.send({ url: `https://receiver.test:${hook.port}/hook`, secrets: [secret()] }, delivery());
    expect(outcome).toEqual({ kind: 'delivered', providerStatus: 'http 200' });
    expect(seen).toEqual([{ host: '127.0.0.1', port: hook.port, servername: 'receiver.test', tls: true }]);
    expect(sni).toBe('receiver.test');
    expect(hook.requests[0]!.headers.host).toBe(`receiver.test:${hook.port}`);

    const wrongName = await sender.send({ url: `https://other.test:${hook.port}/hook`, secrets: [secret()] }, delivery());
    expect(wrongName).toMatchObject({ kind: 'transient', providerStatus: 'network', error: expect.stringContaining('ERR_TLS_CERT_ALTNAME_INVALID') });
  });

  it('refuses a certificate the system does not trust with the default connector (transient)', async () => {
    const hook = await receiver((_request, response) => response.writeHead(200).end(), https.createServer({ cert, key }));
    const outcome = await new WebhookSender({ egress }).send({ url: `https://receiver.test:${hook.port}/hook`, secrets: [secret()] }, delivery());
    expect(outcome).toMatchObject({ kind: 'transient', providerStatus: 'network', error: expect.stringContaining('SELF_SIGNED') });
    expect(hook.requests).toHaveLength(0);
  });
});

// ---- SSRF ---------------------------------------------------------------------------------

describe('WebhookSender: SSRF', () => {
  /** A policy that allows nothing, with a resolver answering from a table, and a connector that records and refuses. */
  function guarded(answers: Record<string, (call: number) => string[]>) {
    const { resolve, lookups } = tableResolver(answers);
    const { connect, connections } = refusingConnector();
    const sender = new WebhookSender({ egress: new EgressPolicy({ allow: [], resolve }), connect });
    return { sender, lookups, connections };
  }

  it.each([
    ['http://127.0.0.1/hook', '127.0.0.1 is a loopback address'],
    ['http://2130706433/hook', '127.0.0.1 is a loopback address'],
    ['http://localhost./hook', 'localhost names this machine'],
    ['http://[::1]/hook', '::1 is a loopback address'],
    ['http://[::127.0.0.1]/hook', '::7f00:1 is an IPv4-compatible address'],
    ['http://169.254.169.254/latest/meta-data/', '169.254.169.254 is a link-local address'],
    ['http://[64:ff9b::a9fe:a9fe]/hook', '64:ff9b::a9fe:a9fe is a NAT64 address'],
    ['http://[::ffff:10.0.0.1]/hook', '::ffff:a00:1 is an IPv4-mapped address'],
    ['http://[2002:7f00:1::]/hook', '2002:7f00:1:: is a 6to4 address'],
    ['http://internal.example/hook', 'internal.example resolves to 10.1.2.3, a private address'],
  ])('refuses %s before connecting (permanent)', async (url, reason) => {
    const { sender, connections } = guarded({ 'internal.example': () => ['10.1.2.3'] });
    expect(await sender.send({ url, secrets: [secret()] }, delivery())).toEqual({ kind: 'permanent', error: `refused by the egress policy: ${reason}`, providerStatus: 'refused' });
    expect(connections).toEqual([]);
  });

  it('connects only to the address it checked when the name rebinds to loopback, and never looks it up twice', async () => {
    const { sender, lookups, connections } = guarded({ 'rebind.example': (call) => [call === 1 ? '93.184.216.34' : '127.0.0.1'] });
    const first = await sender.send({ url: 'http://rebind.example/hook', secrets: [secret()] }, delivery());
    expect(first).toMatchObject({ kind: 'transient', providerStatus: 'network', error: expect.stringContaining('93.184.216.34:80') });
    expect(connections).toEqual([{ host: '93.184.216.34', port: 80, tls: false }]);
    expect(lookups).toEqual(['rebind.example']);
    // The next attempt checks again and sees the loopback answer.
    const second = await sender.send({ url: 'http://rebind.example/hook', secrets: [secret()] }, delivery());
    expect(second).toMatchObject({ kind: 'permanent', error: 'refused by the egress policy: rebind.example resolves to 127.0.0.1, a loopback address' });
    expect(connections).toHaveLength(1);
  });

  it('does not send when the name does not resolve (transient: DNS may come back)', async () => {
    const { sender, connections } = guarded({});
    expect(await sender.send({ url: 'https://nowhere.example/hook', secrets: [secret()] }, delivery())).toEqual({ kind: 'transient', error: 'not sent: lookup of nowhere.example failed: ENOTFOUND', providerStatus: 'unresolved' });
    expect(connections).toEqual([]);
  });
});
