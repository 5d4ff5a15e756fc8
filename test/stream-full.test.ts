/**
 * Full means refuse, never drop (cluster mode): a gateway whose JetStream stream is at its
 * max_bytes answers 503 + Retry-After, and once a consumer drains the stream, exactly the
 * requests that got 200 are stored — no acknowledged row was evicted to make room.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningSluice } from '../bin/app.ts';
import { eventually, removeNatsPrefixes, startTestRole } from './harness.ts';
import { encodeTraces, traceRequest } from './otlp-fixtures.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const prefix = `T${randomBytes(4).toString('hex').toUpperCase()}`;
let dataDir: string;
const running: RunningSluice[] = [];

const start = async (role: 'gateway' | 'consume') => {
  const app = await startTestRole(role, dataDir, {
    'pipeline.workers': 1,
    'nats.url': NATS_URL,
    'nats.prefix': prefix,
    'nats.maxStreamBytes': 1024 * 1024, // about 15 of the requests below
    'limits.rateBurst': 100_000,
  });
  running.push(app);
  return app;
};

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'sluice-full-'));
});
afterAll(async () => {
  for (const app of running.reverse()) await app.shutdown();
  await removeNatsPrefixes(NATS_URL, [prefix]);
  await rm(dataDir, { recursive: true, force: true });
});

describe('a full JetStream stream', () => {
  it('refuses with 503 + Retry-After; every request acknowledged with 200 is stored, none refused is', async () => {
    const gateway = await start('gateway');
    const source = await gateway.sources.createSource('fill');
    const send = (i: number) =>
      fetch(`http://127.0.0.1:${gateway.httpPort}/v1/traces`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-protobuf', 'x-api-key': source.apiKey },
        body: encodeTraces(traceRequest({ spans: 100, name: `request-${i}` })),
      });
    const statuses: number[] = [];
    // Waves of concurrent requests until the stream has refused a good number of them.
    for (let wave = 0; wave < 10 && statuses.filter((s) => s === 503).length < 20; wave++) {
      const responses = await Promise.all(Array.from({ length: 8 }, (_, i) => send(statuses.length + i)));
      for (const response of responses) {
        statuses.push(response.status);
        if (response.status === 503) expect(response.headers.get('retry-after')).toBe('5');
      }
    }
    expect(new Set(statuses)).toEqual(new Set([200, 503]));
    const ready = await fetch(`http://127.0.0.1:${gateway.httpPort}/api/v1/ready`);
    expect(ready.status).toBe(503);
    expect((await ready.json()).components.bus).toMatchObject({ ok: false, detail: expect.stringContaining('stream full') });

    const consumer = await start('consume');
    const count = async () =>
      (await consumer.storage!.query(`SELECT SpanName AS name, count() AS n FROM otel.otel_traces WHERE SourceId = '${source.id}' GROUP BY name`, 'JSONEachRow'))
        .split('\n').filter(Boolean).map((line) => JSON.parse(line) as { name: string; n: string });
    const acknowledged = statuses.flatMap((status, i) => (status === 200 ? [`request-${i}`] : []));
    const rows = (await eventually(async () => {
      const stored = await count();
      return stored.length >= acknowledged.length ? stored : undefined;
    }, 30_000, 200))!;
    expect(rows.map((r) => r.name).sort()).toEqual(acknowledged.sort());
    for (const row of rows) expect(Number(row.n), row.name).toBe(100);
  });
});
