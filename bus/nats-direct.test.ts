/**
 * NatsDirect against real nats-servers: the machine's (NATS_URL, default nats://127.0.0.1:4222;
 * deploy/services.sh starts it) under a stream name of this run's own, and servers of this
 * test's own that require credentials.
 */
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, type NatsProcess } from '../test/sluice-processes.ts';
import { NatsDirect, UnansweredError } from './nats-direct.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const stream = `PULLTEST_${randomBytes(4).toString('hex').toUpperCase()}`;
const subject = stream.toLowerCase();
let nc: NatsConnection;
let jsm: JetStreamManager;
const connections: NatsDirect[] = [];
const dirs: string[] = [];
const servers: NatsProcess[] = [];

beforeAll(async () => {
  nc = await connect({ servers: NATS_URL, timeout: 3000 });
  jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: stream, subjects: [subject] });
  await jsm.consumers.add(stream, { durable_name: 'd', ack_policy: AckPolicy.Explicit, ack_wait: 30_000_000_000 });
});

afterAll(async () => {
  for (const connection of connections) await connection.close();
  await jsm?.streams.delete(stream).catch(() => {});
  await nc?.close();
  for (const server of servers) await server.stop();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

function connectionTo(natsUrl = NATS_URL): NatsDirect {
  const made = new NatsDirect({ natsUrl, ackTimeoutMs: 3000 });
  connections.push(made);
  return made;
}

async function ownServer(args: string[]): Promise<NatsProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-pull-'));
  dirs.push(dir);
  const server = await startNatsServer(dir, args);
  servers.push(server);
  return server;
}

/** A server of this test's own with an empty stream EMPTY and its durable `d`; its URL without credentials. */
async function serverWithStream(args: string[], credentials: { user: string; pass: string } | { token: string }): Promise<string> {
  const { url } = await ownServer(args);
  const own = await connect({ servers: url, ...credentials });
  const ownJsm = await jetstreamManager(own);
  await ownJsm.streams.add({ name: 'EMPTY', subjects: ['empty'] });
  await ownJsm.consumers.add('EMPTY', { durable_name: 'd', ack_policy: AckPolicy.Explicit });
  await own.close();
  return url;
}

describe('NatsDirect', () => {
  it('pulls messages whole (1 MiB payloads, headers), acks them, and a nak brings one back counted as a redelivery', async () => {
    const js = jetstream(nc);
    const payloads = [0, 1, 2].map((i) => randomBytes(1024 * 1024 - 4096 + i));
    for (const [i, payload] of payloads.entries()) {
      const h = headers();
      h.set('Sluice-Rows', String(100 + i));
      await js.publish(subject, payload, { headers: h });
    }
    const pulls = connectionTo();
    const first = await pulls.fetch(stream, 'd', 2, 2000);
    expect(first.map((m) => [m.stream, m.seq, m.deliveryCount, m.headers?.get('Sluice-Rows')])).toEqual([
      [stream, 1, 1, '100'],
      [stream, 2, 1, '101'],
    ]);
    expect(first.map((m) => m.data.equals(payloads[m.seq - 1]!))).toEqual([true, true]);
    await first[0]!.ackAck();
    first[1]!.nak();
    // The pull asked for 3: two come (seq 3, and seq 2 again), then the server ends it at its expiry.
    const second = await pulls.fetch(stream, 'd', 3, 1500);
    expect(second.map((m) => [m.seq, m.deliveryCount]).sort()).toEqual([
      [2, 2],
      [3, 1],
    ]);
    await Promise.all(second.map((m) => m.ackAck()));
    const info = await jsm.consumers.info(stream, 'd');
    expect([info.num_pending, info.num_ack_pending]).toEqual([0, 0]);
  });

  it('publishes a message written part by part, with headers, and resolves with its PubAck; no stream: a 503 answer', async () => {
    const direct = connectionTo();
    const parts = [randomBytes(300 * 1024), randomBytes(17), randomBytes(700 * 1024)];
    const headers = 'NATS/1.0\r\nNats-Msg-Id: direct-1\r\nSluice-Rows: 3\r\n\r\n';
    const answer = await direct.request(subject, headers, parts, 5000);
    const ack = JSON.parse(answer.data.toString()) as { stream: string; seq: number; duplicate?: boolean };
    expect(ack.stream).toBe(stream);
    const stored = await jsm.streams.getMessage(stream, { seq: ack.seq });
    expect(Buffer.from(stored!.data).equals(Buffer.concat(parts))).toBe(true);
    expect([stored!.header.get('Nats-Msg-Id'), stored!.header.get('Sluice-Rows')]).toEqual(['direct-1', '3']);
    // The same msgID again is the stream's duplicate, not a second message.
    const again = JSON.parse((await direct.request(subject, headers, parts, 5000)).data.toString()) as typeof ack;
    expect([again.seq, again.duplicate]).toEqual([ack.seq, true]);
    const noStream = await direct.request(`${subject}-nowhere`, 'NATS/1.0\r\n\r\n', [Buffer.from('x')], 5000);
    expect([noStream.headers?.status, noStream.data.length]).toEqual([503, 0]);
    // Consume what this test stored, for the tests after it.
    const pulled = await direct.fetch(stream, 'd', 1, 2000);
    await Promise.all(pulled.map((m) => m.ackAck()));
  });

  it('a publish written to a server that stops answering fails as unanswered, after its timeout', async () => {
    const server = await ownServer([]);
    const direct = connectionTo(server.url);
    await direct.open();
    await server.freeze();
    try {
      const started = Date.now();
      const err = await direct.request('anywhere', 'NATS/1.0\r\n\r\n', [Buffer.from('x')], 300).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnansweredError);
      expect(err).toMatchObject({ timedOut: true });
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    } finally {
      server.thaw();
    }
  });

  it('lends a released message\'s memory to the next payloads, which arrive whole', async () => {
    const js = jetstream(nc);
    const payloads = [0, 1, 2, 3].map(() => randomBytes(600 * 1024));
    for (const payload of payloads) await js.publish(subject, payload);
    const pulls = connectionTo();
    const first = await pulls.fetch(stream, 'd', 2, 2000);
    expect(first.map((m, i) => m.data.equals(payloads[i]!))).toEqual([true, true]);
    await Promise.all(first.map((m) => m.ackAck()));
    const lent = new Set(first.map((m) => m.data.buffer));
    for (const message of first) {
      message.release();
      message.release(); // a second call does nothing
    }
    const second = await pulls.fetch(stream, 'd', 2, 2000);
    expect(second.map((m) => m.seq - first[0]!.seq)).toEqual([2, 3]);
    expect(second.every((m) => lent.has(m.data.buffer))).toBe(true);
    expect(second.map((m, i) => m.data.equals(payloads[2 + i]!))).toEqual([true, true]);
    await Promise.all(second.map((m) => m.ackAck()));
  });

  it('messages delivered before their connection broke are kept and acked over the next connection', async () => {
    const js = jetstream(nc);
    for (let i = 0; i < 3; i++) await js.publish(subject, Buffer.from(`kept ${i}`));
    const pulls = connectionTo();
    const pulling = pulls.fetch(stream, 'd', 10, 20_000);
    type Open = { socket: { destroy(): void }; pulls: Map<number, { messages: unknown[] }> };
    const connection = await (pulls as unknown as { connection: Promise<Open> }).connection;
    // Broken once all three were read from the socket (the server counting them as delivered is not enough).
    const received = () => [...connection.pulls.values()].reduce((sum, pull) => sum + pull.messages.length, 0);
    const deadline = Date.now() + 10_000;
    while (received() < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    connection.socket.destroy();
    const info = async () => jsm.consumers.info(stream, 'd');
    const kept = await pulling;
    expect(kept.map((m) => m.data.toString())).toEqual(['kept 0', 'kept 1', 'kept 2']);
    await Promise.all(kept.map((m) => m.ackAck()));
    expect([(await info()).num_pending, (await info()).num_ack_pending]).toEqual([0, 0]);
  });

  it('an empty stream: the pull ends at its expiry with nothing', async () => {
    const started = Date.now();
    expect(await connectionTo().fetch(stream, 'd', 4, 1000)).toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it('a signal ends a pull at once; a message published after that goes to the next pull, not held until ack wait', async () => {
    // A durable of its own, from now on: no pull of another test waits on it.
    await jsm.consumers.add(stream, { durable_name: 'stopped', ack_policy: AckPolicy.Explicit, ack_wait: 30_000_000_000, deliver_policy: DeliverPolicy.New });
    const pulls = connectionTo();
    const stop = new AbortController();
    const pulling = pulls.fetch(stream, 'stopped', 4, 60_000, stop.signal);
    const deadline = Date.now() + 10_000;
    while ((await jsm.consumers.info(stream, 'stopped')).num_waiting === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    stop.abort();
    expect(await pulling).toEqual([]);
    await jetstream(nc).publish(subject, Buffer.from('after the stop'));
    // The next pull has it, long before the 30 s ack wait: either the ended pull's UNSUB reached
    // the server first, or the message reached the ended pull and was handed back at once (then
    // it counts a second delivery).
    const [next, ...more] = await pulls.fetch(stream, 'stopped', 4, 5000);
    expect([next?.data.toString(), more.length]).toEqual(['after the stop', 0]);
    expect(next!.deliveryCount).toBeLessThanOrEqual(2);
    await next!.ackAck();
    expect(await pulls.fetch(stream, 'stopped', 1, 1000, AbortSignal.abort())).toEqual([]);
  });

  it('a consumer that does not exist: nats-server 2.9 does not answer; the pull fails after its expiry and a grace', async () => {
    await expect(connectionTo().fetch(stream, 'no-such-consumer', 1, 500)).rejects.toThrow(/a pull got no answer 5500 ms after it was sent/);
  });

  it('connects with user:password@ and token@ URLs; wrong credentials fail without showing them', async () => {
    const withUser = await serverWithStream(['--user', 'ingest', '--pass', 's3cr3t'], { user: 'ingest', pass: 's3cr3t' });
    expect(await connectionTo(withUser.replace('//', '//ingest:s3cr3t@')).fetch('EMPTY', 'd', 1, 500)).toEqual([]);
    const wrong = connectionTo(withUser.replace('//', '//ingest:wrong-pass@')).fetch('EMPTY', 'd', 1, 500);
    await expect(wrong).rejects.toThrow(/Authorization Violation/);
    await expect(wrong).rejects.not.toThrow(/wrong-pass/);

    const withToken = await serverWithStream(['--auth', 'tok3n'], { token: 'tok3n' });
    expect(await connectionTo(withToken.replace('//', '//tok3n@')).fetch('EMPTY', 'd', 1, 500)).toEqual([]);
    await expect(connectionTo(withToken).fetch('EMPTY', 'd', 1, 500)).rejects.toThrow(/Authorization Violation/);
  });

  it('speaks TLS to a tls:// server (NATS sends INFO in plain text, then the handshake)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-pull-tls-'));
    dirs.push(dir);
    const [cert, key] = [join(dir, 'cert.pem'), join(dir, 'key.pem')];
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
    const ca = await readFile(cert);
    const { url } = await ownServer(['--tls', '--tlscert', cert, '--tlskey', key]);
    const tlsUrl = url.replace('nats://', 'tls://');
    const own = await connect({ servers: tlsUrl, tls: { ca: ca.toString() } });
    const ownJsm = await jetstreamManager(own);
    await ownJsm.streams.add({ name: 'SECURE', subjects: ['secure'] });
    await ownJsm.consumers.add('SECURE', { durable_name: 'd', ack_policy: AckPolicy.Explicit });
    await jetstream(own).publish('secure', Buffer.from('over tls'));
    await own.close();
    const pulls = new NatsDirect({ natsUrl: tlsUrl, tls: { ca } });
    connections.push(pulls);
    const [message] = await pulls.fetch('SECURE', 'd', 1, 2000);
    expect(message?.data.toString()).toBe('over tls');
    await message!.ackAck();
    // The same server through a nats:// URL: it requires TLS, and the error says what to write.
    await expect(connectionTo(url).fetch('SECURE', 'd', 1, 500)).rejects.toThrow(/requires TLS: give NATS_URL as tls:\/\//);
  });

  it('a server that goes away fails the pull waiting on it; the next pull opens a new connection (or says why it cannot)', async () => {
    const server = await ownServer([]);
    const own = await connect({ servers: server.url });
    const ownJsm = await jetstreamManager(own);
    await ownJsm.streams.add({ name: 'GOING', subjects: ['going'] });
    await ownJsm.consumers.add('GOING', { durable_name: 'd', ack_policy: AckPolicy.Explicit });
    await own.close();
    const pulls = connectionTo(server.url);
    const waiting = pulls.fetch('GOING', 'd', 1, 10_000).catch((err: Error) => err);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await server.stop();
    expect(String(await waiting)).toMatch(/connection closed/);
    expect(pulls.unreachable).toBeUndefined();
    await expect(pulls.fetch('GOING', 'd', 1, 500)).rejects.toThrow(/cannot open a connection to NATS at nats:\/\/127\.0\.0\.1:\d+/);
    // Unreachable from the first failed attempt on, and said so (the bus's readiness shows it).
    const since = pulls.unreachable!;
    expect(since.reason).toMatch(/cannot open a connection to NATS/);
    await expect(pulls.fetch('GOING', 'd', 1, 500)).rejects.toThrow();
    expect(pulls.unreachable!.at).toBe(since.at);
  });

  it('is reachable again once a server answers', async () => {
    const server = await ownServer([]);
    const direct = connectionTo(server.url);
    await server.stop();
    await expect(direct.open()).rejects.toThrow();
    expect(direct.unreachable).toBeDefined();
    const back = await ownServer(['-p', new URL(server.url).port]);
    await direct.open();
    expect(direct.unreachable).toBeUndefined();
    await direct.close();
    await back.stop();
  });
});
