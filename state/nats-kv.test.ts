/**
 * The NATS KV state store against a real nats-server with JetStream (NATS_URL, default
 * nats://127.0.0.1:4222; deploy/services.sh starts one). Each test uses buckets of its own.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { InstallTokens, MAX_INSTALL_TOKENS_PER_SOURCE } from '../gateway/install-tokens.ts';
import { CapReachedError, MAX_KEYS_PER_SOURCE, SourceRegistry } from '../gateway/sources.ts';
import { capturedLog, escapedErrors, watchFeeds } from '../test/faults.ts';
import { eventually } from '../test/harness.ts';
import { startNatsServer, type NatsProcess } from '../test/sluice-processes.ts';
import { StateMirror } from './mirror.ts';
import { NatsKvStateStore } from './nats-kv.ts';
import { recordOf } from './shape.ts';
import type { StateStore } from './store.ts';
import { describeStateStore } from './store.suite.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const connections: NatsConnection[] = [];
const prefixes: string[] = [];

async function natsConnection(): Promise<NatsConnection> {
  try {
    const nc = await connect({ servers: NATS_URL, timeout: 3000 });
    connections.push(nc);
    return nc;
  } catch (err) {
    throw new Error(`NATS is not reachable at ${NATS_URL} (start it with deploy/services.sh): ${(err as Error).message}`);
  }
}

function freshPrefix(): string {
  const prefix = `t${randomBytes(4).toString('hex')}_`;
  prefixes.push(prefix);
  return prefix;
}

afterAll(async () => {
  // Remove every bucket the tests made (a KV bucket is the stream KV_<name>).
  if (connections[0]) {
    const jsm = await jetstreamManager(connections[0]);
    for await (const stream of jsm.streams.list()) {
      if (prefixes.some((p) => stream.config.name.startsWith(`KV_${p}`))) await jsm.streams.delete(stream.config.name);
    }
  }
  for (const nc of connections) await nc.close();
});

interface Thing {
  name: string;
  n: number;
}
const isThing = recordOf<Thing>({ name: 'string', n: 'number' });

/** Puts an ever-growing counter into `things` until stopped; stop() answers the last value written. */
function keepWriting(store: StateStore) {
  let n = 0;
  let writing = true;
  const done = (async () => {
    while (writing) {
      await store.put('things', 'counter', { name: 'counter', n: ++n });
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  return {
    written: () => n,
    async stop() {
      writing = false;
      await done;
      return n;
    },
  };
}

describeStateStore('nats-kv', async () => new NatsKvStateStore(await natsConnection(), { bucketPrefix: freshPrefix() }));

describe('NatsKvStateStore across gateways', () => {
  let a: NatsKvStateStore;
  let b: NatsKvStateStore;

  beforeAll(async () => {
    const prefix = freshPrefix();
    a = new NatsKvStateStore(await natsConnection(), { bucketPrefix: prefix });
    b = new NatsKvStateStore(await natsConnection(), { bucketPrefix: prefix });
  });
  afterAll(async () => {
    await a?.shutdown();
    await b?.shutdown();
  });

  it('reads from the bucket\'s leader, so a record just written is read back (a direct get may come from a replica behind)', async () => {
    const prefix = freshPrefix();
    const store = new NatsKvStateStore(await natsConnection(), { bucketPrefix: prefix });
    await store.put('things', 'written', { n: 1 });
    expect(await store.get('things', 'written')).toEqual({ n: 1 });
    const jsm = await jetstreamManager(await natsConnection());
    expect((await jsm.streams.info(`KV_${prefix}things`)).config.allow_direct).toBe(false);
    await store.shutdown();
  });

  it('tries a read again while its bucket\'s stream is not found (a node just restarted has not loaded it yet), and answers once it is', async () => {
    const prefix = freshPrefix();
    const nc = await natsConnection();
    const store = new NatsKvStateStore(nc, { bucketPrefix: prefix });
    await store.put('things', 'one', { n: 1 });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(`KV_${prefix}things`);
    const read = store.get('things', 'one');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const back = await new Kvm(nc).create(`${prefix}things`, { history: 1, allow_direct: false });
    await back.put('one', JSON.stringify({ n: 1 }));
    expect(await read).toEqual({ n: 1 });
    await store.shutdown();
  });

  it('reports a write it cannot make (NATS gone) as unavailable, so callers answer 503, not 500', async () => {
    const nc = await natsConnection();
    const store = new NatsKvStateStore(nc, { bucketPrefix: freshPrefix() });
    await store.start();
    await store.put('things', 'one', { n: 1 });
    await nc.close();
    for (const write of [() => store.put('things', 'two', { n: 2 }), () => store.create('things', 'three', { n: 3 }), () => store.update('things', 'one', { n: 4 }, 1), () => store.delete('things', 'one')]) {
      await expect(write()).rejects.toMatchObject({ name: 'SluiceError', code: 'unavailable' });
    }
    await store.shutdown();
  });

  it('stores keys KV would not accept, reversibly', async () => {
    await a.put('odd', 'user@example.com:1 ü', { ok: true });
    expect(await b.get('odd', 'user@example.com:1 ü')).toEqual({ ok: true });
    expect(await b.list('odd')).toEqual([['user@example.com:1 ü', { ok: true }]]);
  });

  it('a key revoked through one gateway is refused by another', async () => {
    const first = new SourceRegistry(a);
    const second = new SourceRegistry(b);
    await first.start();
    await second.start();
    const source = await first.createSource('fleet');
    await eventually(() => second.authenticate(source.apiKey) === source.id, 10_000, 10);
    await first.revokeKey(source.keyId);
    await eventually(() => second.authenticate(source.apiKey) === undefined, 10_000, 10);
    await first.shutdown();
    await second.shutdown();
  });

  it("holds a source's key and install-token caps when two gateways create them at once", async () => {
    const first = new SourceRegistry(a);
    const second = new SourceRegistry(b);
    await first.start();
    await second.start();
    const source = await first.createSource('capped');
    const tokens = [new InstallTokens(a, first), new InstallTokens(b, second)];
    const madeTokens = await Promise.allSettled(Array.from({ length: MAX_INSTALL_TOKENS_PER_SOURCE + 4 }, (_, i) => tokens[i % 2]!.create(source.id)));
    expect(madeTokens.filter((r) => r.status === 'fulfilled')).toHaveLength(MAX_INSTALL_TOKENS_PER_SOURCE);
    expect(madeTokens.every((r) => r.status === 'fulfilled' || r.reason instanceof CapReachedError)).toBe(true);
    const registries = [first, second];
    const madeKeys = await Promise.allSettled(Array.from({ length: MAX_KEYS_PER_SOURCE }, (_, i) => registries[i % 2]!.addKey(source.id)));
    expect(madeKeys.filter((r) => r.status === 'fulfilled')).toHaveLength(MAX_KEYS_PER_SOURCE - 1 - MAX_INSTALL_TOKENS_PER_SOURCE);
    expect(madeKeys.every((r) => r.status === 'fulfilled' || r.reason instanceof CapReachedError)).toBe(true);
    const active = (await second.listSources()).find((s) => s.id === source.id)!.keys.filter((k) => !k.revokedAt);
    expect(active).toHaveLength(MAX_KEYS_PER_SOURCE);
    await first.shutdown();
    await second.shutdown();
  });
});

describe('NatsKvStateStore: values that are not JSON, watches that end', () => {
  const errors = escapedErrors();
  afterEach(() => vi.restoreAllMocks());
  afterAll(() => errors.dispose());

  it('counts and skips a value that is not JSON, in a watch under traffic and at start; nothing escapes', async () => {
    const nc = await natsConnection();
    const prefix = freshPrefix();
    const { log, lines, entries } = capturedLog();
    const store = new NatsKvStateStore(nc, { bucketPrefix: prefix, log });
    await store.put('things', 'a', { name: 'a', n: 1 });
    const raw = await new Kvm(nc).open(`${prefix}things`);
    await raw.put('early', 'not json{');
    const mirror = new StateMirror(store, 'things', { validate: isThing, log });
    await mirror.start();
    expect(mirror.values()).toEqual([{ name: 'a', n: 1 }]);
    expect(mirror.status()).toMatchObject({ ok: true, figures: { badValues: 1 } });

    const traffic = keepWriting(store);
    await eventually(() => mirror.get('counter'));
    await raw.put('late', 'not json{');
    await raw.put('a', new Uint8Array([0xff, 0x00, 0x7b]));
    const before = traffic.written();
    await eventually(() => (mirror.get('counter')?.n ?? 0) > before + 5);
    const last = await traffic.stop();
    await eventually(() => mirror.get('counter')?.n === last);

    expect(mirror.get('a')).toBeUndefined();
    expect(mirror.status()).toMatchObject({ ok: true, figures: { badValues: 3, restarts: 0 } });
    expect(await store.get('things', 'late')).toBeUndefined();
    expect((await store.list('things')).map(([key]) => key).sort()).toEqual(['counter']);
    expect(errors.escaped).toEqual([]);
    // Logged once per key, with its bucket and key, never with the value.
    const warned = entries().filter((entry) => entry.msg === 'skipped a stored value that cannot be read');
    expect(warned.map((entry) => entry.recordKey).sort()).toEqual(['a', 'early', 'late']);
    expect(new Set(warned.map((entry) => entry.bucket))).toEqual(new Set([`${prefix}things`]));
    expect(lines.join('\n')).not.toContain('not json');
    mirror.stop();
    await store.shutdown();
  });

  it('re-opens a watch whose feed ended or failed, from the last revision: a put and a delete made meanwhile arrive', async () => {
    const nc = await natsConnection();
    const prefix = freshPrefix();
    const store = new NatsKvStateStore(nc, { bucketPrefix: prefix, log: capturedLog().log, watchMinBackoffMs: 10 });
    await store.put('things', 'doomed', { name: 'd', n: 0 });
    const feeds = watchFeeds(`${prefix}things`);
    const mirror = new StateMirror(store, 'things', { validate: isThing, log: capturedLog().log });
    await mirror.start();
    await store.put('things', 'a', { name: 'a', n: 1 });
    await eventually(() => mirror.get('a'));

    // The feed ends the way nats.js ends it; the re-open waits until the test has changed the bucket.
    const reopen = feeds.holdNextOpen();
    feeds.latest().stop();
    await eventually(() => !mirror.status().ok);
    expect(mirror.status().detail).toBe('watch re-opening after: the watch ended by itself');
    await store.put('things', 'b', { name: 'b', n: 2 });
    await store.delete('things', 'doomed');
    await store.put('things', 'a', { name: 'a', n: 3 });
    reopen.release();
    await eventually(() => mirror.get('b') && !mirror.get('doomed') && mirror.get('a')?.n === 3);
    await eventually(() => mirror.status().ok);
    expect(mirror.status().figures).toMatchObject({ restarts: 1 });

    // A feed that fails (a subscription error) is re-opened too.
    feeds.latest().stop(new Error('permissions violation'));
    await store.put('things', 'c', { name: 'c', n: 4 });
    await eventually(() => mirror.get('c'));
    await eventually(() => mirror.status().ok && mirror.status().figures!.restarts === 2);
    expect(errors.escaped).toEqual([]);
    mirror.stop();
    await store.shutdown();
  });

  it('re-opens a watch that delivers nothing while its bucket moves on (quiet after every server restarted), from the last revision it delivered', async () => {
    const nc = await natsConnection();
    const prefix = freshPrefix();
    const store = new NatsKvStateStore(nc, { bucketPrefix: prefix, log: capturedLog().log, watchMinBackoffMs: 10, watchAuditMs: 300 });
    await store.put('things', 'a', { name: 'a', n: 1 });
    const feeds = watchFeeds(`${prefix}things`);
    feeds.muteNextOpen();
    const mirror = new StateMirror(store, 'things', { validate: isThing, log: capturedLog().log });
    await mirror.start();
    expect(mirror.get('a')).toEqual({ name: 'a', n: 1 });
    // A quiet bucket is no reason to re-open: the watch is owed nothing.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(mirror.status()).toMatchObject({ ok: true, figures: { restarts: 0 } });
    await store.put('things', 'b', { name: 'b', n: 2 });
    await store.delete('things', 'a');
    await eventually(() => mirror.get('b') && !mirror.get('a'), 15_000);
    expect(mirror.status().figures).toMatchObject({ restarts: 1 });
    mirror.stop();
    await store.shutdown();
  });

  it('follows a bucket created again (its revisions start at 1) from its start, not from the revision it had reached', async () => {
    const nc = await natsConnection();
    const prefix = freshPrefix();
    const store = new NatsKvStateStore(nc, { bucketPrefix: prefix, log: capturedLog().log, watchMinBackoffMs: 10, watchAuditMs: 300 });
    for (let n = 1; n <= 5; n++) await store.put('things', `old-${n}`, { name: 'old', n });
    const mirror = new StateMirror(store, 'things', { validate: isThing, log: capturedLog().log });
    await mirror.start();
    expect(mirror.get('old-5')).toEqual({ name: 'old', n: 5 });
    // The bucket is deleted and made again (as a crash that lost its last revisions leaves it): revisions 1 and 2 are new.
    const kvm = new Kvm(nc);
    await (await kvm.open(`${prefix}things`)).destroy();
    const bucket = await kvm.create(`${prefix}things`, { history: 1, allow_direct: false });
    await bucket.put('new-1', JSON.stringify({ name: 'new', n: 1 }));
    await bucket.put('new-2', JSON.stringify({ name: 'new', n: 2 }));
    await eventually(() => mirror.get('new-2'), 15_000);
    expect(mirror.get('new-1')).toEqual({ name: 'new', n: 1 });
    mirror.stop();
    await store.shutdown();
  });

  it('a watch that cannot be opened at first keeps trying, and then delivers what changed meanwhile', async () => {
    const nc = await natsConnection();
    const prefix = freshPrefix();
    const store = new NatsKvStateStore(nc, { bucketPrefix: prefix, log: capturedLog().log, watchMinBackoffMs: 10 });
    await store.put('things', 'a', { name: 'a', n: 1 });
    const feeds = watchFeeds(`${prefix}things`);
    feeds.failNextOpens(new Error('JetStream not ready'));
    const retried = feeds.holdNextOpen();
    const mirror = new StateMirror(store, 'things', { validate: isThing, log: capturedLog().log });
    await mirror.start();
    // Loaded by the list, but not ok: its watch is not open yet.
    expect(mirror.get('a')).toEqual({ name: 'a', n: 1 });
    await eventually(() => mirror.status().detail === 'watch re-opening after: JetStream not ready');
    await store.put('things', 'b', { name: 'b', n: 2 });
    await store.delete('things', 'a');
    retried.release();
    await eventually(() => mirror.get('b') && !mirror.get('a'));
    await eventually(() => mirror.status().ok);
    expect(mirror.status().figures).toMatchObject({ restarts: 1 });
    mirror.stop();
    await store.shutdown();
  });

  it('a wrong-shaped API key record breaks neither authentication of other keys nor listing and revoking them', async () => {
    const prefix = freshPrefix();
    const gatewayA = new NatsKvStateStore(await natsConnection(), { bucketPrefix: prefix, log: capturedLog().log });
    const gatewayB = new NatsKvStateStore(await natsConnection(), { bucketPrefix: prefix, log: capturedLog().log });
    const writer = new SourceRegistry(gatewayA, capturedLog().log);
    const reader = new SourceRegistry(gatewayB, capturedLog().log);
    await writer.start();
    await reader.start();
    const first = await writer.createSource('first');
    await eventually(() => reader.authenticate(first.apiKey));
    await gatewayA.put('api_keys', 'key_nohash', { id: 'key_nohash', sourceId: first.id });
    await gatewayA.put('api_keys', 'key_null', null);
    await gatewayA.put('api_keys', 'key_numeric', { id: 'key_numeric', sourceId: first.id, hash: 42 });
    const second = await writer.createSource('second');
    await eventually(() => reader.authenticate(second.apiKey));
    expect(reader.authenticate(first.apiKey)).toBe(first.id);

    expect((await reader.listSources()).map((source) => source.keys.length)).toEqual([1, 1]);
    await reader.revokeKey(first.apiKey);
    await eventually(() => !writer.authenticate(first.apiKey));
    expect(reader.authenticate(second.apiKey)).toBe(second.id);
    await eventually(() => reader.status().figures!.badValues === 3);
    expect(reader.status().ok).toBe(true);
    expect(errors.escaped).toEqual([]);
    await writer.shutdown();
    await reader.shutdown();
    await gatewayA.shutdown();
    await gatewayB.shutdown();
  });
});

describe('NatsKvStateStore reads while its bucket cannot answer', () => {
  // A server of this test's own, frozen (SIGSTOP) as a bucket is while its nodes elect a leader.
  let dir: string;
  let server: NatsProcess;
  let nc: NatsConnection;
  /** Runs `reads` once the server is frozen (every thread stopped: one still running could answer), thaws it after `ms`. */
  const whileFrozenFor = async <T>(ms: number, reads: () => Promise<T>): Promise<T> => {
    await server.freeze();
    const pending = reads();
    await new Promise((resolve) => setTimeout(resolve, ms));
    server.thaw();
    return pending;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sluice-kv-frozen-'));
    server = await startNatsServer(dir);
    nc = await connect({ servers: server.url, timeout: 3000 });
  }, 30_000);
  afterAll(async () => {
    server?.thaw();
    await nc?.close();
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('tries a read again while no answer comes, past one request\'s timeout (5 s), and answers once one does', async () => {
    const store = new NatsKvStateStore(nc, { bucketPrefix: 'frozen_' });
    await store.put('things', 'one', { n: 1 });
    const reads = await whileFrozenFor(8000, () => Promise.all([store.get('things', 'one'), store.getVersioned('things', 'one'), store.list('things')]));
    expect(reads).toEqual([{ n: 1 }, { value: { n: 1 }, revision: 1 }, [['one', { n: 1 }]]]);
    await store.shutdown();
  }, 30_000);

  it('past its patience, refuses the read as unavailable (503 + Retry-After), not with the driver\'s error', async () => {
    const store = new NatsKvStateStore(nc, { bucketPrefix: 'patience_', readPatienceMs: 1000 });
    await store.put('things', 'one', { n: 1 });
    // Frozen well past the request's timeout (5 s), so the answer cannot beat the timer on a loaded machine.
    await whileFrozenFor(12_000, () => expect(store.get('things', 'one')).rejects.toMatchObject({ name: 'SluiceError', code: 'unavailable', message: expect.stringMatching(/^the state store could not be read: /) }));
    await store.shutdown();
  }, 40_000);
});
