/**
 * The relay on two cluster gateways (state on the real NATS KV, one master key) and a storage
 * consumer: a session issued by one gateway works on the other, configuration made on one is
 * served by the other, an API key revoked on one is refused by the other; public submissions go
 * through JetStream into storage, one Idempotency-Key runs once across both gateways, and the
 * per-IP windows are shared through Redis.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningSluice } from '../bin/app.ts';
import { removeNatsPrefixes, startTestRole } from './harness.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const prefix = `T${randomBytes(4).toString('hex').toUpperCase()}`;
let dataDir: string;
let gateways: RunningSluice[] = [];
let consumer: RunningSluice;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sluice-relay-cluster-'));
  const overrides = {
    'pipeline.workers': 1,
    'nats.url': NATS_URL,
    'nats.prefix': prefix,
    'nats.maxStreamBytes': 16 * 1024 * 1024,
    'relay.masterKey': randomBytes(32).toString('base64'),
    // Sign-in buckets shared through Redis (keys under this run's prefix).
    'redis.url': process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    // Generous: on a loaded machine a slow answer would move the windows to each gateway.
    'redis.timeoutMs': 5000,
    'limits.trustedProxies': ['127.0.0.1'],
  };
  gateways = [await startTestRole('gateway', dataDir, overrides), await startTestRole('gateway', dataDir, overrides)];
  consumer = await startTestRole('consume', dataDir, overrides);
});

afterAll(async () => {
  await consumer?.shutdown();
  for (const gateway of gateways.reverse()) await gateway.shutdown();
  await removeNatsPrefixes(NATS_URL, [prefix]);
  await rm(dataDir, { recursive: true, force: true });
});

async function until<T>(fn: () => T | Promise<T>, ok: (value: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  let value = await fn();
  while (!ok(value) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10));
    value = await fn();
  }
  return value;
}

describe('relay in cluster mode', () => {
  it('shares tenants, sessions and API keys across gateways; a revoked key is refused everywhere', async () => {
    const [one, two] = gateways as [RunningSluice, RunningSluice];
    expect(one.relay).toBeDefined();
    const url = (gateway: RunningSluice, path: string) => `http://127.0.0.1:${gateway.relay!.port}/api/v1${path}`;
    const onboarded = (await one.relay!.admin.tenants.onboard({ name: 'Cluster Co', owner: { email: 'owner@cluster.test', password: 'cluster password 1' } })) as { tenant: { id: string } };
    // The owner appears on the other gateway through the KV watch, and signs in there.
    await until(() => two.relay!.store.accounts.usersByEmail('owner@cluster.test')[0], Boolean);
    const login = await fetch(url(two, '/admin/login'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'owner@cluster.test', password: 'cluster password 1' }) });
    expect(login.status).toBe(200);
    const { token } = await login.json();
    const authed = (method: string, body?: unknown) => ({
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    // Session from gateway two, used on gateway one.
    const site = await (await fetch(url(one, '/admin/sites'), authed('POST', { name: 'Shop' }))).json();
    expect(site.tenantId).toBe(onboarded.tenant.id);
    const siteOnTwo = await until(async () => (await fetch(url(two, `/admin/sites/${site.id}`), authed('GET'))).status, (s) => s === 200);
    expect(siteOnTwo).toBe(200);

    const key = await (await fetch(url(two, '/admin/api-keys'), authed('POST', { siteId: site.id, name: 'backend' }))).json();
    expect(await until(() => one.relay!.store.apiKeyFor(key.apiKey)?.siteId, (v) => v === site.id)).toBe(site.id);
    expect((await fetch(url(one, `/admin/api-keys/${key.id}`), authed('DELETE'))).status).toBe(200);
    // until() gives up after 10 s: still known by then fails the test.
    await until(() => two.relay!.store.apiKeyFor(key.apiKey), (v) => v === undefined);
    expect(two.relay!.store.apiKeyFor(key.apiKey)).toBeUndefined();
  });

  it('limits sign-in attempts per client IP across gateways (the buckets live in Redis)', async () => {
    const attempt = (gateway: RunningSluice) =>
      fetch(`http://127.0.0.1:${gateway.relay!.port}/api/v1/admin/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'nobody@cluster.test', password: 'not the password' }),
      }).then((response) => response.status);
    const statuses: number[] = [];
    // Alternating gateways: one bucket of 10 for both, so the 11th attempt is refused (each alone would allow 20).
    for (let i = 0; i < 14; i++) statuses.push(await attempt(gateways[i % 2]!));
    const allowed = statuses.filter((status) => status !== 429).length;
    expect(allowed).toBeLessThanOrEqual(10); // the sign-in of the test above may have used one
    expect(allowed).toBeGreaterThanOrEqual(9);
    expect(statuses.slice(allowed).every((status) => status === 429)).toBe(true);
  });
});

describe('public relay endpoints in cluster mode', () => {
  const post = (gateway: RunningSluice, path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`http://127.0.0.1:${gateway.relay!.port}/api/v1${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  let siteKey = '';
  let ipCounter = 0;
  const ip = () => `198.19.${randomBytes(1)[0]}.${++ipCounter}`;

  beforeAll(async () => {
    const [one, two] = gateways as [RunningSluice, RunningSluice];
    const actor = { tenantId: '', role: 'operator' as const };
    const { tenant } = (await one.relay!.admin.tenants.onboard({ name: 'Public Co', owner: { email: 'owner@public.test', password: 'public password 1' } })) as { tenant: { id: string } };
    actor.tenantId = tenant.id;
    const site = (await one.relay!.admin.sites.create(actor, { name: 'Shop' })) as { id: string; siteKey: string };
    await one.relay!.admin.forms.create(actor, site.id, { name: 'Contact', formKey: 'contact' });
    siteKey = site.siteKey;
    await until(() => two.relay!.store.formByKey(site.id, 'contact'), Boolean);
  });

  it('stores a submission acknowledged by either gateway (JetStream, then the consumer)', async () => {
    const marker = randomBytes(8).toString('hex');
    const replies = await Promise.all(gateways.map((gateway) => post(gateway, '/submissions', { siteKey, formKey: 'contact', data: { marker } }, { 'x-forwarded-for': ip() })));
    expect(replies.map((r) => r.status)).toEqual([201, 201]);
    const count = async () => Number(JSON.parse(await consumer.storage!.query(`SELECT count() AS n FROM otel.relay_submissions WHERE position(Data, '${marker}') > 0`)).n);
    expect(await until(count, (n) => n >= 2)).toBe(2);
  });

  it('runs one Idempotency-Key once across both gateways: one stored, every answer its id or 409', async () => {
    const marker = randomBytes(8).toString('hex');
    const key = `cluster-${marker}`;
    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) =>
      post(gateways[i % 2]!, '/submissions', { siteKey, formKey: 'contact', data: { marker } }, { 'idempotency-key': key, 'x-forwarded-for': ip() })
        .then(async (r) => ({ status: r.status, body: await r.json() as { submissionId?: string } }))));
    const created = replies.filter((r) => r.status === 201);
    expect(created.length + replies.filter((r) => r.status === 409).length).toBe(20);
    expect(new Set(created.map((r) => r.body.submissionId)).size).toBe(1);
    const count = async () => Number(JSON.parse(await consumer.storage!.query(`SELECT count() AS n FROM otel.relay_submissions WHERE position(Data, '${marker}') > 0`)).n);
    await until(count, (n) => n >= 1);
    // A replay after the first finished, through the other gateway.
    const replay = await post(gateways[1]!, '/submissions', { siteKey, formKey: 'contact', data: { marker } }, { 'idempotency-key': key, 'x-forwarded-for': ip() });
    expect((await replay.json() as { submissionId: string }).submissionId).toBe(created[0]!.body.submissionId);
    expect(await count()).toBe(1);
  });

  it('shares each client IP\'s window through Redis: 10 submissions across both gateways, the 11th refused', async () => {
    const client = ip();
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await post(gateways[i % 2]!, '/submissions', { siteKey, formKey: 'contact', data: { i } }, { 'x-forwarded-for': client })).status);
    expect(statuses).toEqual([...Array(10).fill(201), 429]);
  });
});
