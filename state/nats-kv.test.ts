/**
 * The NATS KV state store against a real nats-server with JetStream (NATS_URL, default
 * nats://127.0.0.1:4222; deploy/services.sh starts one). Each test uses buckets of its own.
 */
import { randomBytes } from 'node:crypto';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SourceRegistry } from '../gateway/sources.ts';
import { NatsKvStateStore } from './nats-kv.ts';
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

  it('stores keys KV would not accept, reversibly', async () => {
    await a.put('odd', 'user@example.com:1 ü', { ok: true });
    expect(await b.get('odd', 'user@example.com:1 ü')).toEqual({ ok: true });
    expect(await b.list('odd')).toEqual([['user@example.com:1 ü', { ok: true }]]);
  });

  it('a key revoked through one gateway is refused by another within a second', async () => {
    const first = new SourceRegistry(a);
    const second = new SourceRegistry(b);
    await first.start();
    await second.start();
    const source = await first.createSource('fleet');
    const created = Date.now();
    while (!second.authenticate(source.apiKey) && Date.now() - created < 1000) await new Promise((r) => setTimeout(r, 10));
    expect(second.authenticate(source.apiKey)).toBe(source.id);

    await first.revokeKey(source.keyId);
    const revoked = Date.now();
    while (second.authenticate(source.apiKey) && Date.now() - revoked < 1000) await new Promise((r) => setTimeout(r, 10));
    expect(second.authenticate(source.apiKey)).toBeUndefined();
    await first.shutdown();
    await second.shutdown();
  });
});
