/**
 * A malformed value written into each state bucket a gateway mirrors, while changes keep
 * flowing between two gateways over a real NATS KV: no process exits (nothing escapes as an
 * unhandled rejection), the value is counted in the owner's status for readiness, and the
 * changes after it still arrive.
 */
import { randomBytes } from 'node:crypto';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ComponentStatus } from '../core/readiness.ts';
import { AgentConfigs } from '../gateway/agent-configs.ts';
import { SourceRegistry } from '../gateway/sources.ts';
import { AccountStore } from '../accounts/store.ts';
import type { Collection } from '../state/collection.ts';
import { RelayStore } from '../relay/store.ts';
import { NatsKvStateStore } from '../state/nats-kv.ts';
import type { StateStore } from '../state/store.ts';
import { capturedLog, escapedErrors } from './faults.ts';
import { eventually, removeNatsPrefixes } from './harness.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const log = capturedLog().log;
const errors = escapedErrors();
const prefixes: string[] = [];
let gatewayA: NatsConnection;
let gatewayB: NatsConnection;

beforeAll(async () => {
  try {
    gatewayA = await connect({ servers: NATS_URL, timeout: 3000 });
    gatewayB = await connect({ servers: NATS_URL, timeout: 3000 });
  } catch (err) {
    throw new Error(`NATS is not reachable at ${NATS_URL} (start it with deploy/services.sh): ${(err as Error).message}`);
  }
});
afterAll(async () => {
  errors.dispose();
  await gatewayA?.close();
  await gatewayB?.close();
  await removeNatsPrefixes(NATS_URL, prefixes);
});

/** One bucket's owner on two gateways: change number i written on one, looked for on the other. */
interface Owners {
  write(i: number): Promise<unknown>;
  arrived(i: number): boolean;
  /** The reading gateway's status of the bucket. */
  status(): ComponentStatus;
  stop(): Promise<void>;
}

const stamped = (id: string) => ({ id, createdAt: '2026-01-01T00:00:00Z', updatedAt: '2026-01-01T00:00:00Z' });
type RelayCollection = 'tenants' | 'users' | 'sites' | 'forms' | 'templates' | 'apiKeys';
/** A valid record of each relay collection. */
const RELAY_RECORDS: Record<RelayCollection, (id: string) => { id: string }> = {
  tenants: (id) => ({ ...stamped(id), name: 'tenant' }),
  users: (id) => ({
    ...stamped(id), tenantId: 't', email: `${id}@example.com`, name: 'user', role: 'member', active: true,
    passwordHash: 'x', mustChangePassword: false, sessionVersion: 0,
  }),
  sites: (id) => ({ ...stamped(id), tenantId: 't', name: 'site', siteKey: `sk_${id}`, active: true, allowedOrigins: [] }),
  forms: (id) => ({ ...stamped(id), tenantId: 't', siteId: 's', formKey: id, name: 'form', active: true, recipients: [], webhooks: [] }),
  templates: (id) => ({ ...stamped(id), tenantId: 't', name: 'template', subject: 'subject', html: '<p>hi</p>' }),
  apiKeys: (id) => ({ ...stamped(id), tenantId: 't', siteId: 's', name: 'key', hash: `hash_${id}`, prefix: 'rk_' }),
};

const cases: Array<{ bucket: string; open(writer: StateStore, reader: StateStore): Promise<Owners> }> = [
  {
    bucket: 'api_keys',
    async open(writerStore, readerStore) {
      const writer = new SourceRegistry(writerStore, log);
      const reader = new SourceRegistry(readerStore, log);
      await writer.start();
      await reader.start();
      const source = await writer.createSource('fleet');
      const keys = new Map<number, string>();
      return {
        write: async (i) => keys.set(i, (await writer.addKey(source.id)).apiKey),
        arrived: (i) => keys.has(i) && reader.authenticate(keys.get(i)!) === source.id,
        status: () => reader.status(),
        stop: async () => {
          await writer.shutdown();
          await reader.shutdown();
        },
      };
    },
  },
  {
    bucket: 'agent_configs',
    async open(writerStore, readerStore) {
      const writer = new AgentConfigs(writerStore, log);
      const reader = new AgentConfigs(readerStore, log);
      await writer.start();
      await reader.start();
      return {
        write: (i) => writer.set('source-1', { n: i }),
        arrived: (i) => ((JSON.parse(reader.current('source-1').body) as { config: { n?: number } }).config.n ?? 0) >= i,
        status: () => reader.status(),
        stop: async () => {
          await writer.shutdown();
          await reader.shutdown();
        },
      };
    },
  },
  ...(Object.entries(RELAY_RECORDS) as Array<[RelayCollection, (id: string) => { id: string }]>).map(([collection, record]) => ({
    bucket: `relay_${collection.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`)}`,
    async open(writerStore: StateStore, readerStore: StateStore): Promise<Owners> {
      // Tenants and users are the account store's; the rest the relay store's.
      const open = async (state: StateStore) => {
        const accounts = new AccountStore(state, log);
        const relay = new RelayStore(state, accounts, log);
        await accounts.start();
        await relay.start();
        const owner = collection === 'tenants' || collection === 'users' ? accounts : relay;
        return {
          bucket: owner[collection as keyof typeof owner] as unknown as Collection<{ id: string }>,
          status: () => ({ ...accounts.statuses(), ...relay.statuses() }),
          stop: () => { relay.shutdown(); accounts.shutdown(); },
        };
      };
      const writer = await open(writerStore);
      const reader = await open(readerStore);
      return {
        write: (i) => writer.bucket.put(record(`r${i}`)),
        arrived: (i) => reader.bucket.get(`r${i}`) !== undefined,
        status: () => reader.status()[reader.bucket.bucket]!,
        stop: async () => {
          writer.stop();
          reader.stop();
        },
      };
    },
  })),
];

describe('a malformed value in a state bucket, under traffic between two gateways', () => {
  it.each(cases)('$bucket: no process exits, the value is counted, later changes arrive', async ({ bucket, open }) => {
    const prefix = `t${randomBytes(4).toString('hex')}_`;
    prefixes.push(prefix);
    const writerStore = new NatsKvStateStore(gatewayA, { bucketPrefix: prefix, log });
    const readerStore = new NatsKvStateStore(gatewayB, { bucketPrefix: prefix, log });
    const owners = await open(writerStore, readerStore);
    const raw = await new Kvm(gatewayA).open(prefix + bucket);

    let written = 0;
    let writing = true;
    const traffic = (async () => {
      while (writing) {
        await owners.write(++written);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();
    await eventually(() => owners.arrived(3));
    await raw.put('bad-json', 'not json{');
    await raw.put('bad-shape', JSON.stringify({ unexpected: true }));
    const before = written;
    await eventually(() => owners.arrived(before + 5));
    writing = false;
    await traffic;
    await eventually(() => owners.arrived(written));

    expect(owners.status()).toMatchObject({ ok: true, figures: { badValues: 2, restarts: 0 } });
    expect(errors.escaped).toEqual([]);
    await owners.stop();
    await writerStore.shutdown();
    await readerStore.shutdown();
  });
});
